"""A watched server over time, under its slots and on their time axis: the requests
running and waiting (its queue), where ``/metrics`` says; the prompt and generated tokens a
second, from its counters; and its memory, where the watch reads it.

The time axis grows in steps, then slides, as the watch goes (an axis moved every frame
lays its text out again every frame); once the watch has ended it shows all of it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPen

from workbench.engine.base.states import RequestState
from workbench.ui.theme.qt_theme import series_color, signal_color, state_color
from workbench.ui.views.server_plots import HEADROOM, nice_ceiling
from workbench.ui.watch_model import RATE_WINDOW_S, Series, WatchModel
from workbench.ui.widgets.live_plot import EmptyNote, cache_axes
from workbench.ui.widgets.plot_widget import Plot, count_axis

MIN_SPAN_S = 10.0  # the time axis at first, as the run's Gantt's
ENDED_MIN_SPAN_S = 1.0  # once the watch has ended, fitted to it
WINDOW_S = 120.0  # then at most this much of it, sliding
AXIS_WIDTH = 56  # px: every time plot's left axis, so their time scales line up
MEMORY = "The server's memory"
KV_USE = "KV cache in use (the server's gauge)"
NO_METRICS = "no /metrics (llama-server: start it with --metrics): the queue is not seen"


def _pen(color: QColor) -> QPen:
    return pg.mkPen(color, width=2)


def _curve(plot: pg.PlotItem, pen: QPen) -> pg.PlotDataItem:
    """A curve drawn only where it is in view, and at most a few points a pixel (each
    pixel's least and most): a watch of hours replayed is a hundred thousand polls."""
    curve = plot.plot([], [], pen=pen)
    curve.setClipToView(True)
    curve.setDownsampling(auto=True, method="peak")
    return curve


def coloured(words: str, color: QColor) -> str:
    """Words of a title in their series' colour: its legend, with no box over the data at
    the right, where the newest is drawn."""
    return f"<b style='color:{color.name()}'>{words}</b>"


def time_plot(name: str, title: str) -> Plot:
    """A plot over the watch's time axis: ranges set by hand, grid on, its left axis as
    wide as the others' (the time plots are stacked, their times under each other)."""
    widget = Plot()
    widget.setObjectName(name)
    plot = widget.getPlotItem()
    plot.setTitle(title, size="10pt")
    plot.showGrid(x=True, y=True, alpha=0.2)
    plot.disableAutoRange()
    plot.setMouseEnabled(x=True, y=False)
    plot.getAxis("left").setWidth(AXIS_WIDTH)
    plot.getAxis("bottom").enableAutoSIPrefix(False)  # an hour is 3600 s, not "3.6 ks"
    cache_axes(plot)
    return widget


class TimeAxis:
    """The time range the stacked plots share (they are linked): set on the top one shown."""

    def __init__(self) -> None:
        self.shown = (0.0, MIN_SPAN_S)
        self._on: Plot | None = None
        self._span: float | None = None  # the span a replay last showed, as it asked for it

    def follow(self, top: Plot, now: float, ended: bool) -> None:
        x0, x1 = self.shown
        wanted = self.shown
        if ended:
            wanted = (0.0, max(ENDED_MIN_SPAN_S, now * 1.02))
        elif now > x0 + 0.95 * (x1 - x0):
            if now * 1.5 <= WINDOW_S:
                wanted = (0.0, max(MIN_SPAN_S, now * 1.5))
            else:
                wanted = (now - 0.7 * WINDOW_S, now + 0.3 * WINDOW_S)
        self._span = None
        self._show(top, wanted)

    def replay(self, top: Plot, now: float, end_s: float, span_s: float, whole: bool) -> None:
        """A kept watch at ``now``: all of it where it is ``whole`` (its end) or no longer
        than ``span_s``; else ``span_s`` of it, moved in steps as the time shown nears its
        right edge or leaves it (a seek), never past the watch's end."""
        x0 = self.shown[0]
        wanted = self.shown
        last = max(ENDED_MIN_SPAN_S, end_s * 1.02)
        if whole or span_s >= last:
            wanted, self._span = (0.0, last), None
        # the span as asked, not x1 - x0, which rounding makes differ from it now and then
        elif self._span != span_s or not x0 <= now <= x0 + 0.95 * span_s:
            left = min(max(0.0, now - 0.7 * span_s), last - span_s)
            wanted, self._span = (left, left + span_s), span_s
        self._show(top, wanted)

    def _show(self, top: Plot, wanted: tuple[float, float]) -> None:
        if wanted != self.shown or top is not self._on:
            self.shown, self._on = wanted, top
            top.getPlotItem().setXRange(*wanted, padding=0)


def cursor_line(plot: pg.PlotItem) -> pg.InfiniteLine:
    """The time a replay shows, a line over a plot (hidden until a replay sets it)."""
    pen = pg.mkPen(pg.getConfigOption("foreground"), width=1, style=Qt.PenStyle.DashLine)
    line = pg.InfiniteLine(angle=90, movable=False, pen=pen)
    line.setZValue(20)
    line.hide()
    plot.addItem(line, ignoreBounds=True)
    return line


GAP_OPACITY = 0.2


class GapShades:
    """The times the server did not answer, shaded behind a plot's data (at most the 100
    the engine keeps: a region each, moved rather than made again)."""

    def __init__(self, plot: pg.PlotItem) -> None:
        self.plot = plot
        self.regions: list[pg.LinearRegionItem] = []

    def sync(self, gaps: list[tuple[float, float]]) -> None:
        color = signal_color("error")
        color.setAlphaF(GAP_OPACITY)
        while len(self.regions) < len(gaps):
            region = pg.LinearRegionItem(movable=False, brush=color, pen=pg.mkPen(None))
            region.setZValue(-10)  # behind the data
            self.plot.addItem(region)
            self.regions.append(region)
        while len(self.regions) > len(gaps):
            self.plot.removeItem(self.regions.pop())
        for region, gap in zip(self.regions, gaps, strict=True):
            if tuple(region.getRegion()) != gap:
                region.setRegion(gap)


class WatchPlots:
    """The three plots (``requests``, ``tokens``, ``memory``), each a widget of its own
    for the window to stack under the slots."""

    def __init__(self) -> None:
        running, waiting = series_color("processing"), series_color("deferred")
        self.requests = time_plot(
            "watchRequests",
            f"Requests in the server (from /metrics): {coloured('running', running)}, "
            f"{coloured('waiting', waiting)} (the queue)",
        )
        plot = self.requests.getPlotItem()
        count_axis(plot)
        self.running = _curve(plot, _pen(running))
        self.gaps = GapShades(plot)
        self.waiting = _curve(plot, _pen(waiting))

        prompt, generated = state_color(RequestState.PREFILL), state_color(RequestState.DECODING)
        self.tokens = time_plot(
            "watchTokens",
            f"Tokens a second (the server's counters): {coloured('prompt', prompt)}, "
            f"{coloured('generated', generated)}",
        )
        plot = self.tokens.getPlotItem()
        plot.getAxis("left").enableAutoSIPrefix(False)
        self.prompt = _curve(plot, _pen(prompt))
        self.generated = _curve(plot, _pen(generated))
        self.tokens.setToolTip(
            f"The server's prompt and generated token counters, each a rate over the last "
            f"{RATE_WINDOW_S:.0f} s\ndrawn at their middle: they move when a prompt or a task "
            "ends, so a rate\nbetween two polls means nothing."
        )

        self.memory = time_plot("watchMemory", MEMORY)
        plot = self.memory.getPlotItem()
        plot.setLabel("left", "MiB")
        plot.getAxis("left").enableAutoSIPrefix(False)
        self.memory_curve = _curve(plot, _pen(series_color("rss")))
        self.memory.hide()  # until the watch reads it

        self.kv = time_plot("watchKv", KV_USE)
        plot = self.kv.getPlotItem()
        plot.setLabel("left", "%")
        plot.setYRange(0, 100, padding=0)
        self.kv_curve = _curve(plot, _pen(series_color("busy_slots")))
        self.kv.setToolTip(
            "The share of the server's KV cache in use, as its /metrics says (vLLM's and\n"
            "SGLang's; a llama-server's current builds give none)."
        )
        self.kv.hide()  # until the server gives it

        for later in (self.tokens, self.kv, self.memory):
            later.setXLink(self.requests)
        self.notes = {
            "requests": EmptyNote(self.requests, "running and waiting, from /metrics"),
            "tokens": EmptyNote(self.tokens, "prompt and generated tokens a second"),
        }
        self.cursors = [cursor_line(p.getPlotItem()) for p in self.plots]
        self._tops = {"requests": 0.0, "tokens": 0.0, "memory": 0.0}
        self._bottom: Plot | None = None

    @property
    def plots(self) -> tuple[Plot, ...]:
        """Every plot, in the order they stack."""
        return (self.requests, self.tokens, self.kv, self.memory)

    @property
    def shown(self) -> list[Plot]:
        return [p for p in self.plots if not p.isHidden()]

    def sync(self, model: WatchModel) -> None:
        if not model.metrics_on:
            for note in self.notes.values():
                if note.text() != NO_METRICS:
                    note.setText(NO_METRICS)
        self.notes["requests"].show_empty(not (len(model.running[0]) or len(model.waiting[0])))
        self.notes["tokens"].show_empty(not len(model.prompt_rate[0]))
        for curve, series, step in (
            (self.running, model.running, "left"),  # a count holds until the next poll
            (self.waiting, model.waiting, "left"),
            (self.prompt, model.prompt_rate, None),
            (self.generated, model.output_rate, None),
            (self.kv_curve, model.kv_use, "left"),
            (self.memory_curve, model.memory, None),
        ):
            curve.setData(*_arrays(series), stepMode=step)
        self.memory.setVisible(bool(len(model.memory[0])))
        if len(model.memory[1]):
            self._title(self.memory, f"{MEMORY}: {model.memory[1][-1]:,.0f} MiB now")
        if len(model.kv_use[1]):
            self.kv.show()  # once given, kept: a replay sought back keeps its rows still
            self._title(self.kv, f"{KV_USE}: {model.kv_use[1][-1]:.0f}% now")
        self.gaps.sync(model.gaps())
        self._fit("requests", self.requests, [model.running[1], model.waiting[1]])
        self._fit("tokens", self.tokens, [model.prompt_rate[1], model.output_rate[1]])
        self._fit("memory", self.memory, [model.memory[1]])
        self._time_values_under(self.shown[-1])

    def show_time(self, t_s: float | None) -> None:
        """A replay's time as a line over each plot (None: none, live)."""
        for line in self.cursors:
            line.setVisible(t_s is not None)
            if t_s is not None:
                line.setValue(t_s)

    @staticmethod
    def _title(widget: Plot, text: str) -> None:
        """A title set only when its words change (each setting lays it out again)."""
        plot = widget.getPlotItem()
        if plot.titleLabel.text != text:
            plot.setTitle(text, size="10pt")

    def _fit(self, key: str, widget: Plot, values: list[Any]) -> None:
        """The y range, moved only when the data nears its top (or falls far under it)."""
        top = max((float(np.max(v)) for v in values if len(v)), default=0.0)
        current = self._tops[key]
        if top * HEADROOM > current or top < current / 3:
            self._tops[key] = nice_ceiling(top * HEADROOM) if top > 0 else 1.0
            widget.getPlotItem().setYRange(0, self._tops[key], padding=0)

    def _time_values_under(self, bottom: Plot) -> None:
        """The time scale's numbers once, under the bottom plot shown."""
        if bottom is self._bottom:
            return
        self._bottom = bottom
        for widget in self.plots:
            plot = widget.getPlotItem()
            plot.getAxis("bottom").setStyle(showValues=widget is bottom)
            if widget is bottom:
                plot.setLabel("bottom", "time since the watch began", units="s")
            else:
                plot.getAxis("bottom").showLabel(False)


def _arrays(series: Series) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(series[0], float), np.asarray(series[1], float)
