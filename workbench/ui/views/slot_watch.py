"""A watched llama-server's slots: a row per slot, each task a bar (its prompt, then its
decoding, in the Gantt's colours for them) labelled with its task id, its prompt and the
part of it found in the slot's cache; and beside the rows, how much of its context each
slot's task holds now.

Drawn as the run's Gantt is: one ``BarGraphItem`` per colour whose arrays are replaced on
each frame, and a few labels, reused, on the bars wide enough for one (never an item a
task: a watch of hours keeps a thousand).
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QFontMetricsF, QPen
from PySide6.QtWidgets import QApplication, QWidget

from workbench.engine.base.states import RequestState
from workbench.ui.theme.qt_theme import series_color, state_color, theme_color
from workbench.ui.views.gantt import BAR_HEIGHT, bar_item, set_bars
from workbench.ui.views.watch_plots import AXIS_WIDTH, GapShades, coloured, cursor_line
from workbench.ui.watch_model import BarSet, TaskBar, WatchModel
from workbench.ui.widgets.live_plot import EmptyNote, cache_axes
from workbench.ui.widgets.plot_widget import Plot, count_axis

MAX_LABELS = 48  # on screen at once: the latest tasks' first
LABEL_PAD_PX = 6
MIN_OUTLINED_PX = 6  # a bar narrower than this on screen has no outline: it would hide it
FULL_SHARE = 0.8  # of a slot's context: its figure drawn inside the bar's end
PROMPT, DECODING, MISSED = "prompt", "decoding", "missed"


def title() -> str:
    """The slots' title, its words for a bar's parts in their colours (its legend)."""

    prompt, decoding, missed = (
        state_color(s) for s in (RequestState.PREFILL, RequestState.DECODING, RequestState.QUEUED)
    )
    return (
        f"Slots (from /slots): each task's {coloured('prompt', prompt)}, then its "
        f"{coloured('decoding', decoding)}; {coloured('ran between two polls', missed)}"
    )


class SlotGantt(Plot):
    """The slots' rows of tasks; ``sync`` draws the model's tasks and labels them."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("slotGantt")
        plot = self.getPlotItem()
        plot.setTitle(title(), size="10pt")
        plot.setLabel("left", "slot")
        plot.getAxis("left").setWidth(AXIS_WIDTH)
        plot.getAxis("left").enableAutoSIPrefix(False)
        plot.getAxis("bottom").enableAutoSIPrefix(False)
        count_axis(plot)
        plot.invertY(True)
        plot.showGrid(x=True, y=False, alpha=0.2)
        plot.setMouseEnabled(x=True, y=False)
        plot.disableAutoRange()
        cache_axes(plot)
        self.items = {
            PROMPT: bar_item(state_color(RequestState.PREFILL)),
            DECODING: bar_item(state_color(RequestState.DECODING)),
            MISSED: bar_item(state_color(RequestState.QUEUED)),
        }
        # Each task outlined in the plot's background: two tasks one after the other on a
        # slot (the next one's prompt unseen) read as two bars, not one.
        edge = QPen(pg.mkColor(pg.getConfigOption("background")))
        edge.setCosmetic(True)
        edge.setWidth(2)
        self.edges = bar_item(QBrush(Qt.BrushStyle.NoBrush), edge)
        for item in [*self.items.values(), self.edges]:
            plot.addItem(item)
        self.setToolTip(
            "A row per slot; a bar per task, labelled with its task id, its prompt's tokens\n"
            "and (in brackets) those found in the slot's cache. Each end is seen up to a poll\n"
            "late. A grey bar: a task that began and ended between two polls, seen by the id\n"
            "it left on its slot."
        )
        self.gaps = GapShades(plot)
        self.cursor = cursor_line(plot)
        self.labels: list[pg.TextItem] = []
        self._set = BarSet.of([])
        self._rows = 0
        self.note = EmptyNote(self, "each slot's tasks as /slots shows them")
        plot.vb.sigXRangeChanged.connect(self._draw)
        plot.vb.sigResized.connect(self._fit_ticks)
        plot.vb.sigResized.connect(self._draw)

    def sync(self, model: WatchModel) -> None:
        self._set = model.bar_set()
        self.note.show_empty(not len(self._set) and not model.slots)
        self.gaps.sync(model.gaps())
        rows = model.slot_count()
        if rows != self._rows:
            self._rows = rows
            self.getPlotItem().setYRange(-0.5, max(rows, 1) - 0.5, padding=0)
            self._fit_ticks()
        self._draw()

    def _draw(self) -> None:
        """The bars in the time range shown, their outlines where they are wide enough to
        tell apart, and their labels: the work of a frame follows what is on screen, not
        the length of the watch."""
        bars = self._set
        vb = self.getPlotItem().vb
        (x0, x1), _ = vb.viewRange()
        shown = (bars.end >= x0) & (bars.start <= x1)
        start, end, slot = bars.start[shown], bars.end[shown], bars.slot[shown]
        decoding, missed = bars.decoding[shown], bars.missed[shown]
        seen_decoding = ~missed & ~np.isnan(decoding)
        prompt_end = np.where(seen_decoding, decoding, end)
        for name, mask, left, right in (
            (PROMPT, ~missed, start, prompt_end),
            (DECODING, seen_decoding, decoding, end),
            (MISSED, missed, start, end),
        ):
            set_bars(self.items[name], left[mask], (right - left)[mask], slot[mask])
        per_s = vb.width() / (x1 - x0) if vb.width() > 0 and x1 > x0 else 0.0
        wide = (end - start) * per_s >= MIN_OUTLINED_PX
        set_bars(self.edges, start[wide], (end - start)[wide], slot[wide])
        self._label(np.flatnonzero(shown), x0, x1, per_s)

    def _fit_ticks(self) -> None:
        """A tick every slot, or every second, third... where their labels would overlap."""
        axis = self.getPlotItem().getAxis("left")
        rows = max(self._rows, 1)
        row_px = self.getPlotItem().vb.height() / rows
        line = QFontMetricsF(axis.font()).height()
        step = max(1, math.ceil(line / row_px)) if row_px > 0 else 1
        axis.setTicks([[(row, str(row)) for row in range(0, rows, step)]])

    def _label(self, shown: np.ndarray, x0: float, x1: float, per_s: float) -> None:
        """Label the bars with room for a label, the latest first, the longest label each
        bar has room for; none where the rows are thinner than a line of text."""
        bars = self._set
        metrics = QFontMetricsF(QApplication.font())
        rows = max(self._rows, 1)
        labelled: list[tuple[TaskBar, float, str]] = []
        if per_s > 0 and self.getPlotItem().vb.height() / rows >= metrics.height():
            left = np.maximum(bars.start[shown], x0)
            room = (np.minimum(bars.end[shown], x1) - left) * per_s - LABEL_PAD_PX
            places = np.flatnonzero(room >= metrics.horizontalAdvance("0"))
            for place in places[np.argsort(-bars.end[shown[places]], kind="stable")]:
                if len(labelled) == MAX_LABELS:
                    break
                bar = bars.bars[shown[place]]
                text = next(
                    (t for t in bar.labels() if metrics.horizontalAdvance(t) <= room[place]),
                    None,
                )
                if text is not None:
                    labelled.append((bar, float(left[place]), text))
        while len(self.labels) < len(labelled):
            label = pg.TextItem(color=theme_color("text", "on_state"), anchor=(0, 0.5))
            label.setZValue(10)
            self.getPlotItem().addItem(label)
            self.labels.append(label)
        for label, (bar, left_s, text) in zip(self.labels, labelled, strict=False):
            if label.toPlainText() != text:
                label.setText(text)
            label.setPos(left_s + LABEL_PAD_PX / 2 / per_s, bar.slot)
            label.show()
        for label in self.labels[len(labelled) :]:
            label.hide()

    def bar_count(self) -> int:
        """The tasks drawn, up to the time shown (for tests)."""
        return len(self._set)

    def label_texts(self) -> list[str]:
        """The labels shown (for tests and screenshots' checks)."""
        return [label.toPlainText() for label in self.labels if label.isVisible()]


class ContextBars(Plot):
    """Beside the slots' rows, and on their scale: the share of each slot's context that
    its task holds now (``slot_context_share``: exact while it decodes, the whole prompt
    while it reads it)."""

    def __init__(self, gantt: SlotGantt, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("contextBars")
        plot = self.getPlotItem()
        plot.setTitle("Context held now", size="10pt")
        plot.hideAxis("left")
        plot.invertY(True)
        plot.showGrid(x=True, y=False, alpha=0.2)
        plot.setMouseEnabled(x=False, y=False)
        plot.setXRange(-15, 125, padding=0)  # the end ticks' labels whole, not dropped
        plot.getAxis("bottom").setTicks([[(v, f"{v}%") for v in (0, 50, 100)]])
        plot.setLabel("bottom", "of the slot's n_ctx")
        cache_axes(plot)
        self.setToolTip(
            "How much of each slot's context its task holds now, from /slots: its prompt\n"
            "and the tokens decoded so far, over the slot's n_ctx. Exact while it decodes;\n"
            "while its prompt is read, the whole prompt shows from the start."
        )
        self.bars = pg.BarGraphItem(
            x0=[], width=[], y=[], height=BAR_HEIGHT, brush=series_color("busy_slots"), pen=None
        )
        plot.addItem(self.bars)
        plot.setYLink(gantt)
        self.note = EmptyNote(self, "the server does not say")
        self.note.setWordWrap(True)
        self.shares: dict[int, float] = {}
        self.labels: list[pg.TextItem] = []  # a share's figure beside its bar
        self.foreground = pg.mkColor(pg.getConfigOption("foreground"))

    def sync(self, model: WatchModel) -> None:
        shares = model.context()
        self.note.show_empty(not shares)
        if shares == self.shares:
            return
        self.shares = shares
        self.bars.setOpts(
            x0=[0.0] * len(shares),
            width=[100 * share for share in shares.values()],
            y=list(shares),
            height=BAR_HEIGHT,
        )
        while len(self.labels) < len(shares):
            label = pg.TextItem(anchor=(0, 0.5))
            self.getPlotItem().addItem(label)
            self.labels.append(label)
        row_px = self.getPlotItem().vb.height() / max(len(shares), 1)
        room = row_px >= QFontMetricsF(QApplication.font()).height()
        for label, (slot, share) in zip(self.labels, shares.items(), strict=False):
            inside = share > FULL_SHARE  # no room beside a nearly full bar: in its end
            label.setAnchor((1, 0.5) if inside else (0, 0.5))
            label.setColor(theme_color("text", "on_state") if inside else self.foreground)
            label.setText(f"{share:.0%}")
            label.setPos(100 * share, slot)
        for index, label in enumerate(self.labels):
            label.setVisible(room and index < len(shares))
