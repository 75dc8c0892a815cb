"""One experiment at a time: the engine's run lifecycle around a ``ProcessRunner``, its
events pumped into the run model on the 16 ms frame, Stop, and how the run ended.

The engine measures in a child process, which also writes the session and the tables; this
controller only drains what that process sent and hands it to the painter. Every way out
(Stop, closing the window, the end of the run) goes through the lifecycle's ``finish``, and
every way out ends the same: ``busy_changed`` (False), then ``finished`` with the status.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from workbench.engine.base.errors import ServerBinaryNotFound, WorkbenchError
from workbench.engine.base.states import ConfigStatus, RunStatus
from workbench.engine.config.experiment import Experiment
from workbench.engine.events import ExperimentStarted, Subscription
from workbench.engine.run.lifecycle import RunLifecycle, Runner
from workbench.engine.run.process_runner import ProcessRunner
from workbench.engine.run.runner import RunOptions, RunResult
from workbench.ui.controllers.render_controller import PUMP_INTERVAL_MS, RenderController
from workbench.ui.controllers.tasks import Tasks
from workbench.ui.run_model import RunModel


class RunController(QObject):
    busy_changed = Signal(bool)  # a run owns the views (True) or has let go of them (False)
    started = Signal()  # the engine runs: what the views showed of an earlier run is void
    recorded = Signal(object)  # the session a finished run wrote (Path), None if it hung
    finished = Signal(str)  # complete, cancelled or failed: the last word on every run
    banner = Signal(str, str)  # text, kind (info, ok, error)
    binary_missing = Signal()  # no llama-server found: the user can choose one
    status = Signal(str)

    def __init__(
        self,
        model: RunModel,
        renderer: RenderController,
        tasks: Tasks,
        out_dir: Path,
        server_bin: str | None = None,
        parent: QObject | None = None,
        make_runner: Callable[[Experiment, RunOptions], Runner] = ProcessRunner,
    ) -> None:
        """``make_runner``: what runs the experiment (a child process of this machine, or
        another machine's agent)."""
        super().__init__(parent)
        self.model = model
        self.renderer = renderer
        self.tasks = tasks
        self.out_dir = out_dir
        self.server_bin = server_bin
        self.make_runner = make_runner
        # Where runs side by side share a time axis: the moment (this machine's clock) their
        # times count from. None: from this run's own start.
        self.origin_ns: int | None = None
        self.lifecycle: RunLifecycle | None = None
        self.result: RunResult | None = None
        self.subscription: Subscription | None = None
        self.pump = QTimer(self)
        self.pump.setInterval(PUMP_INTERVAL_MS)
        self.pump.setTimerType(Qt.TimerType.PreciseTimer)
        self.pump.timeout.connect(self.drain)

    @property
    def runner(self) -> Runner | None:
        """The engine process of the run in progress, if any."""
        return self.lifecycle.runner if self.lifecycle is not None else None

    @property
    def running(self) -> bool:
        return self.lifecycle is not None

    def start(self, experiment: Experiment, base_url: str | None, api_key_env: str | None) -> None:
        """Run ``experiment`` on a server of its own, or on ``base_url`` when given."""
        if self.running:
            return
        options = RunOptions(
            self.out_dir, base_url=base_url, server_bin=self.server_bin, api_key_env=api_key_env
        )
        self.lifecycle = RunLifecycle(self.make_runner(experiment, options))
        self.busy_changed.emit(True)
        self.tasks.spawn(self._run(self.lifecycle))

    def stop(self) -> None:
        if self.lifecycle is not None:
            self.status.emit("stopping…")
            self.lifecycle.cancel()

    @property
    def clock_offset_ns(self) -> int:
        """The run's clock minus this machine's: another machine's runner measures it."""
        return getattr(self.runner, "clock_offset_ns", None) or 0

    def drain(self) -> None:
        """One frame: fold what arrived since the last into the model and redraw."""
        events = self.subscription.drain() if self.subscription is not None else []
        if self.origin_ns is not None:
            events = [self._from_origin(event) for event in events]
        now = None
        if self.model.t0_ns is not None and self.model.status is RunStatus.RUNNING:
            now = (time.perf_counter_ns() + self.clock_offset_ns - self.model.t0_ns) / 1e9
        self.renderer.render(events, now)

    def _from_origin(self, event: Any) -> Any:
        """The run's start moved to the shared origin, in the run's own clock: every time
        the model derives then counts from that moment, whichever machine measured it."""
        if not isinstance(event, ExperimentStarted) or self.origin_ns is None:
            return event
        return replace(event, t0_ns=self.origin_ns + self.clock_offset_ns)

    async def _run(self, lifecycle: RunLifecycle) -> None:
        """Prepare, run and finish one experiment; every way out ends the same."""
        status = RunStatus.FAILED
        try:
            status = await self._run_steps(lifecycle)
        except WorkbenchError as exc:
            self.banner.emit(str(exc), "error")
            if isinstance(exc, ServerBinaryNotFound):
                self.binary_missing.emit()
        finally:
            self.pump.stop()
            if self.subscription is not None:
                lifecycle.runner.bus.unsubscribe(self.subscription)
                self.subscription = None
            self.lifecycle = None
            self.busy_changed.emit(False)
            self.finished.emit(status)

    async def _run_steps(self, lifecycle: RunLifecycle) -> RunStatus:
        # The banner keeps its row for the whole run: one appearing (the first warning, at a
        # configuration's end) or going re-laid out and repainted every view in that frame.
        # What is happening goes to the status line.
        self.banner.emit(f"Running. What finishes is kept in {self.out_dir}", "info")
        self.status.emit("preparing: finding the server and model, checking the output folder…")
        await asyncio.to_thread(lifecycle.prepare)
        self.status.emit("running")  # the status line's words
        self.model.reset()
        self.started.emit()
        self.subscription = lifecycle.start()
        self.pump.start()
        try:
            while lifecycle.running:
                await asyncio.sleep(0.1)
        finally:
            if lifecycle.running:  # the window is closing: this task was cancelled
                lifecycle.cancel()
        try:
            result = await asyncio.to_thread(lifecycle.finish)
        except WorkbenchError:
            self.recorded.emit(None)  # the run hung: no session to show
            raise
        finally:
            self.pump.stop()
            self.drain()
        self.result = result
        self._report(result)
        self.recorded.emit(result.session_path)
        return RunStatus(result.status)

    def _report(self, result: RunResult) -> None:
        failed = [s for s in result.summaries if s.status != ConfigStatus.OK]
        where = f"Session: {result.session_path}"
        if result.status == RunStatus.CANCELLED:
            self.banner.emit(f"Stopped. What finished is kept. {where}", "info")
        elif result.status == RunStatus.FAILED or failed:
            errors = "\n".join(f"{s.label}: {s.error}" for s in failed) or result.error or ""
            self.banner.emit(f"Finished with errors. {where}\n{errors}", "error")
        else:
            self.banner.emit(f"Finished. {where}", "ok")
        if result.tables is not None and result.tables.error:
            self.banner.emit(f"{result.tables.error}\n{where}", "error")
