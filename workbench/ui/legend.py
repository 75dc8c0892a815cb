"""One legend for the grid and the Gantt: the same colours name the same states."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from workbench.ui.theme import state_color

ENTRIES = (
    ("queued", "queued (waiting for a slot)"),
    ("prefill", "prefill"),
    ("decoding", "decode"),
    ("done", "done"),
    ("failed", "failed"),
)


class StateLegend(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.setSpacing(14)
        for state, text in ENTRIES:
            chip = QLabel()
            chip.setFixedSize(14, 14)
            chip.setStyleSheet(f"background:{state_color(state).name()}; border-radius:3px;")
            layout.addWidget(chip)
            label = QLabel(text)
            layout.addWidget(label)
        layout.addStretch(1)
