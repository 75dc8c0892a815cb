"""The read-only tables the panels show (results, sessions, capacity, SLO, comparison)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget


def read_only_table(headers: Sequence[str] = (), stretch: bool = False) -> QTableWidget:
    """A table without row numbers or editing; columns fit their contents and the last one
    takes the rest of the width, or all columns share it equally with ``stretch``."""
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(list(headers))
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    header = table.horizontalHeader()
    if stretch:
        header.setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
    else:
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
    return table
