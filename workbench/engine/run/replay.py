"""A recorded session as the events of its run, in time order: to reopen it, or to play it
back at 1x to 10x through the same views as a live run (no special cases in the views).

Request, chunk and sample times are the ones measured; server states and notices carry the
time the session writer stored them (within a batch, well under a second).
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Any

from workbench.engine.base.errors import ExperimentError
from workbench.engine.base.records import StartupFacts
from workbench.engine.base.states import ServerState
from workbench.engine.config.experiment import (
    Experiment,
    parse_experiment,
)
from workbench.engine.events import (
    ConfigFinished,
    ConfigStarted,
    ExperimentFinished,
    ExperimentStarted,
    FirstToken,
    Notice,
    RequestFinished,
    RequestSubmitted,
    ServerReady,
    ServerStateChanged,
    StallsFound,
    TokenChunkArrived,
)
from workbench.engine.figures.stalls import found_stalls
from workbench.engine.store import (
    Session,
    open_session,
    summarize_config_records,
)
from workbench.engine.store.rows import SAMPLED


def session_events(session: Session) -> list[tuple[int, Any]]:
    """(t_ns, event) for everything the session recorded, sorted by time."""
    origin = session.meta["clock_origin_ns"]
    timed: list[tuple[int, int, Any]] = []  # (t_ns, order, event): order keeps ties stable

    def add(t_ns: int, event: Any) -> None:
        timed.append((t_ns, len(timed), event))

    add(
        origin,
        ExperimentStarted(
            session.meta["name"],
            str(session.path),
            len(session.configs),
            session.meta["mode"],
            origin,
        ),
    )
    last = origin
    for row in session.configs:
        config = row.run_config
        records = session.records(row.index)
        states = session.samples("server_states", row.index)
        times = [s.t_ns for s in states] + [
            t for r in records for t in (r.t_submit_ns, r.t_done_ns) if t is not None
        ]
        start = min(times, default=last)
        end = max(times, default=start)
        measured = sum(1 for r in records if not r.warmup)
        add(start, ConfigStarted(config, measured))
        for s in states:
            add(s.t_ns, ServerStateChanged(row.index, s.state, s.detail or ""))
        if row.base_url:  # the server got ready (managed) or was probed (external)
            ready = next((s.t_ns for s in states if s.state == ServerState.HEALTHY), start)
            add(
                ready,
                ServerReady(
                    row.index,
                    row.base_url,
                    row.pid,
                    row.command or [],
                    None,  # a path from a session is never read: its log tail is kept inside
                    row.facts or StartupFacts(),
                    row.slots,
                ),
            )
        for r in records:
            if r.t_submit_ns is not None:
                add(
                    r.t_submit_ns,
                    RequestSubmitted(
                        row.index,
                        r.repeat,
                        r.index,
                        r.warmup,
                        r.t_submit_ns,
                        r.conversation_id,
                        r.turn,
                        r.t_intended_ns,
                    ),
                )
            if r.t_first_token_ns is not None:
                add(
                    r.t_first_token_ns, FirstToken(row.index, r.repeat, r.index, r.t_first_token_ns)
                )
            for chunk in r.chunks:
                add(
                    chunk.t_ns,
                    TokenChunkArrived(
                        row.index,
                        r.repeat,
                        r.index,
                        chunk.t_ns,
                        chunk.text,
                        reasoning=chunk.reasoning,
                    ),
                )
            add(r.t_done_ns or end, RequestFinished(r))
        for table in SAMPLED:  # each stored sample is the event that was published
            for sample in session.samples(table.name, row.index):
                add(sample.t_ns, sample)
        summary = summarize_config_records(
            row, records, session.observations(row.index), session.managed
        )
        if stalls := found_stalls(records):
            add(end, StallsFound(row.index, stalls))
        add(end, ConfigFinished(row.index, row.status, row.error, row.log_tail or "", summary))
        last = end
    for n in session.notices():
        add(last, Notice(n.level, n.text, n.config_index))
    add(last, ExperimentFinished(session.status, session.meta.get("error")))
    timed.sort(key=lambda item: (item[0], item[1]))
    return [(t, event) for t, _, event in timed]


def load_session_events(path: str | Path) -> list[tuple[int, Any]]:
    """The events of a session file (opened, read, closed), for callers that do not need
    the experiment it ran (the comparison's timelines)."""
    with open_session(path) as session:
        return session_events(session)


def load_session(path: str | Path) -> tuple[list[tuple[int, Any]], Experiment | None]:
    """The events of a session file and the experiment it ran, read from the text it stored
    (None when that text no longer parses: a session from another version). The experiment
    has no path: nothing it names is opened."""
    with open_session(path) as session:
        events = session_events(session)
        text, name = session.meta["experiment_toml"], session.meta["name"]
    try:
        experiment = (
            parse_experiment(text, name_hint=str(name), stored=True)
            if isinstance(text, str)
            else None
        )
    except ExperimentError:
        experiment = None
    return events, experiment


class Playback:
    """A virtual clock over a session's events: ``advance`` hands out what became due."""

    def __init__(self, events: list[tuple[int, Any]]) -> None:
        self.events = events
        self.times = [t for t, _ in events]
        self.start_ns = self.times[0] if events else 0
        self.duration_s = (self.times[-1] - self.start_ns) / 1e9 if events else 0.0
        self.position_s = 0.0
        self._cursor = 0

    @property
    def finished(self) -> bool:
        return self._cursor >= len(self.events)

    def advance(self, seconds: float) -> list[Any]:
        """Move the clock forward; the events whose time has now come, in order."""
        return self.seek_forward(self.position_s + seconds)

    def seek_forward(self, position_s: float) -> list[Any]:
        self.position_s = min(max(position_s, self.position_s), self.duration_s)
        limit = self.start_ns + int(self.position_s * 1e9)
        end = bisect.bisect_right(self.times, limit, lo=self._cursor)
        due = [event for _, event in self.events[self._cursor : end]]
        self._cursor = end
        if self.position_s >= self.duration_s:  # the last events share the final time
            due += [event for _, event in self.events[self._cursor :]]
            self._cursor = len(self.events)
        return due

    def rewind(self) -> None:
        self.position_s = 0.0
        self._cursor = 0
