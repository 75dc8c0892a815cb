"""Running an experiment: one owner for the servers, the streams and the session.

The runner's engine thread has its own asyncio loop, where only streams run; sampling and
session writing have threads of their own; consumers (CLI, window) read the event bus. Every
way out (the end, ``cancel()``, an exception, a crashed server) goes through the same
``finally``: streams cancelled, server stopped, session closed with its status. What is
checked before a run and the session it writes are ``session_setup``'s; one configuration's
run is ``config_run``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from workbench.engine.base.states import NoticeLevel, RunStatus
from workbench.engine.config.experiment import Experiment, RunConfig
from workbench.engine.events import (
    EventBus,
    ExperimentFinished,
    ExperimentStarted,
    Notice,
    PredictionMade,
)
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.measure.open_files import raise_open_files
from workbench.engine.predict.run_prediction import NO_CALIBRATION, predict_run
from workbench.engine.run import notices
from workbench.engine.run.config_run import ConfigRuns
from workbench.engine.run.session_setup import RunOptions, RunSetup, prepare_run, session_paths
from workbench.engine.store import SessionWriter

__all__ = ["ExperimentRunner", "RunOptions", "RunResult", "RunTables"]

SWITCH_INTERVAL_S = 0.0005


@dataclass(frozen=True)
class RunTables:
    """The CSV tables a finished run leaves next to its session, or why they are missing:
    the run's measurements are in the session either way, so a table that cannot be
    written is reported, not fatal to the result."""

    concurrency: Path
    requests: Path
    error: str | None = None


@dataclass(frozen=True)
class RunResult:
    status: str
    session_path: Path
    summaries: list[ConfigSummary]
    error: str | None = None
    tables: RunTables | None = None  # written by the run's lifecycle once the run ended


class ExperimentRunner:
    """Runs an experiment on its own thread and publishes what happens on ``bus``.

    ``prepare()`` checks everything a user can get wrong before anything starts (binary, model,
    output folder, base URL) and raises a ``WorkbenchError`` with the reason.
    """

    def __init__(self, experiment: Experiment, options: RunOptions, bus: EventBus | None = None):
        self.experiment = experiment
        self.options = options
        self.bus = bus or EventBus()
        self.external = options.base_url is not None
        self.configs: list[RunConfig] = experiment.configs(external=self.external)
        self.session_path, self.log_dir = session_paths(experiment, options)
        self.setup: RunSetup | None = None  # what prepare() found
        self.summaries: list[ConfigSummary] = []
        self._thread: threading.Thread | None = None
        self._ended = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main_task: asyncio.Task[None] | None = None
        self._writer: SessionWriter | None = None
        self._status = RunStatus.COMPLETE
        self._error: str | None = None
        self._cancel_requested = threading.Event()
        self._main_task_cancelled = False

    # -- set-up -----------------------------------------------------------------------------
    def prepare(self) -> None:
        """Everything a user can get wrong is checked before the output folder is made: a
        run refused here (no model, nothing at the base URL) leaves nothing behind."""
        setup = prepare_run(
            self.experiment, self.options, self.configs, self.session_path, self.log_dir
        )
        self.setup = setup
        self.options = replace(self.options, base_url=setup.base_url)
        self.configs = setup.configs
        self.summaries = list(setup.kept)

    # -- thread control -----------------------------------------------------------------------
    def start(self) -> None:
        """Start the session writer and the engine thread; ``prepare()`` must have run."""
        # A thread waiting for the GIL waits up to the switch interval (5 ms by default):
        # shorten it so a token's arrival is timestamped promptly whatever else runs.
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        raise_open_files()  # a run of 1,024 streams needs more than the usual soft limit
        self._writer = SessionWriter(self.session_path, self.bus, on_failure=self.cancel)
        self._writer.start()
        self._thread = threading.Thread(target=self._thread_main, name="engine", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        """Thread-safe: stop at once, keeping what was measured. However often it is called,
        the run is cancelled once: a second cancel (Ctrl-C twice, Stop then closing the
        window) must not interrupt the cleanup that the first started, or the
        configuration's end is lost. Every call asks the engine loop again, so a call cut
        short (a signal raising in the middle of it) is made good by the next."""
        self._cancel_requested.set()
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the run is over
                loop.call_soon_threadsafe(self._cancel_main_task)

    def _cancel_main_task(self) -> None:
        """On the engine loop: cancel the run's task, the first time only."""
        task = self._main_task
        if task is not None and not self._main_task_cancelled:
            self._main_task_cancelled = True
            task.cancel()

    def wait(self, timeout: float | None = None) -> RunResult | None:
        """Block until the run and its session are finished; None on timeout."""
        assert self._thread is not None and self._writer is not None
        self._thread.join(timeout)
        if self._thread.is_alive():
            return None
        if (failure := self._writer.failure()) is not None:
            self._status, self._error = RunStatus.FAILED, failure
        summaries = sorted(self.summaries, key=lambda s: s.index)  # a resumed run's too
        return RunResult(self._status, self.session_path, summaries, self._error)

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._ended.is_set()

    def _thread_main(self) -> None:
        """Run, then say so: ``running`` turns false before the bus wakes its followers, so
        one woken finds the run over (its thread may take a moment more to exit)."""
        try:
            asyncio.run(self._main())
        finally:
            self._ended.set()
            self.bus.run_ended()

    # -- the run ------------------------------------------------------------------------------
    def emit(self, event: Any) -> None:
        self.bus.publish(event)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._main_task = asyncio.current_task()
        setup = self.setup
        assert setup is not None, "prepare() first"
        self.emit(
            ExperimentStarted(
                self.experiment.name,
                str(self.session_path),
                len(self.configs),
                setup.mode,
                time.perf_counter_ns(),
                setup.binary_text,
            )
        )
        for text in setup.notices:
            self.emit(Notice(NoticeLevel.INFO, text))
        if (origin := notices.prompts_origin(setup.prompts)) is not None:
            self.emit(origin)
        runs = ConfigRuns(setup, self.emit, self.summaries)
        try:
            if self._cancel_requested.is_set():
                raise asyncio.CancelledError
            if not setup.external and self.options.resume is None:
                await self._predict(setup)
            for config in self.configs:
                await runs.run(config)
        except asyncio.CancelledError:
            self._status = RunStatus.CANCELLED
        except Exception as exc:  # an engine bug must still end in the same shutdown path
            self._status, self._error = RunStatus.FAILED, f"{type(exc).__name__}: {exc}"
            self.emit(notices.run_failed(self._error))
        finally:
            runs.stop_server()
            self.emit(ExperimentFinished(self._status, self._error))

    async def _predict(self, setup: RunSetup) -> None:
        """The run's prediction from this machine's stored calibrations, said and stored
        before its first configuration (a resumed run keeps the one it made). It reads
        files and may count prompts with the model's vocabulary, so it runs off the loop;
        a failure costs only the prediction, never the run."""
        assert setup.hardware is not None
        try:
            prediction = await asyncio.to_thread(
                predict_run,
                setup.configs,
                setup.hardware,
                setup.models,
                setup.prompts,
                setup.base_dir,
            )
        except Exception as exc:
            self.emit(notices.not_predicted(exc))
            return
        self.emit(PredictionMade(prediction))
        lacking = any(NO_CALIBRATION in line for line in prediction.left_out)
        self.emit(notices.predicted(prediction, lacking))
