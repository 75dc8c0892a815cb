"""One legend for the grid and the Gantt: the same colours name the same states; and for a
conversations run, the conversations' colours and the mark of a turn that lost its cache."""

from __future__ import annotations

from PySide6.QtCore import QEvent
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from workbench.engine.base.states import RequestState
from workbench.ui.run_model import RunModel
from workbench.ui.theme.qt_theme import series_color, state_color
from workbench.ui.views.gantt_rows import REPREFILLED, conversation_legend, conversation_palette

SPACING = 14


def chip_side(widget: QWidget) -> int:
    """A colour chip as tall as the text (a projector's large font beside 14-pixel chips
    hides the colours a legend is for)."""
    return max(14, round(widget.fontMetrics().height() * 0.8))


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
        side = chip_side(self)
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


class ConversationLegend(QWidget):
    """A conversations run's users by colour (one palette's worth; past it, it says the
    colours repeat) and the mark of a turn that re-prefilled its history. Hidden for a run
    of independent requests; redrawn only when its users change."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.setSpacing(SPACING // 2)
        layout.addWidget(QLabel("conversations:"))
        self.users: list[tuple[QLabel, QLabel]] = []
        for _ in conversation_palette():
            chip, name = QLabel(), QLabel()
            layout.addWidget(chip)
            layout.addWidget(name)
            self.users.append((chip, name))
        self.more = QLabel()
        layout.addWidget(self.more)
        layout.addSpacing(SPACING)
        self.lost_chip = QLabel()
        self.lost_chip.setStyleSheet(f"border:3px solid {series_color('reprefilled').name()};")
        lost = QLabel(REPREFILLED)
        lost.setToolTip(
            "a later turn whose server processed more than half of the history it had "
            "sent before again: its slot no longer held the conversation"
        )
        layout.addWidget(self.lost_chip)
        layout.addWidget(lost)
        layout.addStretch(1)
        self._shown: tuple[list[tuple[str, int]], int] = ([], 0)
        self._fit()
        self.hide()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._fit()

    def _fit(self) -> None:
        side = chip_side(self)
        for chip, _ in self.users:
            chip.setFixedSize(side, side)
        self.lost_chip.setFixedSize(2 * side, side)

    def show_users(self, model: RunModel) -> None:
        legend = conversation_legend(model)
        if legend == self._shown:
            return
        self._shown = legend
        entries, count = legend
        palette = conversation_palette()
        for i, (chip, name) in enumerate(self.users):
            if i < len(entries):
                user, colour = entries[i]
                chip.setStyleSheet(f"background:{palette[colour]}; border-radius:3px;")
                name.setText(user)
            chip.setVisible(i < len(entries))
            name.setVisible(i < len(entries))
        self.more.setText(f"… {count} users: colours repeat" if count > len(entries) else "")
        self.more.setVisible(count > len(entries))
        self.setVisible(count > 0)
