"""The session library: the output folder, the data folder and the folders the user added
(remembered in the preferences) scanned off the GUI thread (every session file is opened to
list it), other tools' result files imported into it, and which session the window now
shows."""

from __future__ import annotations

import asyncio
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from workbench.engine.analysis.library import data_folder, scan
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.preferences import MAX_MACHINES, load_preferences, remember
from workbench.engine.interop.formats import import_file, one_per_run
from workbench.ui.controllers.tasks import Tasks


class LibraryController(QObject):
    scanned = Signal(list)  # the SessionInfo of every session found, newest scan only
    failed = Signal(str)  # a file that could not be imported, and why
    folders_changed = Signal(list)  # the folders listed: output, data, then those added

    def __init__(self, out_dir: Path, tasks: Tasks, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.out_dir = out_dir
        self.tasks = tasks
        self._scans = 0  # numbers the scans: one that a later scan overtook is dropped
        self._opened: Path | None = None
        self._recorded: Path | None = None
        self.added = [Path(f) for f in load_preferences()[0].session_folders]

    @property
    def folders(self) -> list[Path]:
        """Every folder listed, each once: the output folder, the app's, those added."""
        return list(dict.fromkeys([self.out_dir, data_folder(), *self.added]))

    def refresh(self) -> None:
        self._scans += 1
        self.tasks.spawn(self._scan(self._scans))

    async def _scan(self, number: int) -> None:
        infos = await asyncio.to_thread(scan, self.folders)
        if number == self._scans:
            self.scanned.emit(infos)

    def add_folder(self, folder: Path) -> None:
        """List the sessions in ``folder`` too, from now on and at the next start."""
        folder = folder.expanduser().absolute()
        if not folder.is_dir():
            self.failed.emit(f"{folder} is not a folder")
            return
        if folder in self.folders:
            return
        if len(self.added) >= MAX_MACHINES:
            self.failed.emit(f"at most {MAX_MACHINES} folders can be added; forget one first")
            return
        self._remember([*self.added, folder])

    def forget_folder(self, folder: Path) -> None:
        """Stop listing an added folder (its files stay where they are)."""
        if folder in self.added:
            self._remember([f for f in self.added if f != folder])

    def _remember(self, added: list[Path]) -> None:
        try:
            remember(session_folders=tuple(str(f) for f in added))
        except WorkbenchError as exc:
            self.failed.emit(str(exc))
            return
        self.added = added
        self.folders_changed.emit(self.folders)
        self.refresh()

    async def import_files(self, paths: list[Path]) -> list[Path]:
        """Other tools' result files as sessions in the output folder, off the GUI thread (a
        result file can be large); one that cannot be read is said, and the others go on."""
        imported = []
        for path in one_per_run(paths):
            try:
                imported.append(await asyncio.to_thread(import_file, path, self.out_dir))
            except WorkbenchError as exc:
                self.failed.emit(str(exc))
        self.refresh()
        return imported

    def set_opened(self, path: Path | None) -> None:
        """The session opened from a file, or None once a run took the views."""
        self._opened = path

    def set_recorded(self, path: Path | None) -> None:
        """The session the last run wrote (None: it did not stop in time)."""
        self._recorded = path

    def current_session_path(self) -> Path | None:
        """The session the views show: the opened one, or the last run's."""
        return self._opened or self._recorded
