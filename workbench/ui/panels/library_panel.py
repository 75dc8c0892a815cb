"""The sessions in the output folder, the app's data folder and any folder added here: open
one, label and tag it, note why it was run, reveal it, or delete it (after asking). Under
them, the watches kept in the same folders (``*.watch.sqlite``): one replays in a watch
window of its own."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.analysis.library import (
    SessionInfo,
    SessionNotes,
    delete_session,
    save_notes,
)
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.watch.record import KeptInfo
from workbench.ui.watch_replay import clock
from workbench.ui.widgets import plain_text
from workbench.ui.widgets.read_only_table import read_only_table

COLUMNS = ("recorded", "session", "status", "hardware", "configurations")
WATCH_COLUMNS = ("started", "for", "tasks", "watched")  # its address last: the longest
WATCHES_HEIGHT = 150  # px: a few kept watches; the sessions keep the rest of the tab


class LibraryPanel(QWidget):
    open_requested = Signal(Path)
    watch_requested = Signal(Path)  # a kept watch to replay
    compare_requested = Signal(list)
    refresh_requested = Signal()
    folder_added = Signal(Path)  # a folder of sessions to list too
    folder_forgotten = Signal(Path)  # an added folder to list no more
    error = Signal(str)

    def __init__(self, folder: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.folder = folder
        self.infos: list[SessionInfo] = []
        self.added: list[Path] = []  # the folders added by the user, as listed now
        self.where = QLabel()
        self.where.setTextFormat(Qt.TextFormat.PlainText)
        self.where.setWordWrap(True)
        self.table = read_only_table(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.itemSelectionChanged.connect(self._selected)
        self.table.cellDoubleClicked.connect(lambda *_: self._open())
        self.label = QLineEdit()
        self.tags = QLineEdit()
        self.tags.setPlaceholderText("comma-separated, e.g. laptop, demo")
        self.note = QLineEdit()
        buttons = QGridLayout()  # two rows: the left panel must stay narrow
        self.buttons: dict[str, QPushButton] = {}
        for name, slot in (
            ("Open", self._open),
            ("Save notes", self._save),
            ("Reveal", self._reveal),
            ("Delete…", self._delete),
            ("Compare", self._compare),
            ("Refresh", self.refresh_requested.emit),
            ("Add folder…", self._add_folder),
            ("Forget folder…", self._forget_folder),
        ):
            button = QPushButton(name)
            button.clicked.connect(slot)
            buttons.addWidget(button, len(self.buttons) // 3, len(self.buttons) % 3)
            self.buttons[name] = button
        form = QFormLayout()
        form.addRow("label", self.label)
        form.addRow("tags", self.tags)
        form.addRow("note", self.note)
        self.watches: list[KeptInfo] = []
        self.watch_table = read_only_table(WATCH_COLUMNS)
        self.watch_table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.watch_table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.watch_table.setMaximumHeight(WATCHES_HEIGHT)
        self.watch_table.cellDoubleClicked.connect(lambda *_: self._replay_watch())
        self.watch_table.itemSelectionChanged.connect(self._watch_selected)
        self.replay_watch = QPushButton("Replay watch")
        self.replay_watch.setToolTip(
            "Open the kept watch in a watch window and play it back (Play, a speed, a slider)"
        )
        self.replay_watch.clicked.connect(self._replay_watch)
        self.watches_head = QLabel("Kept watches (Watch…): double-click one to replay it")
        self.watches_head.setWordWrap(True)
        watches = QWidget()
        watches_layout = QVBoxLayout(watches)
        watches_layout.setContentsMargins(0, 0, 0, 0)
        watches_layout.addWidget(self.watches_head)
        watches_layout.addWidget(self.watch_table)
        watches_layout.addWidget(self.replay_watch)
        self.watches_box = watches
        layout = QVBoxLayout(self)
        layout.addWidget(self.where)
        layout.addWidget(self.table, 1)
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(watches)
        watches.hide()  # until a folder holds one
        self.show_folders([folder])
        self._selected()
        self._watch_selected()

    def show_folders(self, folders: list[Path], added: list[Path] | None = None) -> None:
        """The folders listed (the first is the output folder); ``added``: those the user
        added, which **Forget folder…** offers."""
        self.added = list(added or [])
        self.where.setText("Sessions in " + ", ".join(str(f) for f in folders))
        self.buttons["Forget folder…"].setEnabled(bool(self.added))

    def _add_folder(self) -> None:
        chosen = QFileDialog.getExistingDirectory(
            self, "Add a folder of sessions", str(self.folder)
        )
        if chosen:
            self.folder_added.emit(Path(chosen))

    def _forget_folder(self) -> None:
        names = [str(f) for f in self.added]
        if not names:
            return
        name, ok = QInputDialog.getItem(self, "Forget a folder", "List no more:", names, 0, False)
        if ok and name:
            self.folder_forgotten.emit(Path(name))

    def show_infos(self, infos: list[SessionInfo]) -> None:
        self.infos = infos
        self.table.setRowCount(len(infos))
        for row, info in enumerate(infos):
            name = info.notes.label or info.name
            if info.notes.tags:
                name += " [" + ", ".join(info.notes.tags) + "]"
            cells = (
                info.created_at.replace("T", " ")[:16],
                name,
                "unreadable" if info.error else info.status,
                info.error or info.hardware + (f" ({info.backend})" if info.backend else ""),
                ", ".join(info.configs),
            )
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(
                    plain_text.tooltip(
                        str(info.path) + (f"\n{info.notes.note}" if info.notes.note else "")
                    )
                )
                self.table.setItem(row, column, item)
        self._selected()

    def show_watches(self, watches: list[KeptInfo]) -> None:
        """The kept watches found in the same folders, newest first (hidden where none)."""
        self.watches = watches
        self.watch_table.setRowCount(len(watches))
        for row, info in enumerate(watches):
            cells = (
                info.started.replace("T", " ")[:16],
                "" if info.error else clock(info.seconds),
                "" if info.error else f"{info.tasks:,}",
                "unreadable" if info.error else info.url,  # shown, never followed
            )
            tip = plain_text.tooltip(str(info.path) + (f"\n{info.error}" if info.error else ""))
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(tip)
                self.watch_table.setItem(row, column, item)
        self.watches_box.setVisible(bool(watches))
        self._watch_selected()

    def _watch_selected(self) -> None:
        self.replay_watch.setEnabled(0 <= self.watch_table.currentRow() < len(self.watches))

    def _replay_watch(self) -> None:
        row = self.watch_table.currentRow()
        if 0 <= row < len(self.watches):
            self.watch_requested.emit(self.watches[row].path)

    def selected(self) -> list[SessionInfo]:
        rows = sorted({index.row() for index in self.table.selectedIndexes()})
        return [self.infos[r] for r in rows if r < len(self.infos) and not self.infos[r].error]

    def _compare(self) -> None:
        chosen = self.selected()
        if len(chosen) < 2:
            self.error.emit("Select two or more sessions to compare (Ctrl-click).")
            return
        self.compare_requested.emit([info.path for info in chosen])

    def current(self) -> SessionInfo | None:
        row = self.table.currentRow()
        return self.infos[row] if 0 <= row < len(self.infos) else None

    def _selected(self) -> None:
        info = self.current()
        for button in ("Open", "Save notes", "Reveal", "Delete…"):
            self.buttons[button].setEnabled(info is not None)
        notes = info.notes if info is not None else SessionNotes()
        self.label.setText(notes.label)
        self.tags.setText(", ".join(notes.tags))
        self.note.setText(notes.note)

    def _open(self) -> None:
        info = self.current()
        if info is not None:
            self.open_requested.emit(info.path)

    def _save(self) -> None:
        info = self.current()
        if info is None:
            return
        notes = SessionNotes(
            self.label.text().strip(),
            [t.strip() for t in self.tags.text().split(",") if t.strip()],
            self.note.text().strip(),
        )
        try:
            save_notes(info.path, notes)
        except WorkbenchError as exc:
            self.error.emit(str(exc))
            return
        self.refresh_requested.emit()

    def _reveal(self) -> None:
        info = self.current()
        if info is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(info.path.parent)))

    def _delete(self) -> None:
        info = self.current()
        if info is None or not self.confirm_delete(info):
            return
        try:
            delete_session(info.path)
        except WorkbenchError as exc:
            self.error.emit(str(exc))
            return
        self.refresh_requested.emit()

    def confirm_delete(self, info: SessionInfo) -> bool:
        answer = QMessageBox.question(
            self,
            "Delete session?",
            f"Delete {info.path.name} and its notes? This cannot be undone.",
        )
        return answer == QMessageBox.StandardButton.Yes
