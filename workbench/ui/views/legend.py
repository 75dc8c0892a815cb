"""One legend for the grid and the Gantt: the same colours name the same states."""

from __future__ import annotations

from PySide6.QtCore import QEvent
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from workbench.engine.base.states import RequestState
from workbench.ui.theme.qt_theme import state_color

SPACING = 14


class StateLegend(QWidget):
    """The states' colours and names; a name's explanation shows when the row has room
    for it, so the legend never holds the centre column wider than a small screen allows."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.setSpacing(SPACING)
        self.chips: list[QLabel] = []
        self.labels: list[tuple[QLabel, str, str]] = []  # label, short text, long text
        for state in RequestState:
            name, meaning = state.label, state.meaning
            chip = QLabel()
            chip.setStyleSheet(f"background:{state_color(state).name()}; border-radius:3px;")
            self.chips.append(chip)
            layout.addWidget(chip)
            label = QLabel(name)
            label.setToolTip(meaning)
            self.labels.append((label, name, f"{name} ({meaning})" if meaning else name))
            layout.addWidget(label)
        layout.addStretch(1)
        self._fit()

    def changeEvent(self, event: QEvent) -> None:
        """Chips as tall as the text (a projector's large font beside 14-pixel chips hides
        the colours the legend is for), and the texts re-measured."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._fit()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._show_texts()

    def _fit(self) -> None:
        side = max(14, round(self.fontMetrics().height() * 0.8))
        for chip in self.chips:
            chip.setFixedSize(side, side)
        self.setMinimumWidth(self._width(long=False))
        self._show_texts()

    def _width(self, long: bool) -> int:
        """The legend's width with the short (or the long) texts."""
        metrics = self.fontMetrics()
        margins = self.layout().contentsMargins()
        texts = sum(metrics.horizontalAdvance(entry[2 if long else 1]) for entry in self.labels)
        chips = sum(chip.width() for chip in self.chips)
        gaps = SPACING * (2 * len(self.chips) - 1)
        return texts + chips + gaps + margins.left() + margins.right()

    def _show_texts(self) -> None:
        long = self.width() >= self._width(long=True)
        for label, short, full in self.labels:
            label.setText(full if long else short)
