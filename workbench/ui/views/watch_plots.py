"""A watched server over time, under its slots and on their time axis: the requests
running and waiting (its queue), where ``/metrics`` says; the prompt and generated tokens a
second, from its counters; and its memory, where the watch reads it.

The time axis grows in steps, then slides, as the watch goes (an axis moved every frame
lays its text out again every frame); once the watch has ended it shows all of it.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
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
NO_METRICS = "no /metrics (llama-server: start it with --metrics): the queue is not seen"


def _pen(color: QColor) -> QPen:
    return pg.mkPen(color, width=2)


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
    cache_axes(plot)
    return widget


class TimeAxis:
    """The time range the stacked plots share (they are linked): set on the top one shown."""

    def __init__(self) -> None:
        self.shown = (0.0, MIN_SPAN_S)
        self._on: Plot | None = None

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
        if wanted != self.shown or top is not self._on:
            self.shown, self._on = wanted, top
            top.getPlotItem().setXRange(*wanted, padding=0)


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
        self.running = plot.plot([], [], pen=_pen(running))
        self.gaps = GapShades(plot)
        self.waiting = plot.plot([], [], pen=_pen(waiting))

        prompt, generated = state_color(RequestState.PREFILL), state_color(RequestState.DECODING)
        self.tokens = time_plot(
            "watchTokens",
            f"Tokens a second (the server's counters): {coloured('prompt', prompt)}, "
            f"{coloured('generated', generated)}",
        )
        plot = self.tokens.getPlotItem()
        plot.getAxis("left").enableAutoSIPrefix(False)
        self.prompt = plot.plot([], [], pen=_pen(prompt))
        self.generated = plot.plot([], [], pen=_pen(generated))
        self.tokens.setToolTip(
            f"The server's prompt and generated token counters, each a rate over the last "
            f"{RATE_WINDOW_S:.0f} s\ndrawn at their middle: they move when a prompt or a task "
            "ends, so a rate\nbetween two polls means nothing."
        )

        self.memory = time_plot("watchMemory", MEMORY)
        plot = self.memory.getPlotItem()
        plot.setLabel("left", "MiB")
        plot.getAxis("left").enableAutoSIPrefix(False)
        self.memory_curve = plot.plot([], [], pen=_pen(series_color("rss")))
        self.memory.hide()  # until the watch reads it

        for later in (self.tokens, self.memory):
            later.setXLink(self.requests)
        self.notes = {
            "requests": EmptyNote(self.requests, "running and waiting, from /metrics"),
            "tokens": EmptyNote(self.tokens, "prompt and generated tokens a second"),
        }
        self._tops = {"requests": 0.0, "tokens": 0.0, "memory": 0.0}
        self._bottom: Plot | None = None

    @property
    def shown(self) -> list[Plot]:
        return [p for p in (self.requests, self.tokens, self.memory) if not p.isHidden()]

    def sync(self, model: WatchModel) -> None:
        if not model.metrics_on:
            for note in self.notes.values():
                if note.text() != NO_METRICS:
                    note.setText(NO_METRICS)
        self.notes["requests"].show_empty(not (model.running[0] or model.waiting[0]))
        self.notes["tokens"].show_empty(not model.prompt_rate[0])
        for curve, series, step in (
            (self.running, model.running, "left"),  # a count holds until the next poll
            (self.waiting, model.waiting, "left"),
            (self.prompt, model.prompt_rate, None),
            (self.generated, model.output_rate, None),
            (self.memory_curve, model.memory, None),
        ):
            curve.setData(*_arrays(series), stepMode=step)
        self.memory.setVisible(bool(model.memory[0]))
        if model.memory[1]:
            self._title(self.memory, f"{MEMORY}: {model.memory[1][-1]:,.0f} MiB now")
        self.gaps.sync(model.gaps())
        self._fit("requests", self.requests, [*model.running[1], *model.waiting[1]])
        self._fit("tokens", self.tokens, [*model.prompt_rate[1], *model.output_rate[1]])
        self._fit("memory", self.memory, model.memory[1])
        self._time_values_under(self.shown[-1])

    @staticmethod
    def _title(widget: Plot, text: str) -> None:
        """A title set only when its words change (each setting lays it out again)."""
        plot = widget.getPlotItem()
        if plot.titleLabel.text != text:
            plot.setTitle(text, size="10pt")

    def _fit(self, key: str, widget: Plot, values: list[float]) -> None:
        """The y range, moved only when the data nears its top (or falls far under it)."""
        top = max(values, default=0.0)
        current = self._tops[key]
        if top * HEADROOM > current or top < current / 3:
            self._tops[key] = nice_ceiling(top * HEADROOM) if top > 0 else 1.0
            widget.getPlotItem().setYRange(0, self._tops[key], padding=0)

    def _time_values_under(self, bottom: Plot) -> None:
        """The time scale's numbers once, under the bottom plot shown."""
        if bottom is self._bottom:
            return
        self._bottom = bottom
        for widget in (self.requests, self.tokens, self.memory):
            plot = widget.getPlotItem()
            plot.getAxis("bottom").setStyle(showValues=widget is bottom)
            if widget is bottom:
                plot.setLabel("bottom", "time since the watch began", units="s")
            else:
                plot.getAxis("bottom").showLabel(False)


def _arrays(series: Series) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(series[0], float), np.asarray(series[1], float)
