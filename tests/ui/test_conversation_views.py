"""A conversations run in the window: the Gantt colours each bar by its conversation and
outlines a turn that re-prefilled its history (live, in a replay and in the exported page),
and the grid has one pane per conversation that fills with its turns."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.made_sessions import NS, TokenChunk, request
from tests.ui.conversation_sessions import LOST, conversation_records, write_conversations
from workbench.engine.base.records import RequestRecord
from workbench.engine.base.states import RequestState
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import (
    ConfigStarted,
    ExperimentStarted,
    FirstToken,
    RequestFinished,
    RequestSubmitted,
    TokenChunkArrived,
)
from workbench.engine.run.replay import session_events
from workbench.engine.store import open_session
from workbench.ui.exports.gantt_export import session_model
from workbench.ui.exports.gantt_html import gantt_document
from workbench.ui.run_model import RunModel, conversation_user
from workbench.ui.views.gantt import GanttView
from workbench.ui.views.gantt_rows import conversation_palette, request_tooltip
from workbench.ui.views.legend import ConversationLegend
from workbench.ui.views.stream_grid import MAX_PANES, StreamGrid


@pytest.fixture
def conversations(tmp_path):
    return write_conversations(tmp_path / "conversations.session.sqlite")


def sent(record: RequestRecord) -> list[object]:
    """A finished request's events as the run publishes them."""
    return [
        RequestSubmitted(
            0, 0, record.index, False, record.t_submit_ns or 0, record.conversation_id, record.turn
        ),
        FirstToken(0, 0, record.index, record.t_first_token_ns or 0),
        *(
            TokenChunkArrived(0, 0, record.index, c.t_ns, c.text, reasoning=c.reasoning)
            for c in record.chunks
        ),
        RequestFinished(record),
    ]


def rows_of(item) -> list[int]:
    return [int(y) for y in item.opts["y"]]


def drawn(qtbot, model: RunModel, now: float) -> tuple[GanttView, ConversationLegend]:
    legend = ConversationLegend()
    gantt = GanttView(legend=legend)
    qtbot.addWidget(gantt)
    qtbot.addWidget(legend)
    gantt.sync(model, now)
    return gantt, legend


def test_a_replayed_conversations_run_colours_bars_by_conversation_and_marks_the_lost_turn(
    qtbot, conversations
):
    """Rows 0 and 2 are u1's turns, 1 and 3 u2's; u2's second turn found 10 of its 100
    history tokens cached: it alone is outlined."""
    with open_session(conversations) as session:
        events = [e for _, e in session_events(session)]
        model = session_model(session)
    sent = [e for e in events if isinstance(e, RequestSubmitted)]
    assert [(e.conversation_id, e.turn) for e in sent] == [
        ("r1u1", 1), ("r1u2", 1), ("r1u1", 2), ("r1u2", 2)
    ]  # fmt: skip
    gantt, legend = drawn(qtbot, model, model.last_t)
    assert rows_of(gantt.conversation_bars[0]) == [0, 2]
    assert rows_of(gantt.conversation_bars[1]) == [1, 3]
    assert rows_of(gantt.bars[RequestState.DECODING]) == []  # decoding is the conversation's
    assert rows_of(gantt.bars[RequestState.PREFILL]) == [0, 1, 2, 3]  # prefill keeps its own
    assert rows_of(gantt.lost) == [3]
    assert gantt.bar_count() == 4
    assert not legend.isHidden()
    assert [name.text() for _, name in legend.users if not name.isHidden()] == ["u1", "u2"]
    assert legend.more.isHidden()
    gantt.set_lanes(True)  # one lane: the same colours and mark
    gantt.sync(model, model.last_t)
    assert rows_of(gantt.lost) == [0]
    assert rows_of(gantt.conversation_bars[1]) == [0, 0]


def test_live_a_turn_decodes_in_its_colour_and_is_marked_once_its_counts_say_it_lost(qtbot):
    config = parse_experiment("[workload]\nkind = 'conversations'\nusers = 1\n").configs()[0]
    model = RunModel()
    first, second = (replace(r, index=i) for i, r in enumerate(conversation_records()[1::2]))
    model.apply([ExperimentStarted("e", "s", 1, "managed", 0), ConfigStarted(config, 2)])
    model.apply(sent(first))
    model.apply([RequestSubmitted(0, 0, 1, False, 2 * NS, "r1u2", 2), FirstToken(0, 0, 1, 3 * NS)])
    gantt, legend = drawn(qtbot, model, 3.5)
    assert rows_of(gantt.conversation_bars[1]) == [0, 1]  # u2's colour from its first token
    assert rows_of(gantt.lost) == []  # not known before it is done
    assert [name.text() for _, name in legend.users if not name.isHidden()] == ["u2"]
    model.apply([RequestFinished(second)])
    gantt.sync(model, 4.0)
    assert rows_of(gantt.lost) == [1]
    view = model.ordered()[1]
    assert view.cache is not None and view.cache.cached == LOST
    tip = request_tooltip(view)
    assert "conversation r1u2, turn 2" in tip
    assert "history: 90 of 100 tokens re-prefilled (cache lost)" in tip


def test_a_run_of_independent_requests_keeps_its_state_colours_and_no_conversation_legend(
    qtbot,
):
    model = RunModel()
    model.apply([e for i in range(2) for e in sent(request(i, submit_s=0.1 * i))])
    gantt, legend = drawn(qtbot, model, 2.0)
    assert rows_of(gantt.bars[RequestState.DECODING]) == [0, 1]
    assert all(rows_of(item) == [] for item in gantt.conversation_bars)
    assert legend.isHidden()


def test_many_conversations_reuse_colours_and_the_legend_says_so(qtbot):
    users = len(conversation_palette()) + 4
    model = RunModel()
    model.apply(
        [
            e
            for u in range(users)
            for e in sent(replace(request(u), conversation_id=f"r1u{u + 1}", turn=1))
        ]
    )
    gantt, legend = drawn(qtbot, model, 2.0)
    shown = [name.text() for _, name in legend.users if not name.isHidden()]
    assert shown == [f"u{n}" for n in range(1, len(conversation_palette()) + 1)]
    assert legend.more.text() == f"… {users} users: colours repeat"
    assert rows_of(gantt.conversation_bars[0]) == [0, len(conversation_palette())]
    assert conversation_user("r2u3") == "u3" and conversation_user("chat-7") == "chat-7"


def test_the_exported_page_carries_the_conversation_colours_and_the_lost_turn(conversations):
    with open_session(conversations) as session:
        document = gantt_document(session_model(session), "t")
    assert [r["colour"] for r in document["requests"]] == [0, 1, 0, 1]
    assert [r["lost"] is not None for r in document["requests"]] == [False, False, False, True]
    assert document["conversations"]["users"] == [("u1", 0), ("u2", 1)]
    assert document["conversations"]["colors"] == conversation_palette()


def test_the_grid_has_one_pane_per_conversation_filling_with_its_turns(qtbot, conversations):
    """Each pane is titled by its user and the turn it shows, its colour on the title, and
    holds every turn under its number, the reasoning dimmed."""
    records = conversation_records()
    reasoned = records[3]
    records[3] = replace(
        reasoned, chunks=[TokenChunk(reasoned.chunks[0].t_ns, "pondering", True), *reasoned.chunks]
    )
    model = RunModel()
    model.apply([e for record in records for e in sent(record)])
    grid = StreamGrid()
    qtbot.addWidget(grid)
    grid.resize(900, 600)
    grid.show()
    grid.sync(model, set(), relayout=True, now=5.0)
    panes = list(grid.panes.values())
    assert [p.title.text() for p in panes] == ["u1 · turn 2", "u2 · turn 2"]
    text = panes[1].body.text()
    assert text.index("── turn 1 ──") < text.index("── turn 2 ──")
    assert " tok" in text.split("── turn 2 ──")[1]  # the second turn's answer, below its number
    assert panes[1].body.dimmed() == "pondering"
    assert panes[1].title.autoFillBackground()
    plain = RunModel()  # the next run's requests are independent: the panes are the usual
    plain.apply([e for i in range(2) for e in sent(request(i))])
    grid.sync(plain, set(), relayout=True, now=5.0)
    assert [p.title.text() for p in grid.panes.values()] == ["#1", "#2"]
    assert not any(p.title.autoFillBackground() for p in grid.panes.values())
    assert "turn" not in panes[1].body.text()


def test_the_grid_keeps_its_bound_on_conversations(qtbot):
    model = RunModel()
    model.apply(
        [RequestSubmitted(0, 0, u, False, 0, f"r1u{u + 1}", 1) for u in range(MAX_PANES + 6)]
    )
    grid = StreamGrid()
    qtbot.addWidget(grid)
    grid.sync(model, set(), relayout=True, now=1.0)
    assert len(grid.panes) == MAX_PANES
