"""The read-only tables the panels show (results, sessions, capacity, SLO, comparison)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget


def two_lines(header: str) -> str:
    """A header on two lines (at its first space, else after its first slash), so a table
    fits the side panels of a 1366-pixel-wide screen with every header whole."""
    head, space, tail = header.partition(" ")
    if not space:
        head, slash, tail = header.partition("/")
        head += slash
    return f"{head}\n{tail}" if tail else head


def read_only_table(headers: Sequence[str] = ()) -> QTableWidget:
    """A table without row numbers or editing; columns fit their contents (header
    included: never cut) and the last one takes the rest of the width."""
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(list(headers))
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setStretchLastSection(True)
    return table
