"""A kept watch reopened in the watch window: its file read off the GUI thread (a watch of
hours is a hundred thousand rows, each checked), then played back at a speed, or sought.

Every way out is one line: a damaged file, a newer workbench's or one that is no watch
(``record.WatchFileError``), or one that cannot be opened (``failed``). The SLOs the watch
was given, kept in its file, are judged once it is shown, off the GUI thread, as the live
watch judges them at its end (``judged``). Playing advances by the time the clock says
passed between two frames, so a slow frame does not slow the replay down, it only makes
its next step longer.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from workbench.engine.watch.record import KeptInfo, WatchFileError, kept_in
from workbench.ui.controllers.tasks import Tasks
from workbench.ui.controllers.watch_controller import judged_off_thread
from workbench.ui.watch_replay import ReplayModel


async def kept_watches(folders: list[Path]) -> list[KeptInfo]:
    """The watches kept in ``folders``, newest first, listed off the GUI thread (each
    file's head is read)."""
    return await asyncio.to_thread(kept_in, folders)


class WatchReplayController(QObject):
    opened = Signal(object)  # the ReplayModel, at its end
    failed = Signal(str)  # one line: why the file cannot be replayed
    moved = Signal(float)  # the time shown, in seconds into the watch
    playing = Signal(bool)
    judged = Signal(object, str)  # the kept SLOs judged (list of Judged), or why not

    def __init__(self, tasks: Tasks, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.model: ReplayModel | None = None
        self.speed = 1.0
        self.task: asyncio.Task[None] | None = None
        self._played_at: float | None = None  # the clock at the last step, while playing

    @property
    def is_playing(self) -> bool:
        return self._played_at is not None

    def open(self, path: Path) -> None:
        """Read ``path`` off the GUI thread; ``opened`` or ``failed`` says how it went."""
        self.task = self.tasks.spawn(self._read(path))

    async def _read(self, path: Path) -> None:
        try:
            model = await asyncio.to_thread(ReplayModel.read, path)
        except (WatchFileError, OSError) as exc:
            self.failed.emit(str(exc))
            return
        self.model = model
        self.opened.emit(model)
        self.moved.emit(model.now)
        if model.slos:
            self.judged.emit(*await judged_off_thread(path, model.slos))

    def play(self) -> None:
        """Play from the time shown; from the start where that is the end."""
        model = self.model
        if model is None:
            self.playing.emit(False)
            return
        if model.at_end:
            model.seek(0.0)
            self.moved.emit(model.now)
        self._played_at = time.monotonic()
        self.playing.emit(True)

    def pause(self) -> None:
        was = self.is_playing
        self._played_at = None
        if was:
            self.playing.emit(False)

    def seek(self, t_s: float) -> None:
        if self.model is None:
            return
        self.model.seek(t_s)
        if self.is_playing:
            self._played_at = time.monotonic()
        self.moved.emit(self.model.now)

    def step(self) -> None:
        """One frame of a replay: on by the time that passed at its speed; at the end it
        stops there (the whole watch and its summary)."""
        model, then = self.model, self._played_at
        if model is None or then is None:
            return
        now = time.monotonic()
        self._played_at = now
        model.seek(model.now + (now - then) * self.speed)
        self.moved.emit(model.now)
        if model.at_end:
            self.pause()
