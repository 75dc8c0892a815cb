"""A tune from the window: the engine's search (blocking: it probes, predicts and runs real
servers) in a worker thread, its progress brought to the window's thread by a Qt signal, and
a Cancel or the window closing asking it to stop (it stops the servers it started and answers
with what it found by then)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.tune.records import Recommendation, TuneProgress, TuneRequest
from workbench.ui.controllers.tasks import Tasks

TuneFunction = Callable[
    [TuneRequest, Callable[[TuneProgress], None], threading.Event], Recommendation
]


def engine_tune() -> TuneFunction:
    """The engine's search, imported when a tune starts: most windows never tune."""
    from workbench.engine.tune.search import tune

    return tune


class TuneController(QObject):
    busy_changed = Signal(bool)
    # Emitted from the search's thread: Qt queues it to the thread the receiver lives in.
    progressed = Signal(object)  # a TuneProgress
    finished = Signal(object)  # the Recommendation
    failed = Signal(str)  # why the tune did not start or ended without an answer

    def __init__(
        self, tasks: Tasks, tune: TuneFunction | None = None, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.tune = tune  # None: the engine's search, imported when a tune starts
        self._cancel: threading.Event | None = None

    @property
    def running(self) -> bool:
        return self._cancel is not None

    def start(self, request: TuneRequest) -> None:
        if self.running:
            return
        self._cancel = threading.Event()
        self.tasks.spawn(self._run(request, self._cancel))

    def cancel(self) -> None:
        """Ask the search to stop; it answers with what it has (``finished``)."""
        if self._cancel is not None:
            self._cancel.set()

    def _report(self, progress: TuneProgress) -> None:
        """Called in the search's thread; a window already gone hears nothing."""
        with contextlib.suppress(RuntimeError):  # the controller deleted with its window
            self.progressed.emit(progress)

    async def _run(self, request: TuneRequest, cancel: threading.Event) -> None:
        self.busy_changed.emit(True)
        try:
            tune = self.tune or engine_tune()
            recommendation = await asyncio.to_thread(tune, request, self._report, cancel)
        except asyncio.CancelledError:  # the window closes: the search stops too
            cancel.set()
            raise
        except WorkbenchError as exc:
            self.failed.emit(str(exc))
            return
        finally:
            self._cancel = None
            self.busy_changed.emit(False)
        self.finished.emit(recommendation)
