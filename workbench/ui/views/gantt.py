"""The queue Gantt: one row per request, grey while queued, a prefill and a decode segment.
A conversations run decodes in its conversation's colour, and a turn that re-prefilled its
history is outlined. A stream's stalls are marked inside its decode bar once its
configuration is done; hovering one outlines the request whose prompt caused it. Under the
rows, a strip ticks when each request was due by its arrival schedule (a late one in a colour
of its own, and in its row a dashed line from when it was due to its bar), so one sees when
each request was due against when it ran.

Drawn with one ``BarGraphItem`` per colour whose arrays are replaced on each tick
(pyqtgraph's fast path), and one path for each colour of tick, never one item per bar.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QBrush, QColor, QFontMetricsF, QPen
from PySide6.QtWidgets import QApplication, QToolTip, QWidget

from workbench.engine.base.states import RequestState, RunStatus
from workbench.ui.run_model import RequestView, RunModel
from workbench.ui.theme.qt_theme import series_color, state_color
from workbench.ui.views.gantt_rows import (
    DUE,
    GHOST,
    SEGMENTS,
    STALL_HEIGHT,
    STEADY_OPACITY,
    Bars,
    arrival_ticks,
    conversation_colour,
    conversation_palette,
    ghost_bars,
    lane_rows,
    late_span,
    lost_span,
    request_tooltip,
    segments,
    stall_at,
    stall_bars,
    steady_spans,
)
from workbench.ui.views.legend import ConversationLegend, StateLegend
from workbench.ui.widgets import plain_text
from workbench.ui.widgets.live_plot import EmptyNote, cache_axes
from workbench.ui.widgets.plot_widget import Plot, count_axis

BAR_HEIGHT = 0.72
MIN_SPAN_S = 10.0  # while a run goes: the time axis grows in steps from here
FINAL_MIN_SPAN_S = 1.0  # a run that ended: fitted to its data (a 1 s import fills the chart)
FAILED_MIN_SHARE = 0.012  # of the time shown: a refused request lasts milliseconds
LOST_PEN_WIDTH = 2  # pixels: the outline of a turn that re-prefilled its history, drawn
LOST_HEIGHT = 0.96  # around its bar, not over it, so a thin bar keeps its colour
# Of the time shown, at each end: turns one after another in a slot's lane are outlined
# apart, not as one long box (never more than a fifth of the turn's own width).
LOST_INSET_SHARE = 0.003
# The prediction's bars: behind the measured ones and taller (a hatched band above and below
# each, its end an edge), hatched and outlined in a colour of their own.
GHOST_HEIGHT = 0.96
GHOST_HATCH = 0.6
GHOST_EDGE = 0.9
MARK_LABEL_ROOM = 1.8  # lines of text above the first row: a configuration's name, padded
STRIP_SHARE = 0.05  # the arrival ticks' strip under the rows, of the rows' height
TICK_WIDTH = 2  # pixels: an arrival tick
TITLES = {  # by lanes: rows per request, or lanes per server slot
    False: "Queue Gantt: waiting, prefill, decode per request",
    True: "Slots: prefill and decode per server slot",
}


def request_ticks(rows: int, most: int = 12) -> list[tuple[int, str]]:
    """Rows labelled with their requests' numbers (a row's is ``row + 1``, the number its
    stream pane and ``requests.csv`` give it): the first, then a round step that keeps them
    to about ``most``."""
    step = next((s for s in (1, 2, 5, 10, 20, 50, 100, 200, 500) if rows / s <= most), 1000)
    while rows / step > most:
        step *= 10
    numbers = dict.fromkeys([1, *range(step, rows + 1, step)]) if rows else {}
    return [(n - 1, str(n)) for n in numbers]


def label_band(rows: float, height_px: float, line_px: float) -> float:
    """Rows of room above the first row for the configurations' names (``np=1``), so they
    sit over the bars, not on the first one: ``MARK_LABEL_ROOM`` lines of text in pixels,
    whatever the plot's height (a share of the rows alone put the name on request 1's bar
    in a short Gantt at 1366x768). ``rows``: the rest of the range, in rows."""
    least = max(0.9, rows * 0.09)
    room = MARK_LABEL_ROOM * line_px
    if height_px <= 2 * room:  # not laid out yet, or tiny: half the plot at most
        return max(least, rows) if height_px > 0 else least
    return max(least, room * rows / (height_px - room))


def bar_item(brush: QBrush | QColor, pen: QPen | None = None) -> pg.BarGraphItem:
    return pg.BarGraphItem(
        x0=[], width=[], y=[], height=BAR_HEIGHT, brush=brush, pen=pen or pg.mkPen(None)
    )


def lost_pen(colour: str = "reprefilled") -> QPen:
    pen = QPen(series_color(colour))
    pen.setCosmetic(True)
    pen.setWidth(LOST_PEN_WIDTH)
    return pen


def stall_pen() -> QPen:
    """A stall's outline, one pixel at any zoom, in the decode colour: stalls one token
    apart (a small -b's chunks) read as many freezes, not one bar."""
    pen = QPen(state_color(RequestState.DECODING))
    pen.setCosmetic(True)
    pen.setWidth(1)
    return pen


def tick_item(color: QColor, style: Qt.PenStyle = Qt.PenStyle.SolidLine) -> pg.PlotCurveItem:
    """One path of line segments (point pairs), as wide at any zoom."""
    pen = QPen(color)
    pen.setCosmetic(True)
    pen.setWidth(TICK_WIDTH if style is Qt.PenStyle.SolidLine else 1)
    pen.setStyle(style)
    return pg.PlotCurveItem(x=[], y=[], pen=pen, connect="pairs")


def set_ticks(item: pg.PlotCurveItem, times: list[float], top: float, bottom: float) -> None:
    item.setData(x=np.repeat(times, 2), y=np.tile([top, bottom], len(times)), connect="pairs")


def strip_height(rows: int) -> float:
    """The arrival strip's height in rows: a few pixels tall whatever the row count."""
    return max(0.5, rows * STRIP_SHARE)


def set_bars(
    item: pg.BarGraphItem,
    x0s: list[float],
    widths: list[float],
    ys: list[int],
    height: float = BAR_HEIGHT,
) -> None:
    item.setOpts(x0=np.array(x0s), width=np.array(widths), y=np.array(ys), height=height)


Spans = Bars


def ghost_item() -> pg.BarGraphItem:
    """The prediction's bars: hatched and outlined in the theme's ghost colour, behind the
    measured bars (and in front of the steady state's shade)."""
    hatch, edge = series_color("ghost"), series_color("ghost")
    hatch.setAlphaF(GHOST_HATCH)
    edge.setAlphaF(GHOST_EDGE)
    pen = QPen(edge)
    pen.setCosmetic(True)
    item = bar_item(QBrush(hatch, Qt.BrushStyle.BDiagPattern), pen)
    item.setZValue(-5)
    return item


class GanttView(Plot):
    def __init__(
        self,
        parent: QWidget | None = None,
        legend: ConversationLegend | None = None,
        states: StateLegend | None = None,
    ) -> None:
        """``legend`` and ``states``: the window's legends of conversations and of states,
        kept in step with what the Gantt draws."""
        super().__init__(parent)
        self.setObjectName("gantt")
        plot = self.getPlotItem()
        plot.setTitle(TITLES[False])
        plot.setLabel("bottom", "time since start", units="s")
        plot.setLabel("left", "request")
        count_axis(plot)
        plot.invertY(True)
        plot.showGrid(x=True, y=False, alpha=0.2)
        plot.setMouseEnabled(x=True, y=False)
        plot.disableAutoRange()
        plot.setXRange(0, MIN_SPAN_S, padding=0)
        cache_axes(plot)
        self._x_max = MIN_SPAN_S
        self._now = 0.0
        self._rows_shown: tuple[int, bool] | None = None  # rows, and the arrival strip
        self._row_count = 0
        self._ticked = False
        self._row_of: dict[int, int] = {}
        self.lanes = False
        self.bars: dict[RequestState, pg.BarGraphItem] = {}
        for name in SEGMENTS:
            self.bars[name] = bar_item(state_color(name))
            plot.addItem(self.bars[name])
        # A conversations run's decoding, one item per palette colour, and its lost turns'
        # outlines over the bars (hollow: the conversation's colour still shows).
        self.conversation_bars = [bar_item(QColor(c)) for c in conversation_palette()]
        self.lost = bar_item(QBrush(Qt.BrushStyle.NoBrush), lost_pen())
        # Each stall inside its decode bar, and on hover the request whose prompt caused it
        # outlined as a lost turn is, in the stall's colour.
        self.stalls = bar_item(series_color("stall"), stall_pen())
        self.cause = bar_item(QBrush(Qt.BrushStyle.NoBrush), lost_pen("stall"))
        self.outlined: int | None = None  # the number of the request outlined as a cause
        for item in [*self.conversation_bars, self.lost, self.stalls, self.cause]:
            plot.addItem(item)
        self.ghosts = ghost_item()
        plot.addItem(self.ghosts)
        # Its legend entry in the plot's corner, where no row's bars are (the band above the
        # first row): the legend row over the Gantt has no room left at 1600 px.
        self.ghost_legend = plot.addLegend(offset=(-10, 2), labelTextSize="9pt")
        self.ghost_legend.addItem(self.ghosts, GHOST)
        self.ghost_legend.hide()
        self.arrivals = tick_item(series_color("arrival"))
        self.late_arrivals = tick_item(series_color("arrival_late"))
        # In rows per request, a late request's wait from when it was due to its bar.
        self.waits = tick_item(series_color("arrival_late"), Qt.PenStyle.DashLine)
        for item in (self.arrivals, self.late_arrivals, self.waits):
            plot.addItem(item)
        self._ticks: tuple[list[float], list[float], int] = ([], [], 0)  # as drawn, and rows
        self.legend = legend
        self.states = states
        self._marks: list[pg.InfiniteLine] = []
        self.steady: list[pg.LinearRegionItem] = []  # each repeat's steady state, shaded
        self._views: list[RequestView] = []
        self.note = EmptyNote(self, "each request as it is sent: waiting, prefill, decoding")
        self.scene().sigMouseMoved.connect(self._hover)
        plot.vb.sigResized.connect(self._refit_rows)
        self._fit_rows()

    def set_lanes(self, on: bool) -> None:
        """Rows per request (default), or lanes per server slot: each slot's prefill and
        decode spans in one row, so batching shows as parallel lanes."""
        self.lanes = on
        self._rows_shown = None  # re-fit the y axis
        self.getPlotItem().getAxis("left").setTicks(None)
        self.getPlotItem().setLabel("left", "slot" if on else "request")
        self.getPlotItem().setTitle(TITLES[on])

    def sync(self, model: RunModel, now: float) -> None:
        self._now = now
        self._views = model.ordered()
        self.note.show_empty(not self._views)
        rows = lane_rows(model, ghosts=True) if self.lanes else None
        spans: dict[RequestState, Spans] = {name: ([], [], []) for name in SEGMENTS}
        talks: list[Spans] = [([], [], []) for _ in self.conversation_bars]
        lost: Spans = ([], [], [])
        waits: tuple[list[float], list[float]] = ([], [])  # point pairs: x, y
        self._row_of = {}
        starts = [v.t_submit for v in self._views if v.t_submit is not None]
        ended = model.status is not None and model.status is not RunStatus.RUNNING
        shown = max(now - min(starts, default=now), FINAL_MIN_SPAN_S if ended else MIN_SPAN_S)
        for view in self._views:
            row = rows[0][(view.config_index, view.slot)] if rows else view.row
            self._row_of[id(view)] = row
            colour = conversation_colour(model, view)
            for name, x0, x1 in segments(view, now):
                if rows and name is RequestState.QUEUED:
                    continue  # a slot's lane shows what the slot did
                talking = colour is not None and name is RequestState.DECODING
                x0s, widths, ys = talks[colour] if talking else spans[name]
                x0s.append(x0)
                least = FAILED_MIN_SHARE * shown if name.cut else 0.0
                widths.append(max(x1 - x0, least))
                ys.append(row)
            if (marked := lost_span(view, now)) is not None:
                inset = min(LOST_INSET_SHARE * shown, (marked[1] - marked[0]) / 5)
                lost[0].append(marked[0] + inset)
                lost[1].append(marked[1] - marked[0] - 2 * inset)
                lost[2].append(row)
            if not rows and (wait := late_span(view)) is not None:
                waits[0].extend(wait)
                waits[1].extend((row, row))
        for name, drawn in spans.items():
            set_bars(self.bars[name], *drawn)
        for item, drawn in zip(self.conversation_bars, talks, strict=True):
            set_bars(item, *drawn)
        set_bars(self.lost, *lost, height=LOST_HEIGHT)
        set_bars(self.stalls, *stall_bars(self._views, self._row_of), height=STALL_HEIGHT)
        self.outlined = None  # the rows may have moved: the next hover outlines again
        set_bars(self.cause, [], [], [])
        ghosts = ghost_bars(model, rows[0] if rows else None)
        set_bars(self.ghosts, *ghosts, height=GHOST_HEIGHT)
        self.waits.setData(x=np.array(waits[0]), y=np.array(waits[1]), connect="pairs")
        if self.legend is not None:
            self.legend.show_users(model)
        self._row_count = len(rows[1]) if rows else len(self._views)
        self._sync_ticks(arrival_ticks(self._views))
        if rows and (self._row_count, self._ticked) != self._rows_shown:
            lanes = [(float(i), name) for i, name in enumerate(rows[1])]
            self.getPlotItem().getAxis("left").setTicks([self._with_strip(lanes)])
        if self.states is not None:
            cancelled = any(v.state is RequestState.CANCELLED for v in self._views)
            stalled = any(v.stalls for v in self._views)
            self.states.show_run(
                bool(model.users), self._ticked, bool(self._ticks[1]), cancelled, stalled
            )
        self.ghost_legend.setVisible(bool(ghosts[0]))
        self._sync_marks(model)
        self._sync_steady(steady_spans(model))
        # The time axis reaches the prediction's last bar too: its end is what one waits for.
        self._now = max([now, *(x0 + w for x0, w in zip(ghosts[0], ghosts[1], strict=True))])
        self._sync_ranges(self._now, final=ended)

    def _sync_ranges(self, now: float, final: bool = False) -> None:
        """Grow the axes in steps, not every tick: re-laying out axis text is what costs.
        Once the run (or the session shown) has ended, the time axis fits the data."""
        plot = self.getPlotItem()
        if (self._row_count, self._ticked) != self._rows_shown:
            self._fit_rows()
        if final:  # nothing more will come: the axis ends with the data, short or long
            fitted = max(FINAL_MIN_SPAN_S, now * 1.03)
            if fitted != self._x_max:
                self._x_max = fitted
                plot.setXRange(0, self._x_max, padding=0)
        elif now > 0.92 * self._x_max or now < 0.3 * self._x_max - MIN_SPAN_S:
            self._x_max = max(MIN_SPAN_S, now * 1.5)
            plot.setXRange(0, self._x_max, padding=0)

    def _fit_rows(self) -> None:
        """The y axis for the rows (and the arrival strip) and the room above them for the
        configurations' names, which depends on the plot's height in pixels."""
        plot = self.getPlotItem()
        self._rows_shown = (self._row_count, self._ticked)
        self._refit_rows()
        if not self.lanes:  # request numbers only: none in the band above the first
            numbers = [(float(row), text) for row, text in request_ticks(self._row_count)]
            plot.getAxis("left").setTicks([self._with_strip(numbers)])

    def _refit_rows(self) -> None:
        """Resized: the names' room in rows changes with the plot's height (the rows' ticks
        stay as they are)."""
        if self._rows_shown is None:
            return
        plot = self.getPlotItem()
        rows = max(self._row_count, 1)
        strip = strip_height(rows) + 0.1 if self._ticked else 0.0
        line = QFontMetricsF(QApplication.font()).height()
        band = label_band(rows + 0.1 + strip, plot.vb.height(), line)
        wanted = (-0.5 - band, rows - 0.4 + strip)
        if any(abs(a - b) > 1e-6 for a, b in zip(plot.vb.viewRange()[1], wanted, strict=True)):
            plot.setYRange(*wanted, padding=0)

    def _sync_ticks(self, ticks: tuple[list[float], list[float]]) -> None:
        """The strip under the rows: a tick where each request was due, redrawn only when
        a request was sent or the rows moved (its paths hold every tick: no item each)."""
        rows = max(self._row_count, 1)
        if (*ticks, rows) == self._ticks:
            return
        self._ticks = (*ticks, rows)
        self._ticked = bool(ticks[0] or ticks[1])
        top = rows - 0.5 + 0.1 * strip_height(rows)
        for item, times in zip((self.arrivals, self.late_arrivals), ticks, strict=True):
            set_ticks(item, times, top, rows - 0.5 + strip_height(rows))

    def _with_strip(self, labels: list[tuple[float, str]]) -> list[tuple[float, str]]:
        """The left axis's labels, and the arrival strip's own (``DUE``) where it shows; a
        row's label too near it gives way."""
        if not self._ticked:
            return labels
        rows = max(self._row_count, 1)
        at = rows - 0.5 + 0.55 * strip_height(rows)
        kept = [(y, text) for y, text in labels if at - y > max(0.75, rows * STRIP_SHARE)]
        return [*kept, (at, DUE)]

    def tick_times(self) -> tuple[list[float], list[float]]:
        """The ticks drawn, on time and late (for tests and the export's legend)."""
        return self._ticks[0], self._ticks[1]

    def fit(self) -> None:
        """The whole run on the time axis: for a picture of a finished run (an export)."""
        self._sync_ranges(self._now, final=True)

    def bar_count(self) -> int:
        """Requests with a bar (for tests): each has exactly one span that starts at submit."""
        return len({row for row in self._rows()})

    def ghost_count(self) -> int:
        """The prediction's bars drawn (for tests)."""
        x0 = self.ghosts.opts.get("x0")
        return 0 if x0 is None else len(x0)

    def _rows(self) -> list[int]:
        rows: list[int] = []
        for item in [*self.bars.values(), *self.conversation_bars]:
            y = item.opts.get("y")
            rows.extend(int(v) for v in (y if y is not None else []))
        return rows

    def _sync_marks(self, model: RunModel) -> None:
        pen = QPen(series_color("marker"))
        pen.setCosmetic(True)
        pen.setWidth(1)
        while len(self._marks) < len(model.config_marks):
            t, label = model.config_marks[len(self._marks)]
            line = pg.InfiniteLine(
                pos=t,
                angle=90,
                pen=pen,
                label=label,
                labelOpts={
                    "position": 0.01,
                    "anchors": [(0, 0), (0, 0)],
                    "color": series_color("marker"),
                },
            )
            self.getPlotItem().addItem(line)
            self._marks.append(line)
        while len(self._marks) > len(model.config_marks):
            self.getPlotItem().removeItem(self._marks.pop())

    def _sync_steady(self, spans: list[tuple[float, float]]) -> None:
        """A shade behind the bars over each finished repeat's steady state (new ones come
        only as configurations finish, so they are added, never redrawn)."""
        plot = self.getPlotItem()
        if len(spans) < len(self.steady):  # another run or session
            for region in self.steady:
                plot.removeItem(region)
            self.steady = []
        color = series_color("steady")
        color.setAlphaF(STEADY_OPACITY)
        for start, end in spans[len(self.steady) :]:
            region = pg.LinearRegionItem(
                values=(start, end), movable=False, brush=color, pen=pg.mkPen(None)
            )
            region.setZValue(-10)  # behind the bars
            plot.addItem(region)
            self.steady.append(region)

    def _hover(self, pos: QPointF) -> None:
        plot = self.getPlotItem()
        if not self._views or not plot.sceneBoundingRect().contains(pos):
            return
        point = plot.vb.mapSceneToView(pos)
        row, t = round(point.y()), point.x()
        here = [v for v in self._views if self._row_of.get(id(v)) == row]
        if self.lanes:  # several requests share a lane: the one under the pointer
            here = [
                v
                for v in here
                if (v.t_first or v.t_submit or 0.0) <= t <= (v.t_last or v.t_done or t)
            ]
        stall = stall_at(here[0], t) if here else None
        self._outline_cause(stall.cause if stall is not None else None)
        if here:
            tip = request_tooltip(here[0])
            QToolTip.showText(
                self.mapToGlobal(self.mapFromScene(pos)),
                plain_text.tooltip(f"{stall.words()}\n\n{tip}" if stall is not None else tip),
                self,
            )

    def _outline_cause(self, number: int | None) -> None:
        """Outline the bar of request ``number`` (the cause of the stall under the pointer)
        from when it was sent to when it was done; nothing where ``number`` is None."""
        if number == self.outlined:
            return
        self.outlined = number
        cause = next((v for v in self._views if v.number == number), None)
        if cause is None or cause.t_submit is None:
            set_bars(self.cause, [], [], [])
            return
        end = cause.t_done if cause.t_done is not None else self._now
        row = self._row_of[id(cause)]
        set_bars(self.cause, [cause.t_submit], [end - cause.t_submit], [row], LOST_HEIGHT)
