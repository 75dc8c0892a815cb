"""A recorded session becomes its run's events again: reopen and replay need nothing else."""

from __future__ import annotations

from workbench.engine.events import (
    ConfigFinished,
    ConfigStarted,
    ExperimentFinished,
    ExperimentStarted,
    FirstToken,
    ProcessSample,
    RequestFinished,
    RequestSubmitted,
    ServerReady,
    TokenChunkArrived,
)
from workbench.engine.run.replay import session_events
from workbench.engine.store import open_session


def test_events_rebuild_the_run_in_time_order(sweep_session):
    with open_session(sweep_session) as session:
        events = session_events(session)
        summaries = session.summaries()
    times = [t for t, _ in events]
    assert times == sorted(times)
    kinds = [type(e) for _, e in events]
    assert kinds[0] is ExperimentStarted and kinds[-1] is ExperimentFinished
    assert kinds.count(ServerReady) == 2 and kinds.count(ConfigFinished) == 2
    # Per configuration one warm-up and 3 measured requests of 12 chunks; 4 + 3 RSS samples.
    for kind, count in (
        (RequestSubmitted, 8),
        (FirstToken, 8),
        (RequestFinished, 8),
        (TokenChunkArrived, 8 * 12),
        (ProcessSample, 7),
    ):
        assert kinds.count(kind) == count, kind
    # Each configuration starts at its warm-up's submission (0 s and 6 s) and ends at its
    # last request's end (5.6 s and 10.95 s); the experiment ends with the last.
    starts = [t for t, e in events if isinstance(e, ConfigStarted)]
    ends = [t for t, e in events if isinstance(e, ConfigFinished)]
    assert starts == [0, 6_000_000_000] and ends == [5_600_000_000, 10_950_000_000]
    assert times[-1] == ends[-1]
    first_tokens = [t for t, e in events if isinstance(e, FirstToken) and e.config_index == 1]
    assert first_tokens == [6_100_000_000, 8_100_000_000, 8_100_000_000, 9_575_000_000]
    finished = [e for _, e in events if isinstance(e, ConfigFinished)]
    assert [f.summary.mean for f in finished] == [s.mean for s in summaries]
    assert [f.summary.mean["makespan_s"] for f in finished] == [3.6, 2.95]
