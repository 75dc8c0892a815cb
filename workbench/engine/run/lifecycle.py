"""One run from prepare to its tables, the same for every front end.

The terminal (``workbench run``), the window's engine process, the tests and the benches all
take a run through the same steps: prepare (everything a user can get wrong, checked before
anything starts), subscribe to the event bus and start, follow the events until the run ends
(an interrupt cancels it), then finish: cancel what still runs, wait a bounded time, and write
``concurrency.csv`` and ``requests.csv`` next to the session, once, however the run ended.
``RunLifecycle`` is that sequence; what differs between front ends is only what they do with
the events (a live table, a pipe to the window, nothing) and where the engine runs (this
process: ``ExperimentRunner``; a child: ``ProcessRunner``), both seen through ``Runner``.

Stopping must finish however often the user presses Ctrl-C or a terminal sends SIGTERM or
SIGHUP: while the streams are cancelled, the servers stopped and the tables written, those
signals only say so (``while_stopping``). A cleanup cut short once left a configuration
"running" for good, without its error or log tail.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from workbench.engine.analysis.export import write_concurrency_csv, write_requests_csv
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.experiment import Experiment, RunConfig
from workbench.engine.events import EventBus, Subscription
from workbench.engine.run.runner import ExperimentRunner, RunOptions, RunResult, RunTables
from workbench.engine.store import open_session

STOP_WAIT_S = 60.0  # how long a run may take to stop once it was asked to
FOLLOW_INTERVAL_S = 0.1  # the terminal's pace: events drained ten times a second
# The signals that ask a run to stop: Ctrl-C, kill, and a terminal closed under it.
STOP_SIGNALS = tuple(
    sig
    for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None))
    if sig is not None
)


@runtime_checkable
class Runner(Protocol):
    """What runs one experiment: ``ExperimentRunner`` in this process, ``ProcessRunner`` in a
    child process. ``session_path`` is known once ``prepare()`` has run; ``wait`` returns
    None when the run has not ended within ``timeout``."""

    @property
    def bus(self) -> EventBus: ...

    @property
    def session_path(self) -> Path | None: ...

    @property
    def configs(self) -> list[RunConfig]: ...

    @property
    def running(self) -> bool: ...

    def prepare(self) -> None: ...

    def start(self) -> None: ...

    def cancel(self) -> None: ...

    def wait(self, timeout: float | None = None) -> RunResult | None: ...


def write_tables(session_path: Path) -> RunTables:
    """The CSVs ``workbench run`` has always left next to the session, read back from the
    session file: the tables hold what was recorded, whatever the run held in memory."""
    folder = session_path.parent
    tables = RunTables(folder / "concurrency.csv", folder / "requests.csv")
    try:
        with open_session(session_path) as session:
            write_concurrency_csv(tables.concurrency, session.summaries())
            write_requests_csv(tables.requests, session)
    except WorkbenchError as exc:
        return replace(tables, error=str(exc))
    return tables


class RunLifecycle:
    """prepare → start → follow → finish, for one runner.

    ``finish`` is what every way out goes through (the end, a cancel, an exception in the
    caller): call it in a ``finally``. Its result carries the tables' paths; a runner whose
    result already carries them (``ProcessRunner``: its child ran a lifecycle of its own)
    has them written once, by that child.
    """

    def __init__(
        self,
        runner: Runner,
        *,
        stop_wait_s: float = STOP_WAIT_S,
        while_stopping: Callable[[], None] | None = None,
    ) -> None:
        self.runner = runner
        self.stop_wait_s = stop_wait_s
        self._while_stopping = while_stopping
        self._events: Subscription | None = None
        self._cancelled = False
        self._result: RunResult | None = None

    def prepare(self) -> None:
        """Check everything and create the session; a ``WorkbenchError`` says what is
        wrong, before anything started."""
        self.runner.prepare()

    def start(self) -> Subscription:
        """Subscribe, then start: the subscription sees the run from its first event."""
        self._events = self.runner.bus.subscribe()
        self.runner.start()
        return self._events

    @property
    def running(self) -> bool:
        return self.runner.running

    @property
    def cancelled(self) -> bool:
        """Whether a cancel was asked for (the run may still be stopping)."""
        return self._cancelled

    def cancel(self) -> None:
        """Ask the run to stop, keeping what was measured. Safe to call again and again, from
        any thread, and after a signal cut an earlier call short: the runner cancels once,
        later calls only ask again."""
        self._cancelled = True
        self.runner.cancel()

    def follow(
        self,
        handle: Callable[[list[Any]], None],
        every_s: float = FOLLOW_INTERVAL_S,
        on_interrupt: Callable[[], None] | None = None,
    ) -> None:
        """Hand ``handle`` what arrived, every ``every_s``, until the run has ended; the last
        batch comes after the end, so nothing published is missed, and as soon as the runner
        says the run has ended (``EventBus.run_ended``), so no caller waits out an interval.
        An interrupt (Ctrl-C, or a signal the caller turns into one) cancels the run and
        following goes on, so the shutdown's events are handed over too; ``on_interrupt`` is
        told the first time."""
        assert self._events is not None, "start() first"
        while True:
            try:
                finished = not self.running
                handle(self._events.drain())
                if finished:
                    return
                self._events.wait(every_s)
            except KeyboardInterrupt:
                first = not self._cancelled
                self.cancel()
                if first and on_interrupt is not None:
                    on_interrupt()

    def finish(self) -> RunResult:
        """End the run: cancel it if it still runs, wait up to ``stop_wait_s`` for it to stop,
        and write its tables, once; a second call returns the same result. Raises a
        ``WorkbenchError`` if the run does not stop in time."""
        with self._signals_only_say_so():
            if self._result is None:
                self._result = self._end()
            return self._result

    def run(self) -> RunResult:
        """The whole lifecycle for a caller that watches nothing (tests, benches): the events
        are drained at the terminal's pace, as a front end would."""
        self.prepare()
        self.start()
        try:
            self.follow(lambda events: None)
        finally:
            result = self.finish()
        return result

    def _end(self) -> RunResult:
        try:
            if self.runner.running:
                self.cancel()
            result = self.runner.wait(self.stop_wait_s)
        finally:
            if self._events is not None:
                self.runner.bus.unsubscribe(self._events)
        if result is None:
            raise WorkbenchError(
                f"the run did not stop within {self.stop_wait_s:.0f} s after it was cancelled"
            )
        if result.tables is None:
            result = replace(result, tables=write_tables(result.session_path))
        return result

    @contextlib.contextmanager
    def _signals_only_say_so(self) -> Iterator[None]:
        """While finishing, a stop signal calls ``while_stopping`` instead of interrupting.
        Handlers belong to the main thread: elsewhere (a window's worker thread) nothing
        is installed, and nothing there can be interrupted by a signal either."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def say_so(signum: int, frame: object) -> None:
            if self._while_stopping is not None:
                self._while_stopping()

        previous = {sig: signal.signal(sig, say_so) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def run_experiment(
    experiment: Experiment, options: RunOptions, bus: EventBus | None = None
) -> RunResult:
    """One experiment in this process from prepare to its tables, for callers that only
    want the result (tests, benches); ``bus`` lets them listen in."""
    return RunLifecycle(ExperimentRunner(experiment, options, bus)).run()
