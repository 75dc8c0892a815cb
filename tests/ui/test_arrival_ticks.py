"""The Gantt ticks when each request was due by its arrival schedule, in a strip under its
rows (one path for the ticks on time, one for the late), live, in a replay and in the
exported page; a burst, due all at once, has none. And a conversations run's legend and
lost-turn outlines."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtWidgets import QLabel

from tests.made_sessions import NS, Config, build_session, request, startup_facts
from tests.ui.conversation_sessions import write_conversations
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import ConfigStarted, ExperimentStarted, RequestSubmitted
from workbench.engine.store import open_session
from workbench.ui.exports.gantt_export import drawn_views, session_model
from workbench.ui.exports.gantt_html import gantt_document
from workbench.ui.run_model import RunModel
from workbench.ui.theme.palette import theme_data
from workbench.ui.views.gantt import LOST_INSET_SHARE, GanttView
from workbench.ui.views.gantt_rows import DUE, SENT_LATE, lost_span, request_tooltip
from workbench.ui.views.legend import (
    BY_CONVERSATION,
    DECODE_BY_CONVERSATION,
    ConversationLegend,
    StateLegend,
)

POISSON = "[server]\nslots = 1\n[workload]\nrequests = 4\narrival = 'poisson'\nrate = 2\n"
BURST = "[server]\nslots = 1\n[workload]\nrequests = 4\n"
DUE_S = (0.0, 0.7, 1.1, 2.5)  # when each was due; the third went out 50 ms late
SENT_S = (0.001, 0.701, 1.15, 2.501)


def scheduled(toml: str, path: Path) -> Path:
    """Four requests with the arrival times ``DUE_S``, sent at ``SENT_S``."""
    records = [
        replace(request(i, submit_s=sent), t_intended_ns=round(due * NS), t_ready_ns=None)
        for i, (due, sent) in enumerate(zip(DUE_S, SENT_S, strict=True))
    ]
    return build_session(path, toml, [Config(records, startup_facts(1, 8192))])


def drawn(qtbot, model: RunModel) -> tuple[GanttView, StateLegend]:
    """The Gantt drawn, with a state legend as wide as a large screen's row."""
    states = StateLegend()
    states.resize(1600, 40)
    states.show()
    gantt = GanttView(states=states)
    qtbot.addWidget(gantt)
    qtbot.addWidget(states)
    gantt.sync(model, model.last_t)
    return gantt, states


def replayed(path: Path) -> RunModel:
    with open_session(path) as session:
        return session_model(session)


def ticks_of(gantt: GanttView) -> tuple[list[float], list[float]]:
    """The ticks' times as their paths hold them (two points each)."""
    return tuple(  # type: ignore[return-value]
        [float(x) for x in item.getData()[0][::2]] for item in (gantt.arrivals, gantt.late_arrivals)
    )


def test_a_replayed_poisson_run_ticks_each_request_where_it_was_due(qtbot, tmp_path):
    gantt, states = drawn(qtbot, replayed(scheduled(POISSON, tmp_path / "p.session.sqlite")))
    on_time, late = ticks_of(gantt)
    assert on_time == pytest.approx([0.0, 0.7, 2.5])
    assert late == pytest.approx([1.1])
    ys = gantt.arrivals.getData()[1]
    assert ys.min() > 3.5  # under the last of the 4 rows (row 3), not over its bar
    assert gantt.getPlotItem().viewRange()[1][1] >= ys.max()  # and on the chart
    assert not states.due.isHidden() and not states.late.isHidden()
    labels = gantt.getPlotItem().getAxis("left")._tickLevels[0]
    assert labels[-1] == (pytest.approx(ys.mean(), abs=0.1), DUE)  # the strip names itself


def test_the_ticks_entries_never_widen_the_legend_past_a_small_screen(qtbot, tmp_path):
    """A small screen's row has no room for them: they give way (the strip's axis label
    still says what it is), and the legend asks no more width than without them."""
    _, states = drawn(qtbot, replayed(scheduled(POISSON, tmp_path / "p.session.sqlite")))
    plain = StateLegend()
    qtbot.addWidget(plain)
    least = plain.minimumWidth()
    assert states.minimumWidth() == least
    states.resize(least, 40)
    assert states.due.isHidden() and states.late.isHidden()
    states.resize(1600, 40)
    assert not states.due.isHidden()


def test_a_late_requests_row_shows_its_wait_from_when_it_was_due_to_its_bar(qtbot, tmp_path):
    """The third went out 50 ms after it was due: a dashed line in its row (row 2) from 1.1 s
    to 1.15 s. In the lanes by slot a row is not one request's: no line there."""
    model = replayed(scheduled(POISSON, tmp_path / "p.session.sqlite"))
    gantt, _ = drawn(qtbot, model)
    xs, ys = gantt.waits.getData()
    assert list(xs) == pytest.approx([1.1, 1.15]) and list(ys) == [2, 2]
    assert [r["wait"] for r in gantt_document(model, "t")["requests"]] == [
        None, None, [1.1, 1.15], None
    ]  # fmt: skip
    assert "due at 1.100 s, sent 50.0 ms after" in request_tooltip(model.ordered()[2])
    gantt.set_lanes(True)
    gantt.sync(model, model.last_t)
    assert len(gantt.waits.getData()[0]) == 0
    assert ticks_of(gantt) == (pytest.approx([0.0, 0.7, 2.5]), pytest.approx([1.1]))


def test_a_burst_has_no_ticks_and_no_strip(qtbot, tmp_path):
    """Every request of a burst is due at once: a tick would say nothing."""
    model = replayed(scheduled(BURST, tmp_path / "b.session.sqlite"))
    assert all(view.t_intended is None for view in model.ordered())
    gantt, states = drawn(qtbot, model)
    assert ticks_of(gantt) == ([], [])
    assert gantt.getPlotItem().viewRange()[1][1] == pytest.approx(4 - 0.4)
    assert states.due.isHidden() and states.late.isHidden()


def test_ticks_come_live_as_requests_are_sent(qtbot):
    config = parse_experiment(POISSON).configs()[0]
    model = RunModel()
    model.apply([ExperimentStarted("e", "s", 1, "managed", 0), ConfigStarted(config, 4)])
    model.apply([RequestSubmitted(0, 0, 0, False, NS // 1000, t_intended_ns=0)])
    gantt, states = drawn(qtbot, model)
    assert ticks_of(gantt) == ([0.0], [])
    assert states.late.isHidden()
    model.apply([RequestSubmitted(0, 0, 1, False, 3 * NS, t_intended_ns=2 * NS)])
    gantt.sync(model, 3.0)
    assert ticks_of(gantt) == ([0.0], [2.0])  # sent a second after it was due
    assert not states.late.isHidden()
    labels = [text for _, text in gantt.getPlotItem().getAxis("left")._tickLevels[0]]
    assert labels == ["1", "2", DUE]  # the last row keeps its number beside the strip's


def test_the_exported_gantt_ticks_the_arrivals_too(qtbot, tmp_path):
    model = replayed(scheduled(POISSON, tmp_path / "p.session.sqlite"))
    series = theme_data()["series"]
    assert gantt_document(model, "t")["arrivals"] == [
        [[0.0, 0.7, 2.5], series["arrival"], DUE],
        [[1.1], series["arrival_late"], SENT_LATE],
    ]
    for _, view in drawn_views(model, "t"):
        names = [label.text for _, label in view.getPlotItem().legend.items]
        assert names[-2:] == [DUE, SENT_LATE]
    burst = replayed(scheduled(BURST, tmp_path / "b.session.sqlite"))
    assert gantt_document(burst, "t")["arrivals"] == []


def test_a_conversations_runs_legend_says_decode_takes_the_conversations_colour(qtbot, tmp_path):
    """Where the state legend has room its decode entry says so; the conversations' row,
    shown whenever the run has conversations, always does."""
    model = replayed(write_conversations(tmp_path / "c.session.sqlite"))
    _, states = drawn(qtbot, model)
    assert DECODE_BY_CONVERSATION in [label.text() for label, _, _ in states.labels]
    users = ConversationLegend()
    qtbot.addWidget(users)
    users.show_users(model)
    assert BY_CONVERSATION in [label.text() for label in users.findChildren(QLabel)]
    plain = RunModel()
    plain.apply([RequestSubmitted(0, 0, 0, False, 0)])
    _, states = drawn(qtbot, plain)
    texts = [label.text() for label, _, _ in states.labels]
    assert "decode" in texts and DECODE_BY_CONVERSATION not in texts


def test_a_lost_turns_outline_is_inset_so_turns_one_after_another_read_apart(qtbot, tmp_path):
    model = replayed(write_conversations(tmp_path / "c.session.sqlite"))
    gantt, _ = drawn(qtbot, model)
    gantt.set_lanes(True)
    gantt.sync(model, model.last_t)
    lost = [v for v in model.ordered() if lost_span(v, model.last_t) is not None]
    start, end = lost_span(lost[0], model.last_t)  # type: ignore[misc]
    (x0,), (width,) = np.asarray(gantt.lost.opts["x0"]), np.asarray(gantt.lost.opts["width"])
    assert x0 > start and x0 + width < end
    assert x0 - start == pytest.approx(end - (x0 + width))
    assert x0 - start <= LOST_INSET_SHARE * 10.0  # of the least time the live axis shows
