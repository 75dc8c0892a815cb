"""A recorded session becomes its run's events again: reopen and replay need nothing else."""

from __future__ import annotations

import pytest

from workbench.engine.events import (
    ConfigFinished,
    ExperimentFinished,
    ExperimentStarted,
    RequestFinished,
    ServerReady,
    TokenChunkArrived,
)
from workbench.engine.run.replay import session_events
from workbench.engine.store.session import open_session

pytestmark = pytest.mark.server


def test_events_rebuild_the_run_in_time_order(recorded_session):
    with open_session(recorded_session) as session:
        events = session_events(session)
        summaries = session.summaries()
        records = [r for c in session.configs for r in session.records(c.index)]
    times = [t for t, _ in events]
    assert times == sorted(times)
    kinds = [type(e) for _, e in events]
    assert kinds[0] is ExperimentStarted and kinds[-1] is ExperimentFinished
    assert kinds.count(ServerReady) == 2 and kinds.count(ConfigFinished) == 2
    assert kinds.count(RequestFinished) == len(records) == 8
    assert kinds.count(TokenChunkArrived) == sum(len(r.chunks) for r in records)
    finished = [e for _, e in events if isinstance(e, ConfigFinished)]
    assert [f.summary.mean for f in finished] == [s.mean for s in summaries]
