"""One pane per concurrent request: its live text (reasoning dimmed, then the answer), its
state as a colour, TTFT, its decode rate (a live estimate in chunks/s until the server's count
gives tok/s) and tokens. A conversations run has one pane per conversation instead, in its
colour, that fills with its turns one after another: each pane stays in its place for the
whole repeat, so an audience follows a user's chat rather than panes that reflow every turn.

Panes are reused across configurations and only touched when their request changed since
they were last drawn, a bounded number of them a frame: 64 streams at full speed cost each
pane about 24 small updates a second, not one per token, and no frame draws all 64.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QRect, QRectF, QSize, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QFontMetricsF,
    QPainter,
    QPaintEvent,
    QPalette,
    QPen,
    QResizeEvent,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.base.records import CONTEXT_FULL, RequestKey
from workbench.engine.base.states import RequestState
from workbench.engine.figures.metrics import figure
from workbench.ui.run_model import RequestView, RunModel
from workbench.ui.theme.qt_theme import state_color, theme_color
from workbench.ui.views.gantt_rows import conversation_colour, conversation_palette
from workbench.ui.widgets import plain_text

MAX_PANES = 64
KEPT_CHARS = 4000  # a pane keeps this much of its text, and shows the tail that fits
GRID_MARGIN = GRID_SPACING = 4  # pixels around the panes and between them
STATS_EVERY_TICKS = 12  # the numbers in a pane's header change at ~5 Hz (60 Hz frames)
# A frame's work is counted in pane draws (see ``StreamGrid.sync``): a new text is one, and
# binding and showing a pane costs about four (its first paint included). At 32 a frame, 64
# new panes appear over eight frames (0.13 s at 60 Hz), and each of 64 streaming panes gets
# its news every second frame that draws panes (one that redraws a plot draws none): about
# 24 times a second.
PANE_DRAWS_PER_FRAME = 32
BIND_DRAWS = 4

Run = tuple[str, bool]  # a stretch of a pane's text, and whether it is dimmed (reasoning)


def turn_heading(turn: int) -> Run:
    return f"── turn {turn} ──", False


def runs_tail(runs: list[Run], keep: int) -> list[Run]:
    """The last ``keep`` characters of ``runs`` or fewer, the first run kept cut at a word."""
    kept: list[Run] = []
    for text, dimmed in reversed(runs):
        if keep <= 0:
            break
        if text:
            kept.append((word_tail(text, keep), dimmed))
            keep -= len(text)
    return kept[::-1]


def grid_shape(n: int, area_aspect: float = 1.8, pane_aspect: float = 1.8) -> tuple[int, int]:
    """Columns and rows for n panes: panes about ``pane_aspect`` wide for tall (text reads
    in lines), with few empty cells, in an area ``area_aspect`` wide for tall."""
    if n <= 0:
        return 0, 0

    def cost(cols: int) -> float:
        rows = math.ceil(n / cols)
        shape = area_aspect * rows / cols
        return abs(math.log(shape / pane_aspect)) + (cols * rows - n) / n

    cols = min(range(1, n + 1), key=cost)
    return cols, math.ceil(n / cols)


class TailText(QWidget):
    """Word-wrapped text anchored at the bottom, showing whole lines only (the newest), and
    above it, dimmed (the palette's placeholder colour, the theme's muted one), what the
    server streamed as reasoning before that answer; a conversation's pane shows its turns'
    runs so, one above the other.

    Painted by hand rather than by a QLabel: a label's new text re-lays out its pane and the
    grid every frame (size hints of wrapped text), while this widget only repaints itself."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)
        self._runs: list[Run] = []

    def text(self) -> str:
        """The answer shown (a conversation's: every turn's, and their headings)."""
        return "\n".join(text for text, dimmed in self._runs if not dimmed)

    def dimmed(self) -> str:
        return "\n".join(text for text, dimmed in self._runs if dimmed)

    def setText(self, text: str, dimmed: str = "") -> None:
        self.set_runs([(dimmed, True), (text, False)])

    def set_runs(self, runs: list[Run]) -> None:
        """Stretches of text top to bottom, each from a new line."""
        runs = [run for run in runs if run[0]]
        if runs != self._runs:
            self._runs = runs
            self.update()

    def sizeHint(self) -> QSize:
        return QSize(80, 2 * self.fontMetrics().lineSpacing())

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.fillRect(self.rect(), self.palette().color(QPalette.ColorRole.Window))
        line = math.ceil(QFontMetricsF(self.font()).lineSpacing())
        whole = (self.height() // line) * line  # the top line never shows cut in half
        area = QRect(0, self.height() - whole, self.width(), whole)
        painter.setClipRect(area)
        flags = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom) | int(
            Qt.TextFlag.TextWordWrap
        )
        colours = {
            False: self.palette().color(QPalette.ColorRole.WindowText),
            True: self.palette().color(QPalette.ColorRole.PlaceholderText),
        }
        left = whole  # whole lines left above the runs drawn: the newest at the bottom
        for text, dimmed in reversed(self._runs):
            if left <= 0:
                break
            room = QRect(0, area.top(), self.width(), left)  # above the runs drawn
            painter.setPen(colours[dimmed])
            painter.drawText(room, flags, text)
            used = painter.boundingRect(room, flags, text).height()
            left = ((left - used) // line) * line
        painter.end()


class StreamPane(QFrame):
    """A request's live text (its tail: what fits the pane) under a header with its state.

    Painted without style sheets (re-polishing 64 panes is what stalls a frame) and with a
    bounded text, so a tick costs the same at token 5 and at token 5000."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("streamPane")
        self.title = QLabel()
        self.title.setObjectName("paneTitle")
        self.state = QLabel()
        self.state.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.state.setAutoFillBackground(True)
        self.state.setMargin(2)
        self.state.setIndent(6)
        self.stats = QLabel()
        self.stats.setObjectName("paneStats")
        # Clip rather than widen: 64 panes must fit whatever the window size.
        self.stats.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.body = TailText()
        header = QHBoxLayout()
        header.setContentsMargins(0, 0, 0, 0)
        header.addWidget(self.title)
        header.addWidget(self.state)
        header.addWidget(self.stats, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.setSpacing(2)
        layout.addLayout(header)
        layout.addWidget(self.body, 1)
        self.key: RequestKey | None = None
        self.text = ""
        self.reasoning = ""
        self.history: list[Run] = []  # a conversation's earlier turns, kept to KEPT_CHARS
        self.turn: int | None = None  # the turn shown now
        self._title_colour: QColor | None = None
        self._state: RequestState | None = None
        self._stats = ""
        self._stat_parts: list[str] = []
        self._color = state_color(RequestState.QUEUED)

    def bind(
        self,
        view: RequestView,
        text: str,
        reasoning: str = "",
        history: list[Run] | None = None,
        colour: QColor | None = None,
    ) -> None:
        """``history``: a conversation's earlier turns (``colour`` its colour, the title's
        background); None for an independent request."""
        self.key = view.key
        user = view.user if history is not None else None
        self.turn = view.turn if user else None
        self.history = runs_tail(history or [], KEPT_CHARS)
        self.title.setText(f"{user} · turn {view.turn}" if user else f"#{view.number}")
        self._show_title_colour(colour)
        self.text, self.reasoning = word_tail(text, KEPT_CHARS), word_tail(reasoning, KEPT_CHARS)
        self._show_tail()
        self._state, self._stats = None, ""

    def _show_title_colour(self, colour: QColor | None) -> None:
        if colour == self._title_colour:
            return
        self._title_colour = colour
        self.title.setAutoFillBackground(colour is not None)
        if colour is None:
            self.title.setPalette(QPalette())  # the pane's again, following the theme
            self.title.setMargin(0)
            return
        palette = self.title.palette()
        palette.setColor(QPalette.ColorRole.Window, colour)
        palette.setColor(QPalette.ColorRole.WindowText, theme_color("text", "on_state"))
        self.title.setPalette(palette)
        self.title.setMargin(2)

    def append(self, text: str, reasoning: str = "") -> None:
        if text:
            self.text = word_tail(self.text + text, KEPT_CHARS)
        if reasoning:
            self.reasoning = word_tail(self.reasoning + reasoning, KEPT_CHARS)
        if text or reasoning:
            self._show_tail()

    def _show_tail(self) -> None:
        """The answer's tail, and the reasoning's in what room the answer leaves (above
        them, a conversation's turn heading and its earlier turns)."""
        now = [(self.reasoning, True), (self.text, False)]
        if self.turn is not None:
            now.insert(0, turn_heading(self.turn))
        self.body.set_runs(runs_tail([*self.history, *now], self.capacity()))

    def capacity(self) -> int:
        """About how many characters the body shows, with a margin: laying out (and
        painting) text nobody can see is the main cost of a frame."""
        metrics = self.body.fontMetrics()
        per_line = max(10, self.body.width() // max(1, metrics.averageCharWidth()))
        lines = max(2, self.body.height() // max(1, metrics.lineSpacing()))
        return int(per_line * lines * 1.5) + 40

    def resizeEvent(self, event: QResizeEvent) -> None:
        """A bigger pane shows more of the kept text and of its numbers: a reopened session
        binds whole texts before the panes have their size."""
        super().resizeEvent(event)
        self._show_tail()
        self._show_stats()

    def show_state(self, view: RequestView, now: float, stats: bool = True) -> None:
        if view.state is not self._state:
            self._state = view.state
            self._color = state_color(view.state)
            palette = self.state.palette()
            palette.setColor(QPalette.ColorRole.Window, self._color)
            palette.setColor(QPalette.ColorRole.WindowText, theme_color("text", "on_state"))
            self.state.setPalette(palette)
            no_fit = view.state is RequestState.FAILED and (view.error or "").startswith(
                CONTEXT_FULL
            )
            self.state.setText("did not fit" if no_fit else view.state.label)
            self.setToolTip(plain_text.tooltip(view.error or ""))
            if view.state is RequestState.FAILED and view.error:
                # Why, where the audience looks: a refused request has no text of its own.
                self.append(f"\n\n✖ {view.error}")
            self.update()
        if not stats:
            return
        self._stat_parts = pane_stats(view, now)
        self._show_stats()

    def _show_stats(self) -> None:
        text = fit_parts(self._stat_parts, self.stats.width(), self.stats.fontMetrics())
        if text != self._stats:
            self._stats = text
            self.stats.setText(text)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        pen = QPen(self._color)
        pen.setWidth(2)
        painter.setPen(pen)
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(1, 1, -1, -1), 4, 4)
        painter.end()


def word_tail(text: str, keep: int) -> str:
    """The last ``keep`` characters or fewer, starting at a word, not mid-word."""
    if len(text) <= keep:
        return text
    cut = text.find(" ", len(text) - keep)
    return text[cut + 1 :] if 0 <= cut < len(text) - keep // 2 else text[-keep:]


def pane_stats(view: RequestView, now: float) -> list[str]:
    """A pane's numbers, most telling first: its longest stall and what caused it (where it
    stalled, the story of its stream), TTFT, speed, tokens. The speed is the final decode
    tok/s once the server counted the tokens, else the live estimate (``≈ chunks/s``)."""
    parts = []
    if (stall := view.longest_stall) is not None:
        parts.append(stall.words())
    if view.ttft_s is not None:
        parts.append(f"TTFT {view.ttft_s:.2f}s")
    if view.decode_tok_s is not None:
        parts.append(f"{view.decode_tok_s:.0f} tok/s")
    elif (rate := view.live_rate(now)) is not None:
        parts.append(figure("live_decode_rate").live_text(rate))
    tokens = view.output_tokens if view.output_tokens is not None else view.chunks
    parts.append(f"{tokens} tok")
    return parts


def fit_parts(parts: list[str], width: int, metrics: QFontMetrics) -> str:
    """As many whole parts as fit ``width``: a narrow pane drops its last numbers (all of
    them if it must) rather than showing half of one."""
    text = ""
    for part in parts:
        longer = f"{text} · {part}" if text else part
        if metrics.horizontalAdvance(longer) > width:
            break
        text = longer
    return text


class StreamGrid(QWidget):
    """Lays out panes for the requests of the configuration running now (1 to 64).

    The panes are placed by hand in an inner widget without a layout. Qt activates a visible
    parent's layout each time a child shows, so showing 64 panes in a grid layout laid the
    grid out 64 times (about 300 pane resizes) in the frame a run started; and a layout
    would pass a pane's text change up to the splitters on every frame, re-laying out the
    plots beside it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumSize(120, 80)
        self._inner = QWidget(self)
        # Built up front: creating 64 panes when a run starts would stall that frame.
        self._pool: list[StreamPane] = [StreamPane(self._inner) for _ in range(MAX_PANES)]
        for pane in self._pool:
            pane.hide()
            pane.ensurePolished()
        self.panes: dict[RequestKey, StreamPane] = {}
        self._views: list[RequestView] = []  # the panes' requests, in the panes' order
        # A conversations run's panes show each conversation's latest turn, under these
        # earlier ones (by the latest turn's key).
        self._earlier: dict[RequestKey, list[RequestView]] = {}
        self._unbound: dict[RequestKey, None] = {}  # placed, to bind and show
        self._news: dict[RequestKey, None] = {}  # shown, with news to draw
        self._ticks = 0
        self._warmed = False
        self._placeholder = QLabel(
            "Press Run: one pane per concurrent request appears here.", self._inner
        )
        self._placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)

    def sizeHint(self) -> QSize:
        return QSize(640, 400)

    def showEvent(self, event: QShowEvent) -> None:
        """Show every pane once, hidden again before anything paints, when the window first
        appears: a widget's first show costs several times later ones, and 64 of them at
        the start of a run stall that frame."""
        super().showEvent(event)
        if self._warmed:
            return
        self._warmed = True
        if self.panes:  # bound before the window appeared: those panes are the ones to show
            return
        for pane in self._pool:
            pane.show()
        for pane in self._pool:
            pane.hide()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._inner.setGeometry(self.rect())
        self._place()

    def _place(self) -> None:
        """Each pane in its cell, ``grid_shape``'s columns by rows, and the placeholder over
        the whole grid (shown when there are none)."""
        area = self._inner.rect().adjusted(GRID_MARGIN, GRID_MARGIN, -GRID_MARGIN, -GRID_MARGIN)
        self._placeholder.setGeometry(area)
        if not self.panes:
            return
        aspect = area.width() / area.height() if area.height() > 0 else 1.8
        cols, rows = grid_shape(len(self.panes), area_aspect=min(max(aspect, 0.5), 4.0))
        for i, pane in enumerate(self.panes.values()):
            pane.setGeometry(cell(area, cols, rows, i))

    def _pane_font(self, count: int) -> QFont:
        """The grid's font, smaller for many panes: 64 panes must fit a projector's width."""
        font = QFont(self.font())
        font.setPointSizeF(max(7.0, self.font().pointSizeF() * (1.0 if count <= 16 else 0.8)))
        return font

    def changeEvent(self, event: QEvent) -> None:
        """A new application font (presentation mode, its zoom) reaches the panes shown,
        whose font was set when they were laid out."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            for pane in self.panes.values():
                self._fit_font(pane)

    def _fit_font(self, pane: StreamPane) -> None:
        """The pane font for this many panes, set only when it differs: a font set reaches
        every label of the pane and lays its header out again."""
        font = self._pane_font(len(self.panes))
        if pane.font() != font:
            pane.setFont(font)

    def sync(
        self,
        model: RunModel,
        changed: set[RequestKey],
        relayout: bool,
        now: float,
        budget: int | None = None,
    ) -> None:
        """Update the panes. ``budget`` bounds a frame's work in pane draws (a pane's new
        text is one, binding and showing a pane ``BIND_DRAWS``): panes waiting to be bound
        first, in order, then those whose news waited longest; the rest wait for the next
        frames. None (a session opened, a seek, a run's last frame) draws everything now."""
        if relayout:
            conversations = model.current_conversations()[:MAX_PANES]
            self._earlier = {turns[-1].key: turns[:-1] for turns in conversations}
            views = (
                [turns[-1] for turns in conversations]
                if conversations
                else model.current_requests()[:MAX_PANES]
            )
            # The same requests, not only the same keys: a new run's first requests have the
            # last run's keys, and may come in the frame that started it.
            if len(views) != len(self._views) or any(
                a is not b for a, b in zip(views, self._views, strict=False)
            ):
                self._lay_out(views)
        for key in changed:
            if key in self.panes and key not in self._unbound:
                self._news.setdefault(key)  # a key keeps its place: oldest news first
        self._ticks += 1
        left = math.inf if budget is None else budget
        while self._unbound and left >= BIND_DRAWS:
            key = next(iter(self._unbound))
            del self._unbound[key]
            self._bind(model, key, now)
            left -= BIND_DRAWS
        drawn = set()
        while self._news and left >= 1:
            key = next(iter(self._news))
            del self._news[key]
            view = model.requests[key]
            pane = self.panes[key]
            pane.append(model.take_text(key), model.take_reasoning(key))
            pane.show_state(view, now, stats=budget is None or view.state.finished)
            drawn.add(key)
            left -= 1
        if budget == 0:  # a frame that redraws a plot draws no pane
            return
        # Each decoding pane's numbers every STATS_EVERY_TICKS frames, the panes in turn: a
        # twelfth of them a frame, not all of them in one; all of them in a frame that draws
        # everything (a replay paused at a moment showed "0 tok" beside a pane of text).
        for i, (key, pane) in enumerate(self.panes.items()):
            view = model.requests[key]
            due = budget is None or (self._ticks + i) % STATS_EVERY_TICKS == 0
            if (
                due
                and view.state is RequestState.DECODING
                and key not in self._unbound
                and key not in drawn
            ):
                pane.show_state(view, now)

    def _lay_out(self, views: list[RequestView]) -> None:
        """Give the pool's first panes to ``views`` and place them; ``sync`` binds (and
        shows) each. A pane that keeps its request (more requests joined it) stays as it
        is; panes already showing stay shown (a first show is the costly part of laying out
        64 panes) until they are bound anew."""
        keys = [v.key for v in views]
        before = self._views
        for pane in self._pool[len(keys) : len(before)]:
            pane.hide()
        self.panes = dict(zip(keys, self._pool, strict=False))
        kept = {
            key
            for i, (key, view) in enumerate(zip(keys, views, strict=True))
            if i < len(before) and before[i] is view and key not in self._unbound
        }
        self._views = views
        self._unbound = dict.fromkeys(k for k in keys if k not in kept)
        self._news = {k: None for k in self._news if k in kept}
        for key in kept:
            self._fit_font(self.panes[key])
        self._placeholder.setVisible(not keys)
        self._place()  # sized before their text is bound: each shows the tail that fits

    def _bind(self, model: RunModel, key: RequestKey, now: float) -> None:
        view = model.requests[key]
        pane = self.panes[key]
        self._fit_font(pane)  # header and text
        history, colour = None, None
        if key in self._earlier:
            history = []
            for turn in self._earlier[key]:
                model.take_text(turn.key)  # what its pane had not drawn yet
                model.take_reasoning(turn.key)
                history += [
                    turn_heading(turn.turn or 0),
                    (turn.reasoning, True),
                    (turn.text, False),
                ]
            slot = conversation_colour(model, view)
            colour = QColor(conversation_palette()[slot]) if slot is not None else None
        pane.bind(
            view,
            view.text + model.take_text(key),
            view.reasoning + model.take_reasoning(key),
            history,
            colour,
        )
        pane.show_state(view, now)
        pane.show()


def cell(area: QRect, cols: int, rows: int, i: int) -> QRect:
    """The ``i``-th cell, row by row, of ``area`` split into ``cols`` by ``rows`` with
    ``GRID_SPACING`` between cells (where the pixels do not divide evenly, cells differ by
    one)."""
    width = area.width() - (cols - 1) * GRID_SPACING
    height = area.height() - (rows - 1) * GRID_SPACING
    col, row = i % cols, i // cols
    x0, x1 = width * col // cols, width * (col + 1) // cols
    y0, y1 = height * row // rows, height * (row + 1) // rows
    return QRect(
        area.x() + x0 + col * GRID_SPACING, area.y() + y0 + row * GRID_SPACING, x1 - x0, y1 - y0
    )
