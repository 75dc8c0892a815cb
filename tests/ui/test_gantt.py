"""The queue Gantt's bars."""

from __future__ import annotations

import pytest

from tests.ui.test_run_model import S, started
from workbench.engine.base.records import RequestRecord
from workbench.engine.events import FirstToken, RequestFinished
from workbench.ui.captions import phase_of
from workbench.ui.run_model import RunModel
from workbench.ui.views.gantt import FAILED_MIN_SHARE, GanttView
from workbench.ui.views.gantt_rows import segments


def test_a_request_refused_at_once_still_shows_as_a_red_bar(qtbot):
    """Refused in 10 ms on a 100-second run: a true-width bar would be under a pixel."""
    gantt = GanttView()
    qtbot.addWidget(gantt)
    model = RunModel()
    started(model, 1)  # submitted at 0 s
    refused = RequestRecord(0, 0, 0, "p", t_submit_ns=0, t_done_ns=S // 100, error="refused")
    model.apply([RequestFinished(refused)])
    gantt.sync(model, 100.0)
    options = gantt.bars["failed"].opts
    assert list(options["x0"]) == [0.01]  # where it ended: no slot ever had it
    assert list(options["width"]) == [FAILED_MIN_SHARE * 100.0]
    assert list(gantt.bars["queued"].opts["width"]) == [pytest.approx(0.01)]


def test_a_request_that_timed_out_in_the_queue_leaves_its_slots_lane_to_the_work(qtbot):
    """A request that waited 300 s for a slot and timed out is grey for its wait and a mark
    where it failed; one that failed in its slot is vermillion from when it got there. In
    the lanes by slot (no grey), neither covers the slot's own work."""
    model = RunModel()
    started(model, 2)
    model.apply([FirstToken(0, 0, 1, 100 * S)])  # the second got its slot at 100 s
    model.apply(
        [
            RequestFinished(RequestRecord(0, 0, 0, "p", t_submit_ns=0, t_done_ns=300 * S)),
            RequestFinished(
                RequestRecord(
                    0, 0, 1, "p", t_submit_ns=0, t_first_token_ns=100 * S, t_done_ns=120 * S,
                    error="disconnected",
                )
            ),
        ]
    )  # fmt: skip
    queued, in_slot = model.ordered()
    assert segments(queued, 400.0) == [("queued", 0.0, 300.0), ("failed", 300.0, 300.0)]
    assert segments(in_slot, 400.0) == [("queued", 0.1, 100.0), ("failed", 100.0, 120.0)]
    gantt = GanttView()
    qtbot.addWidget(gantt)
    gantt.set_lanes(True)
    gantt.sync(model, 400.0)
    widths = list(gantt.bars["failed"].opts["width"])
    assert widths == [pytest.approx(FAILED_MIN_SHARE * 400.0), pytest.approx(20.0)]
    assert list(gantt.bars["queued"].opts["width"]) == []


def test_a_request_a_stop_cut_short_is_cancelled_not_failed(qtbot):
    """A stop (Ctrl-C, Stop) cut the second request mid-answer: its bar, its pane's state and
    the caption call it cancelled, in its own colour; the server's failure stays failed."""
    model = RunModel()
    started(model, 2)
    model.apply([FirstToken(0, 0, 1, 10 * S)])
    model.apply(
        [
            RequestFinished(
                RequestRecord(0, 0, 0, "p", t_submit_ns=0, t_done_ns=5 * S, error="HTTP 500")
            ),
            RequestFinished(
                RequestRecord(
                    0, 0, 1, "p", t_submit_ns=0, t_first_token_ns=10 * S, t_done_ns=20 * S,
                    error="cancelled after 3 token chunks",
                )
            ),
        ]
    )  # fmt: skip
    failed, cut = model.ordered()
    assert (failed.state, cut.state) == ("failed", "cancelled")
    assert segments(cut, 30.0)[-1] == ("cancelled", 10.0, 20.0)
    gantt = GanttView()
    qtbot.addWidget(gantt)
    gantt.sync(model, 30.0)
    assert list(gantt.bars["cancelled"].opts["width"]) == [pytest.approx(10.0)]
    assert len(gantt.bars["failed"].opts["width"]) == 1
    phase = phase_of(model)
    assert (phase.failed, phase.cancelled) == (1, 1)


def test_a_whole_answer_is_split_by_the_servers_timings():
    """Not streamed, an answer arrives at its end: its bar shows the queue, the prefill and
    the decoding the client could not watch, from the server's prompt_ms and predicted_ms."""
    from workbench.engine.base.records import TokenChunk
    from workbench.ui.views.gantt_rows import segments

    model = RunModel()
    started(model, 1)
    whole = RequestRecord(
        0, 0, 0, "p", streamed=False, t_submit_ns=0, t_first_token_ns=10 * S,
        t_last_token_ns=10 * S, t_done_ns=10 * S, ok=True, usage={"completion_tokens": 64},
        timings={"prompt_ms": 2000.0, "predicted_ms": 5000.0}, chunks=[TokenChunk(10 * S, "x")],
    )  # fmt: skip
    model.apply([FirstToken(0, 0, 0, 10 * S), RequestFinished(whole)])
    (view,) = model.ordered()
    assert segments(view, 10.0) == [
        ("queued", 0.0, 3.0),
        ("prefill", 3.0, 5.0),
        ("decoding", 5.0, 10.0),
    ]


def test_the_time_axis_grows_in_steps_then_fits_the_data_at_the_end(qtbot):
    from workbench.engine.events import ExperimentFinished

    gantt = GanttView()
    qtbot.addWidget(gantt)
    model = RunModel()
    started(model, 1)
    gantt.sync(model, 100.0)
    live = gantt.getPlotItem().viewRange()[0]
    assert live == [0.0, 150.0]  # room to grow: re-laying out the axis costs
    model.apply([ExperimentFinished("complete", None)])
    gantt.sync(model, 100.0)
    assert gantt.getPlotItem().viewRange()[0] == [0.0, pytest.approx(103.0)]


def test_an_empty_plot_says_what_will_appear_there(qtbot):
    """Before a run the plots had only 0-1 axes: each now says what it will show, until it
    does (and its legend waits too)."""
    from workbench.engine.events import ProcessSample
    from workbench.ui.views.server_plots import ServerPlots

    gantt, plots = GanttView(), ServerPlots()
    for widget in (gantt, plots):
        qtbot.addWidget(widget)
        widget.show()
    model = RunModel()
    gantt.sync(model, 0.0)
    plots.sync(model)
    notes = [gantt.note, *plots.notes.values()]
    assert all(note.isVisible() for note in notes)
    assert not plots.memory.getPlotItem().legend.isVisible()
    started(model, 1)
    model.apply([ProcessSample(0, S, 2**28, 1.0)])
    gantt.sync(model, 1.0)
    plots.sync(model)
    assert not gantt.note.isVisible() and not plots.notes["memory"].isVisible()
    assert plots.memory.getPlotItem().legend.isVisible()
    assert plots.notes["slots"].isVisible()  # no slot seen busy yet


def test_request_rows_are_labelled_with_their_numbers_at_a_round_step(qtbot):
    """A row shows its request's number (from 1, as its stream pane and requests.csv)."""
    from workbench.ui.views.gantt import request_ticks

    assert request_ticks(3) == [(0, "1"), (1, "2"), (2, "3")]  # nothing above the first row
    assert request_ticks(100) == [(0, "1"), *((n - 1, str(n)) for n in range(10, 101, 10))]
    assert len(request_ticks(250_000)) <= 12
    assert request_ticks(0) == []
    gantt = GanttView()
    qtbot.addWidget(gantt)
    model = RunModel()
    started(model, 3)
    gantt.sync(model, 1.0)
    assert gantt.getPlotItem().getAxis("left")._tickLevels == [[(0, "1"), (1, "2"), (2, "3")]]
