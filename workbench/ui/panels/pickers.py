"""Choosing a model or a llama-server binary from what is on the machine, without a terminal.

Both dialogs list what a search found (in a worker thread: it reads model headers and runs
``--version``), let the user take a row or browse for any file, and remember the choice in
the preferences. A row that cannot be used says why and cannot be taken.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.preferences import load_preferences, remember
from workbench.engine.models.model_finder import FoundModel, describe, find_models, places
from workbench.engine.server.binary_choices import BinaryChoice, choice, server_candidates
from workbench.ui.controllers.tasks import Tasks


@dataclass(frozen=True)
class Row:
    """One choice: the value taken, the cells shown, and why it cannot be taken (if so)."""

    value: str
    cells: tuple[str, ...]
    how: str = ""  # how it was found, remembered with it
    problem: str | None = None


class ChoiceDialog(QDialog):
    """A table of choices filled by ``search`` in a thread, a button to browse for a file.
    ``keep`` remembers a choice before ``chosen`` tells it; column ``stretch`` (a name or a
    path) takes the room left, shortened in its middle."""

    chosen = Signal(str, str)  # value, how it was found

    def __init__(
        self,
        title: str,
        explanation: str,
        columns: Sequence[str],
        search: Callable[[], list[Row]],
        browse: Callable[[str], Row],
        file_filter: str,
        keep: Callable[[str, str], object],
        stretch: int = 0,
        remembered: str | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)  # one is made per opening
        self.setWindowTitle(title)
        self.resize(900, 420)
        self.tasks = Tasks()
        self._browse, self._filter, self._keep = browse, file_filter, keep
        self._remembered = remembered  # the last choice, selected when it is found again
        self.rows: list[Row] = []
        text = QLabel(explanation)
        text.setWordWrap(True)
        text.setTextFormat(Qt.TextFormat.PlainText)
        self.status = QLabel("looking…")
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.table = QTableWidget(0, len(columns))
        self.table.setHorizontalHeaderLabels(list(columns))
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)  # names, paths
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        self.table.cellDoubleClicked.connect(lambda row, _: self.take(row))
        self.use_button = QPushButton("Use this one")
        self.use_button.setEnabled(False)
        self.use_button.clicked.connect(lambda: self.take(self.table.currentRow()))
        other = QPushButton("Other file…")
        other.clicked.connect(self._browse_dialog)
        cancel = QPushButton("Cancel")
        cancel.clicked.connect(self.reject)
        buttons = QHBoxLayout()
        buttons.addWidget(self.status, 1)
        buttons.addWidget(other)
        buttons.addWidget(cancel)
        buttons.addWidget(self.use_button)
        layout = QVBoxLayout(self)
        layout.addWidget(text)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        self.tasks.spawn(self._search(search))

    async def _search(self, search: Callable[[], list[Row]]) -> None:
        try:
            rows = await asyncio.to_thread(search)
        except Exception as exc:  # never leave the dialog saying "looking…"
            self.status.setText(f"the search failed ({type(exc).__name__}: {exc}): use Other file…")
            return
        self.show_rows(rows)

    def show_rows(self, rows: list[Row]) -> None:
        self.rows = rows
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, text in enumerate(row.cells):
                item = QTableWidgetItem(text)
                item.setToolTip(row.problem or row.value)
                if row.problem:
                    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsSelectable)
                    item.setForeground(self.palette().placeholderText())
                self.table.setItem(r, c, item)
        values = [row.value for row in rows]
        if self._remembered in values:
            self.table.selectRow(values.index(self._remembered))
        usable = sum(row.problem is None for row in rows)
        self.status.setText(
            f"found {usable} usable of {len(rows)}" if rows else "none found: use Other file…"
        )

    def _selection_changed(self) -> None:
        row = self.table.currentRow()
        self.use_button.setEnabled(0 <= row < len(self.rows) and self.rows[row].problem is None)

    def take(self, index: int) -> bool:
        """Choose row ``index``: False (nothing happens) when it cannot be used."""
        if not 0 <= index < len(self.rows) or self.rows[index].problem is not None:
            return False
        row = self.rows[index]
        try:
            self._keep(row.value, row.how)
        except WorkbenchError as exc:  # it could not be remembered: say so, stay open
            self.status.setText(str(exc))
            return False
        self.chosen.emit(row.value, row.how)
        self.accept()
        return True

    async def take_file(self, path: str) -> bool:
        """Choose a file the user browsed to, once it passes the same checks as a row (in a
        thread: a binary's --version may take seconds)."""
        self.status.setText(f"checking {path}…")
        row = await asyncio.to_thread(self._browse, path)
        if row.problem is not None:
            self.status.setText(row.problem)
            return False
        self.rows.append(row)
        return self.take(len(self.rows) - 1)

    def _browse_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, self.windowTitle(), "", self._filter)
        if path:
            self.tasks.spawn(self.take_file(path))

    def done(self, result: int) -> None:
        self.tasks.cancel_all()
        super().done(result)


# -- models -----------------------------------------------------------------------------------
MODEL_COLUMNS = ("model", "from", "size", "architecture", "quantisation", "trained context")


def model_row(model: FoundModel) -> Row:
    context = f"{model.training_context:,}" if model.training_context else "?"
    cells = (
        model.name,
        model.source,
        model.size_text,
        model.architecture or "?",
        model.quantisation or "?",
        context,
    )
    return Row(str(model.path), cells, model.source, model.error)


def model_picker(parent: QWidget | None = None) -> ChoiceDialog:
    """Models found where people keep them; the choice is remembered, and selected the next
    time the picker opens."""
    folders = ", ".join(sorted({p.source for p in places()}))
    dialog = ChoiceDialog(
        "Choose a model",
        f"GGUF models found on this machine ({folders}, and the default model). "
        "Each is described from its own header.",
        MODEL_COLUMNS,
        lambda: [model_row(m) for m in find_models()],
        lambda path: model_row(describe(Path(path), "chosen file", Path(path).name)),
        "GGUF models (*.gguf)",
        lambda path, _: remember(model=path),
        0,
        load_preferences()[0].model,
        parent,
    )
    return dialog


# -- server binaries --------------------------------------------------------------------------
BINARY_COLUMNS = ("found", "version", "llama-server")


def binary_row(found: BinaryChoice) -> Row:
    version = found.version.split("; ")[0] if found.version else None  # not "built with"
    cells = (found.found_by, version or found.problem or "?", found.path)
    return Row(found.path, cells, found.found_by, found.problem)


def binary_dialog(parent: QWidget | None = None) -> ChoiceDialog:
    """The llama-server binaries on this machine; the choice is remembered and used by every
    later run until the preferences are reset."""
    dialog = ChoiceDialog(
        "Choose the llama-server to run",
        "No usable llama-server was found (none configured, or the one given is missing). "
        "Choose one found on this machine (on PATH, from Homebrew, or the build this "
        "project installs), or any llama-server file. The choice is remembered; "
        "`workbench preferences --reset` forgets it.",
        BINARY_COLUMNS,
        lambda: [binary_row(c) for c in server_candidates()],
        lambda path: binary_row(choice(path, "chosen file")),
        "",
        lambda path, how: remember(server_bin=path, server_bin_found_by=how),
        len(BINARY_COLUMNS) - 1,
        load_preferences()[0].server_bin,
        parent,
    )
    return dialog
