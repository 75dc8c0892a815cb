"""Reopening a session and replaying it at 10x end in the same view state."""

from __future__ import annotations

import pytest

from workbench.engine.run.replay import Playback, session_events
from workbench.engine.store.session import open_session
from workbench.ui.run_model import RunModel

pytestmark = pytest.mark.server


def test_reopen_and_replay_at_10x_end_in_the_same_view(recorded_session):
    with open_session(recorded_session) as session:
        events = session_events(session)
    reopened = RunModel()
    reopened.apply([e for _, e in events])
    assert reopened.status == "complete"
    assert len(reopened.requests) == 6  # measured requests only
    assert all(v.state == "done" and v.chunks == 12 for v in reopened.requests.values())

    replayed = RunModel()
    playback = Playback(events)
    steps = 0
    while not playback.finished:
        replayed.apply(playback.advance(0.033 * 10))
        steps += 1
    assert steps > 3  # it really was played in steps
    assert replayed.status == "complete"
    for key, view in reopened.requests.items():
        other = replayed.requests[key]
        assert (other.state, other.chunks, other.ttft_s, other.queue_s) == (
            view.state,
            view.chunks,
            view.ttft_s,
            view.queue_s,
        )
        assert replayed.take_text(key) == reopened.take_text(key)
    assert replayed.rss == reopened.rss
    assert [s.mean for s in replayed.summaries] == [s.mean for s in reopened.summaries]
