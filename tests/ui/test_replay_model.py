"""Reopening a session and replaying it at 10x end in the same view state."""

from __future__ import annotations

import pytest

from workbench.engine.run.replay import Playback, session_events
from workbench.engine.store import open_session
from workbench.ui.run_model import RunModel


def test_reopen_and_replay_at_10x_end_in_the_same_view(sweep_session):
    with open_session(sweep_session) as session:
        events = session_events(session)
    reopened = RunModel()
    reopened.apply([e for _, e in events])
    assert reopened.status == "complete"
    assert len(reopened.requests) == 6  # measured requests only
    assert all(v.state == "done" and v.chunks == 12 for v in reopened.requests.values())
    views = [reopened.requests[key] for key in sorted(reopened.requests)]
    # np=1 serves one request after another; np=2 two together, then the third.
    assert [v.ttft_s for v in views] == pytest.approx([0.1, 1.3, 2.5, 0.1, 0.1, 1.575])
    assert [v.queue_s for v in views] == pytest.approx([0.0, 1.2, 2.4, 0.0, 0.0, 1.475])
    assert [v.slot for v in views] == [0, 0, 0, 0, 1, 0]
    assert [v.t_submit for v in views] == pytest.approx([2.0] * 3 + [8.0] * 3)
    assert reopened.rss == ([2, 3, 4, 5, 8, 9, 10], [180, 250, 240, 230, 190, 260, 255])

    replayed = RunModel()
    playback = Playback(events)
    steps = 0
    while not playback.finished:
        replayed.apply(playback.advance(0.033 * 10))
        steps += 1
    assert steps == 34  # 10.95 s of session in steps of 0.33 s
    assert replayed.status == "complete"
    for key, view in reopened.requests.items():
        other = replayed.requests[key]
        assert (other.state, other.chunks, other.ttft_s, other.queue_s, other.slot) == (
            view.state,
            view.chunks,
            view.ttft_s,
            view.queue_s,
            view.slot,
        )
        assert replayed.take_text(key) == reopened.take_text(key) == " tok" * 12
    assert replayed.rss == reopened.rss
    assert [s.mean for s in replayed.summaries] == [s.mean for s in reopened.summaries]
