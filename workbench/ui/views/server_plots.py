"""Live server plots: memory against the predicted footprint, requests running and waiting,
the KV cache's use where the server's /metrics gives it, and busy slots with how much of its
context each slot's request holds (/slots)."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFontMetricsF
from PySide6.QtWidgets import QVBoxLayout, QWidget

from workbench.ui.run_model import RunModel
from workbench.ui.theme.qt_theme import series_color
from workbench.ui.widgets.live_plot import EmptyNote, add_legend, cache_axes
from workbench.ui.widgets.plot_widget import Plot, count_axis

HEADROOM = 1.15  # a y axis reaches this far past its highest value: no line on the frame
BAR_HEIGHT = 0.7  # of a slot's row: its busy bar, and the scale of its context fill
TITLE_BUSY = "Slots busy (from /slots)"
TITLE_CONTEXT = "Slots busy, context used (fill)"  # fits the narrow column at 1366x768
CONTEXT_TIP = (
    "Each row is a server slot. Pale bar: the slot is busy with a request.\n"
    "Fill: how much of the slot's context the request holds; a full bar is the slot's\n"
    "n_ctx. From /slots: prompt tokens and tokens generated so far. Exact while it\n"
    "decodes; during prefill the whole prompt shows from the start, as the server does\n"
    "not say how far a prefill is."
)
TITLE_KV = "KV cache used (from /metrics)"
KV_TIP = (
    "The share of the server's KV cache in use, from its /metrics:\n"
    "vLLM's kv_cache_usage_perc, SGLang's token_usage (of the KV pool's tokens),\n"
    "llama.cpp's kv_cache_usage_ratio (older builds; current ones say it per slot in /slots)."
)


def _pale(name: str) -> QColor:
    color = QColor(series_color(name))
    color.setAlpha(90)
    return color


def _pen(name: str, dashed: bool = False) -> pg.QtGui.QPen:
    pen = pg.mkPen(series_color(name), width=2)
    if dashed:
        pen.setStyle(Qt.PenStyle.DashLine)
    return pen


def _time_plot(name: str, title: str, title_size: str = "11pt") -> pg.PlotWidget:
    """A plot over the run's time axis: ranges set by hand (see ``_fit_y``), grid on."""
    widget = Plot()
    widget.setObjectName(name)
    plot = widget.getPlotItem()
    plot.setTitle(title, size=title_size)
    plot.showGrid(x=True, y=True, alpha=0.2)
    plot.disableAutoRange()  # x follows the Gantt (linked by the window); y grows in steps
    cache_axes(plot)
    return widget


# What the memory plot will show, by who started the server.
MEMORY_NOTES = {
    "managed": "the server's memory, once it runs",
    "external": "a server started elsewhere: its memory cannot be seen from here",
}


class ServerPlots(QWidget):
    """Stacked plots on the run's time axis: RSS (MiB) against the predicted footprint,
    requests running and waiting (/metrics), the KV cache's use (/metrics, shown once a
    sample has it), and which slots were busy and how much of its context each one's request
    held (/slots). A server without /slots (vLLM, SGLang) has no slots strip: its KV-cache
    plot is the bottom one."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.memory = _time_plot("memoryPlot", "Memory: RSS vs predicted")
        self.memory.setToolTip(
            "RSS: resident memory of llama-server and its child processes.\n"
            "predicted: model + KV cache + compute buffers, from the server's startup log."
        )
        mem = self.memory.getPlotItem()
        mem.setLabel("left", "RSS", units="MiB")
        add_legend(mem, offset=(-10, -10))  # below the curve
        self.rss_curve = mem.plot([], [], pen=_pen("rss"), name="RSS")
        self.gpu_curve: pg.PlotDataItem | None = None  # added when a GPU reports memory
        self.predicted = mem.plot([], [], pen=_pen("predicted", dashed=True), name="predicted")

        self.queue = _time_plot("queuePlot", "Requests in the server")
        q = self.queue.getPlotItem()
        count_axis(q)
        add_legend(q, offset=(-10, 10))
        self.running = q.plot([], [], pen=_pen("processing"), name="running")
        self.waiting = q.plot([], [], pen=_pen("deferred"), name="waiting (queued)")
        # Busy slots as a shaded area beneath the lines: with every running request in a
        # slot the two counts are equal, and a line drawn over "running" hid it.
        self.busy = q.plot([], [], pen=pg.mkPen(None), fillLevel=0, brush=_pale("busy_slots"))
        self.busy.setZValue(-1)
        # A shaded area's own legend sample is a triangle: the entry is a square of its shade.
        swatch = pg.BarGraphItem(x=[], height=[], width=1, brush=_pale("busy_slots"), pen=None)
        q.legend.addItem(swatch, "busy slots")

        self.kv = _time_plot("kvPlot", TITLE_KV, "9pt")
        self.kv.setToolTip(KV_TIP)
        kv = self.kv.getPlotItem()
        kv.setLabel("left", "used", units="%")
        kv.getAxis("left").enableAutoSIPrefix(False)
        kv.getAxis("left").setTicks([[(v, str(v)) for v in (0, 50, 100)]])  # a short plot
        kv.setYRange(0, 100, padding=0)
        self.kv_curve = kv.plot(
            [], [], pen=_pen("busy_slots"), fillLevel=0, brush=_pale("busy_slots")
        )
        self.kv.hide()  # until a sample has it
        self._kv_layout: tuple[bool, bool] = (False, True)  # (KV shown, slots strip shown)

        self.slots = _time_plot("slotsStrip", TITLE_BUSY, "9pt")
        strip = self.slots.getPlotItem()
        strip.showGrid(x=True, y=False, alpha=0.2)  # rows are slots: their bars are the grid
        strip.setLabel("left", "slot")
        strip.getAxis("left").enableAutoSIPrefix(False)  # slot ids, never "x0.001"
        count_axis(strip)
        strip.setLabel("bottom", "time since start", units="s")
        # One time scale for the three: its numbers once, under the bottom plot.
        for upper in (mem, q):
            upper.getAxis("bottom").setStyle(showValues=False)
        strip.invertY(True)
        strip.setMouseEnabled(x=True, y=False)
        self.slot_bars = pg.BarGraphItem(
            x0=[],
            width=[],
            y=[],
            height=BAR_HEIGHT,
            brush=series_color("busy_slots"),
            pen=pg.mkPen(None),
        )
        strip.addItem(self.slot_bars)
        self._slot_rows = 0
        self._slot_ticks: list[tuple[int, str]] = []
        strip.getViewBox().sigResized.connect(self._fit_slot_ticks)
        # Per slot, its context curve, and the series (and its length and end) last drawn.
        self.context_curves: dict[int, pg.PlotDataItem] = {}
        self._context_drawn: dict[int, tuple[list[float], int, float]] = {}
        self.queue.setXLink(self.memory)
        self.kv.setXLink(self.memory)
        self.slots.setXLink(self.memory)
        self.notes = {
            "memory": EmptyNote(self.memory, MEMORY_NOTES["managed"]),
            "queue": EmptyNote(self.queue, "running and waiting, from /metrics"),
            "slots": EmptyNote(self.slots, "which slot serves, and how full it is"),
        }
        self._y_max = {"memory": 0.0, "queue": 0.0}

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.memory, 3)
        layout.addWidget(self.queue, 2)
        self.kv.setMinimumHeight(120)
        layout.addWidget(self.kv, 1)
        self.slots.setMinimumHeight(120)
        layout.addWidget(self.slots, 1)

    def sync(self, model: RunModel) -> None:
        memory_note = MEMORY_NOTES.get(model.mode, MEMORY_NOTES["managed"])
        if self.notes["memory"].text() != memory_note:
            self.notes["memory"].setText(memory_note)
        for key, empty in (
            ("memory", not model.rss[0]),
            ("queue", not (model.running[0] or model.busy_slots[0])),
            ("slots", not model.slot_spans),
        ):
            self.notes[key].show_empty(empty)
        self.rss_curve.setData(*map(np.asarray, model.rss))
        if model.gpu[0] and self.gpu_curve is None:
            self.gpu_curve = self.memory.getPlotItem().plot(
                [], [], pen=_pen("processing"), name="GPU (NVML)"
            )
        if self.gpu_curve is not None:
            self.gpu_curve.setData(*map(np.asarray, model.gpu))
        for curve, series in (
            (self.running, model.running),
            (self.waiting, model.waiting),
            (self.busy, model.busy_slots),
        ):
            curve.setData(*map(np.asarray, series), stepMode=None)
        self._sync_kv(model)
        # Each configuration's predicted footprint over its own span (a segment per server).
        spans = model.predicted if model.rss[0] else []
        xs = [t for start, end, _ in spans for t in (start, model.last_t if end is None else end)]
        ys = [mib for *_, mib in spans for _ in range(2)]
        self.predicted.setData(np.asarray(xs, float), np.asarray(ys, float), connect="pairs")

        self._sync_slots(model)
        self._fit_y(
            "memory",
            self.memory,
            [*model.rss[1], *model.gpu[1], *(p[2] or 0.0 for p in model.predicted)],
        )
        self._fit_y(
            "queue", self.queue, [*model.running[1], *model.waiting[1], *model.busy_slots[1]]
        )

    def _sync_kv(self, model: RunModel) -> None:
        """The KV cache's use, in %, shown once a sample has it; where the server has no
        /slots (nothing in the slots strip) it takes the strip's place and the time scale's
        numbers."""
        times, shares = model.kv_usage
        self.kv_curve.setData(np.asarray(times), 100.0 * np.asarray(shares))
        layout = (bool(times), not times or bool(model.slot_spans))
        if layout == self._kv_layout:
            return
        self._kv_layout = layout
        kv_shown, strip_shown = layout
        self.kv.setVisible(kv_shown)
        self.slots.setVisible(strip_shown)
        axis = self.kv.getPlotItem().getAxis("bottom")
        axis.setStyle(showValues=not strip_shown)
        axis.setLabel("" if strip_shown else "time since start", units=None if strip_shown else "s")

    def _sync_slots(self, model: RunModel) -> None:
        x0, width, rows = [], [], []
        for slot_id, spans in model.slot_spans.items():
            for start, end in spans:
                assert start is not None
                x0.append(start)
                width.append((end if end is not None else model.last_t) - start)
                rows.append(slot_id)
        self.slot_bars.setOpts(
            x0=np.array(x0), width=np.array(width), y=np.array(rows), height=BAR_HEIGHT
        )
        self._sync_context(model)
        count = max(model.slot_spans, default=-1) + 1
        if count != self._slot_rows:
            self._slot_rows = count
            self.slots.getPlotItem().setYRange(-0.5, max(count, 1) - 0.5, padding=0)
            self._fit_slot_ticks()

    def _fit_slot_ticks(self) -> None:
        """A whole-number tick every slot, or every second, third... slot when their labels
        would overlap (at 1366x768 the strip is ~80 px tall, and four labels did)."""
        strip = self.slots.getPlotItem()
        axis = strip.getAxis("left")
        rows = max(self._slot_rows, 1)
        line = QFontMetricsF(axis.font()).height()
        row_px = strip.getViewBox().height() / rows
        step = max(1, math.ceil(line / row_px)) if row_px > 0 else 1
        # A label centred on the first or last row may reach past the strip by half a line:
        # drawn, not dropped (there is no y grid whose bounds would clip it).
        axis.setStyle(hideOverlappingLabels=math.ceil(line / 2))
        ticks = [(row, str(row)) for row in range(0, rows, step)]
        if ticks != self._slot_ticks:
            self._slot_ticks = ticks
            axis.setTicks([ticks])

    def _sync_context(self, model: RunModel) -> None:
        """Each slot's context share as a filled curve in its row, from the bottom edge of
        its bar (nothing held) to the top (the slot's whole n_ctx). A slot whose series has
        not moved since the last frame is not redrawn."""
        strip = self.slots.getPlotItem()
        for slot_id in [s for s in self.context_curves if s not in model.slot_context]:
            strip.removeItem(self.context_curves.pop(slot_id))
            del self._context_drawn[slot_id]
        color = series_color("busy_slots")
        for slot_id, (times, shares) in model.slot_context.items():
            drawn = self._context_drawn.get(slot_id)
            if drawn is not None and drawn[0] is times and drawn[1:] == (len(times), times[-1]):
                continue
            self._context_drawn[slot_id] = (times, len(times), times[-1])
            bottom = slot_id + BAR_HEIGHT / 2  # the y axis points down: slot 0 on top
            curve = self.context_curves.get(slot_id)
            if curve is None:
                curve = strip.plot([], [], pen=None, fillLevel=bottom)  # idle: nothing drawn
                curve.setBrush(color)
                self.context_curves[slot_id] = curve
            curve.setData(np.asarray(times), bottom - BAR_HEIGHT * np.asarray(shares))
        showing = bool(self.context_curves)
        title = TITLE_CONTEXT if showing else TITLE_BUSY
        if strip.titleLabel.text != title:
            strip.setTitle(title, size="9pt")
            self.slots.setToolTip(CONTEXT_TIP if showing else "")
            self.slot_bars.setOpts(brush=_pale("busy_slots") if showing else color)

    def _fit_y(self, key: str, widget: pg.PlotWidget, values: list[float]) -> None:
        """Change the y range only when the data nears its top (or shrinks a lot, on a
        reset): a value equal to the top ran along the frame, where no one sees it."""
        top = max(values, default=0.0)
        current = self._y_max[key]
        if top * HEADROOM > current or top < current / 3:
            self._y_max[key] = nice_ceiling(top * HEADROOM) if top > 0 else 1.0
            widget.getPlotItem().setYRange(0, self._y_max[key], padding=0)

    def sample_count(self) -> int:
        x, _ = self.rss_curve.getData()
        return 0 if x is None else len(x)


def nice_ceiling(value: float) -> float:
    """1, 2, 2.5 or 5 times a power of ten, at least ``value``."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** np.floor(np.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return float(step * magnitude)
    return float(10 * magnitude)
