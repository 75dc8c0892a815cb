"""One legend for the grid and the Gantt: the same colours name the same states, and the
Gantt's arrival ticks where a run has them; and for a conversations run, the conversations'
colours and the mark of a turn that lost its cache."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QRect, Qt
from PySide6.QtGui import QColor, QResizeEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from workbench.engine.base.states import RequestState
from workbench.ui.run_model import RunModel
from workbench.ui.theme.qt_theme import series_color, state_color
from workbench.ui.views.gantt_rows import (
    DUE,
    REPREFILLED,
    SENT_LATE,
    STALLED,
    conversation_legend,
    conversation_palette,
)

SPACING = 14
TEXT_BOX = QRect(0, 0, 10_000, 1_000)  # room enough for any entry on one line
TICK_CHIP_WIDTH = 3  # pixels: an arrival tick's chip, a tick as the Gantt draws it
# A conversations run's Gantt decodes in each conversation's colour (the grid's panes keep
# the state's): the decode entry says so where it has room, the conversations' row always.
DECODE_BY_CONVERSATION = "decode (Gantt: the conversation's colour)"
BY_CONVERSATION = "Gantt decode by conversation:"


def chip_side(widget: QWidget) -> int:
    """A colour chip as tall as the text (a projector's large font beside 14-pixel chips
    hides the colours a legend is for)."""
    return max(14, round(widget.fontMetrics().height() * 0.8))


class StateLegend(QWidget):
    """The states' colours and names; a name's explanation shows when the row has room
    for it, so the legend never holds the centre column wider than a small screen allows.
    The Gantt says what its run draws (``show_run``): the arrival ticks' entries show for a
    run that has them, where the row has room (the strip's own axis label names it anyway),
    and the decode entry says when a conversation colours it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.setSpacing(SPACING)
        self.chips: list[QLabel] = []  # the states', then the ticks'
        self.labels: list[tuple[QLabel, str, str]] = []  # label, short text, long text
        for state in RequestState:
            name, meaning = state.label, state.meaning
            entry = self._add(state_color(state), name, f"{name} ({meaning})" if meaning else name)
            entry[0].setToolTip(meaning)
            self.labels.append(entry)
        # A stall's entry, shown where the run has one and the row has room (as the ticks').
        stalled = self._add(
            series_color("stall"), STALLED, f"{STALLED} (another prompt froze the stream)"
        )
        stalled[0].setToolTip(
            "a stretch of a stream with no token, far above its own pace (a generation "
            "stall), marked inside its decode bar once its configuration is done; hover it "
            "to outline the request whose prompt was processed then"
        )
        self.stall_label = stalled
        self._decode = list(RequestState).index(RequestState.DECODING)
        self.tick_labels = [  # the ticks' entries, apart from the states'
            self._add(series_color("arrival"), DUE, f"{DUE} (arrival schedule)"),
            self._add(series_color("arrival_late"), SENT_LATE, f"{SENT_LATE} (dashed: its wait)"),
        ]
        self.due, self.late = (label for label, _, _ in self.tick_labels)
        self.due.setToolTip(
            "a tick under the Gantt's rows where each request was due by its arrival "
            "schedule; its bar starts when it was sent"
        )
        self.late.setToolTip(
            "a request that went out later than it was due: it waited for a place under "
            "the client's concurrency limit, or the client fell behind its schedule; in "
            "rows per request, a dashed line in its row runs from when it was due to its bar"
        )
        layout.addStretch(1)
        self._ticks = [False, False]  # whether the run draws each kind of tick
        self._conversations = False
        self._cancelled = False  # whether the run has requests a stop cut short
        self._stalled = False  # whether a stream of the run stalled
        self._fit()

    def _add(self, color: QColor, short: str, long: str) -> tuple[QLabel, str, str]:
        """A chip and its label, laid out next; the label's entry (its short, long text)."""
        chip = QLabel()
        chip.setStyleSheet(f"background:{color.name()}; border-radius:3px;")
        self.chips.append(chip)
        self.layout().addWidget(chip)
        label = QLabel(short)
        self.layout().addWidget(label)
        return label, short, long

    def show_run(
        self,
        conversations: bool,
        due: bool,
        late: bool,
        cancelled: bool = False,
        stalled: bool = False,
    ) -> None:
        """What the Gantt draws: a conversation's decode colour, arrival ticks, late ones,
        requests a stop cut short and stalls (their entries show only then: a legend a run
        without them does not need must not take the centre column's width)."""
        drawn = (conversations, [due, late], cancelled, stalled)
        if drawn == (self._conversations, self._ticks, self._cancelled, self._stalled):
            return
        self._conversations, self._ticks, self._cancelled, self._stalled = drawn
        label, short, _ = self.labels[self._decode]
        long = DECODE_BY_CONVERSATION if conversations else short
        self.labels[self._decode] = (label, short, long)
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
        for chip in self.chips[-2:]:
            chip.setFixedSize(TICK_CHIP_WIDTH, side)
        self.setMinimumWidth(self._width(long=False, ticks=False))
        self._show_texts()

    def _shown(self, ticks: bool) -> list[bool]:
        """Which entries show: every state's (cancelled where the run has any), and with
        ``ticks`` (room for more) the stalls' where a stream stalled and the ticks the run
        draws: the Gantt's tips name a stall and a tick, and the legend's least width holds
        the centre column's at 1366 px."""
        states = [s is not RequestState.CANCELLED or self._cancelled for s in RequestState]
        return [*states, ticks and self._stalled, *(ticks and drawn for drawn in self._ticks)]

    def _width(self, long: bool, ticks: bool) -> int:
        """The legend's width with the short (or the long) texts, with or without ticks."""
        metrics = self.fontMetrics()
        margins = self.layout().contentsMargins()
        entries = [*self.labels, self.stall_label, *self.tick_labels]
        shown = [
            (chip, entry)
            for chip, entry, on in zip(self.chips, entries, self._shown(ticks), strict=True)
            if on
        ]
        # As a QLabel measures its text (a pixel or two over its advance): measured by the
        # advance, the legend's least width cut "queued" to "queuec" at 1366x768.
        texts = sum(
            metrics.boundingRect(
                TEXT_BOX, Qt.AlignmentFlag.AlignLeft, entry[2 if long else 1]
            ).width()
            for _, entry in shown
        )
        chips = sum(chip.width() for chip, _ in shown)
        gaps = SPACING * (2 * len(shown) - 1)
        return texts + chips + gaps + margins.left() + margins.right()

    def _show_texts(self) -> None:
        """The ticks' entries first where there is room, then the long texts."""
        ticks = self.width() >= self._width(long=False, ticks=True)
        long = self.width() >= self._width(long=True, ticks=ticks)
        entries = [*self.labels, self.stall_label, *self.tick_labels]
        for chip, (label, short, full), on in zip(
            self.chips, entries, self._shown(ticks), strict=True
        ):
            label.setText(full if long else short)
            chip.setVisible(on)
            label.setVisible(on)


class ConversationLegend(QWidget):
    """A conversations run's users by colour (one palette's worth; past it, it says the
    colours repeat) and the mark of a turn that re-prefilled its history. Hidden for a run
    of independent requests; redrawn only when its users change."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.setSpacing(SPACING // 2)
        layout.addWidget(QLabel(BY_CONVERSATION))
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
