"""Calibrating from the window: the real llama-server probed with the form's server settings
(the probe's own bound: at most a minute of measuring), its phases said as they are
measured, the calibration stored where runs find their predictions; and whether the
settings in the form already have one.

The probe runs on an event loop of its own in a worker thread: the window's loop never
waits on it (its requests are timed there, not among the window's repaints), and a Cancel
or the window closing cancels it there, where the probe's own ``finally`` stops the server
it started (the interpreter waits for that thread before it exits).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from PySide6.QtCore import QObject, Signal

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.records import Hardware
from workbench.engine.config.experiment import RunConfig
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.measure.hardware import fingerprint
from workbench.engine.models.gguf_header import loadable_model
from workbench.engine.models.model_file import resolve_model
from workbench.engine.predict.calibration import Calibration, path_of, replaced_at, save
from workbench.engine.predict.describe import describe, doubts
from workbench.engine.predict.probe import LIMIT_S, probe
from workbench.engine.predict.run_prediction import Wanted
from workbench.engine.server.discovery import find_server_binary
from workbench.ui.controllers.tasks import Tasks

T = TypeVar("T")
CANCELLED = "Calibration cancelled: the server it started is stopped; nothing stored."


class OwnLoop:
    """A coroutine run on an event loop of its own (in the worker thread that calls
    ``run``), cancellable from any thread."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self.cancelled = False

    def run(self, make: Callable[[], Awaitable[T]]) -> T | None:
        """``make()``'s result, or None once cancelled."""

        async def main() -> T:
            self._task = asyncio.current_task()
            self._loop = asyncio.get_running_loop()
            if self.cancelled:  # cancelled before this loop could be told
                raise asyncio.CancelledError
            return await make()

        try:
            return asyncio.run(main())
        except asyncio.CancelledError:
            return None

    def cancel(self) -> None:
        self.cancelled = True
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)


class CalibrateController(QObject):
    busy_changed = Signal(bool)
    # Emitted from the probe's thread too: Qt queues them to the receiver's thread.
    line = Signal(str)  # a progress line
    stored = Signal(list, str)  # the calibration described (its lines), where it is stored
    # (with what it replaced)
    failed = Signal(str)
    known = Signal(str)  # whether the settings in the form have a calibration, in one line

    def __init__(
        self,
        tasks: Tasks,
        out_dir: Path,
        server_bin: str | None = None,
        folder: Path | None = None,
        parent: QObject | None = None,
    ) -> None:
        """``folder``: where calibrations are stored (None: the workbench's own)."""
        super().__init__(parent)
        self.tasks = tasks
        self.out_dir = out_dir
        self.server_bin = server_bin
        self.folder = folder
        self.probe = probe  # what measures (a test's stand-in replaces it)
        self._own: OwnLoop | None = None
        self._checks = 0  # numbers the checks: one that a later one overtook is dropped
        self._machines: dict[str, Hardware] = {}  # fingerprint per binary: it runs it

    @property
    def busy(self) -> bool:
        return self._own is not None

    def start(self, config: RunConfig) -> None:
        """Probe with ``config``'s server settings."""
        if not self.busy:
            self._own = OwnLoop()
            self.busy_changed.emit(True)
            self.tasks.spawn(self._calibrate(self._own, config))

    def cancel(self) -> None:
        if self._own is not None:
            self.line.emit("cancelling: stopping the server…")
            self._own.cancel()

    def shutdown(self) -> None:
        """The window is closing: the probe is cancelled where it runs (its thread stops
        the server before the interpreter exits)."""
        if self._own is not None:
            self._own.cancel()

    def check(self, config: RunConfig) -> None:
        """Say (``known``) whether ``config`` has a calibration on this machine."""
        self._checks += 1
        self.tasks.spawn(self._check(self._checks, config))

    async def _calibrate(self, own: OwnLoop, config: RunConfig) -> None:
        try:
            done = await asyncio.to_thread(own.run, lambda: self._measure(config.server))
        except WorkbenchError as exc:
            self.failed.emit(str(exc))
        except OSError as exc:  # the log's folder, the calibrations' folder
            self.failed.emit(f"Calibration failed: {exc.strerror or exc}")
        except asyncio.CancelledError:  # the window's tasks cancelled: it is closing
            own.cancel()
            raise
        else:
            if done is None:
                self.failed.emit(CANCELLED)
            else:
                calibration, where = done
                said = [f"warning: {doubt.line()}" for doubt in doubts(calibration)]
                self.stored.emit([*describe(calibration), *said], where)
                self.check(config)
        finally:
            self._own = None
        self.busy_changed.emit(False)

    async def _measure(self, settings: ServerSettings) -> tuple[Calibration, str]:
        """In the worker's own loop: find the server and the model, probe, store; returns
        where it is stored, with what that replaced."""
        binary = find_server_binary(self.server_bin).path
        model = loadable_model(settings.model)
        self.line.emit(f"calibrating {model.name}: at most {LIMIT_S:g} s of measuring")
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        log = self.out_dir / "logs" / f"calibrate-{stamp}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        probed = await self.probe(binary, model, settings, log, say=self.line.emit)
        if probed.calibration.note:
            self.line.emit(probed.calibration.note)
        earlier = replaced_at(path_of(probed.calibration, self.folder))
        path = save(probed.calibration, self.folder)
        return probed.calibration, f"{path} ({earlier})" if earlier else str(path)

    async def _check(self, number: int, config: RunConfig) -> None:
        try:
            found = await asyncio.to_thread(self._stored, config)
        except WorkbenchError as exc:
            text = f"Cannot tell whether these settings are calibrated: {exc}"
        else:
            text = (
                f"Calibrated here ({found.source}, {found.made_at[:16].replace('T', ' ')}): "
                "runs are predicted."
                if found is not None
                else "Not calibrated here: Calibrate (about a minute) to predict runs."
            )
        if number == self._checks:
            self.known.emit(text)

    def _stored(self, config: RunConfig) -> Calibration | None:
        """The stored calibration that holds for ``config`` here, as a run finds it."""
        binary = find_server_binary(self.server_bin).path
        if binary not in self._machines:
            self._machines[binary] = fingerprint(binary)
        model = resolve_model(config.server.model)
        return Wanted.of(config, self._machines[binary], model).stored(self.folder)
