"""A tune's trade-off: each tried configuration's aggregate throughput against its TTFT p90,
the TTFT SLO's region shaded and the Pareto front drawn, measured points filled and predicted
ones hollow (a prediction is never drawn as a measurement). One code path for the window's
Tune tab and the PNG ``workbench tune`` writes (``ui/exports/pareto.py``)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QBrush, QColor, QResizeEvent
from PySide6.QtWidgets import QWidget

from workbench.engine.analysis.compare import Series
from workbench.engine.tune.records import Recommendation, SloTarget, TriedConfig
from workbench.ui.theme.qt_theme import session_colors, signal_color
from workbench.ui.views.charts import anchor_labels, legend_spot
from workbench.ui.widgets.plot_widget import Plot

X_KEY, Y_KEY = "ttft_p90_s", "agg_tok_s"  # the catalogue's figures the axes show
POINT_SIZE = 11  # px
WINNER_SIZE = 24  # px: the ring around the recommended configuration
MOST_NAMES = 12  # more points than this: only the front's, the measured and the winner named
REGION_ALPHA = 45  # of 255: the SLO's region shaded, the grid still seen through it
LIMIT_SHOWN_WITHIN = 3.0  # the SLO's limit in view up to this many times the slowest point
LEGEND_WIDTH = 560  # px: in a narrower chart the legend would cover the points (see KEY)
KEY = (
    "Filled: measured; hollow: predicted. Green meets every SLO, red fails one. Ringed: "
    "recommended; dashed: the Pareto front; shaded: within the TTFT p90 SLO."
)  # the legend in words, for where the chart is too narrow to show it
GROUPS = (  # (source, meets the SLO): each drawn as one item, named in the legend
    ("measured", True),
    ("measured", False),
    ("predicted", True),
    ("predicted", False),
)


@dataclass(frozen=True)
class ParetoPoint:
    """A tried configuration where the chart puts it: ``x`` its TTFT p90 in s, ``y`` its
    aggregate throughput in tok/s, both as it knows them best (``TriedConfig.figure``)."""

    config: TriedConfig
    x: float
    y: float


def pareto_points(tried: Sequence[TriedConfig]) -> tuple[list[ParetoPoint], int]:
    """The configurations that have both figures, and how many were left out for lacking
    one (a candidate that did not fit, a run that failed)."""
    points = []
    for config in tried:
        x, y = config.figure(X_KEY), config.figure(Y_KEY)
        if x is not None and y is not None:
            points.append(ParetoPoint(config, float(x), float(y)))
    return points, len(tried) - len(points)


def pareto_front(points: Sequence[ParetoPoint]) -> list[ParetoPoint]:
    """The points no other beats on both axes (as soon or sooner, as fast or faster), from
    the lowest TTFT up: the trade-off a setting can buy."""
    front: list[ParetoPoint] = []
    for point in sorted(points, key=lambda p: (p.x, -p.y)):
        if not front or point.y > front[-1].y:
            front.append(point)
    return front


def ttft_limit_s(slos: Sequence[SloTarget]) -> float | None:
    """The TTFT p90 SLO's limit in seconds, the x axis's unit (None: no such SLO)."""
    return next((s.limit_ms / 1000 for s in slos if s.name == "ttft_p90"), None)


def group_name(source: str, meets: bool) -> str:
    """What the legend calls a group. A point in the shaded region that fails an SLO fails
    one the axes do not show (TPOT, say): its colour says so where its place cannot."""
    return f"{source}, {'meets every SLO' if meets else 'fails an SLO'}"


def point_tip(config: TriedConfig) -> str:
    """A point's tooltip: its name, where its figures come from, and why it lost."""
    x, y = config.figure(X_KEY), config.figure(Y_KEY)
    lines = [
        config.label,
        f"{config.source}: TTFT p90 {x:.2f} s, {y:.1f} tok/s" if x is not None and y else "",
        config.why_lost or "",
    ]
    return "\n".join(line for line in lines if line)


class ParetoChart(Plot):
    """Aggregate tok/s against TTFT p90 for every tried configuration (``show``): filled
    where measured, hollow where predicted, green where it meets the SLO and red where it
    fails one; the TTFT p90 SLO's side shaded, the front drawn as a line, the recommended
    configuration ringed. Points missing a figure are left out and counted in the title."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumSize(200, 160)
        plot = self.getPlotItem()
        plot.showGrid(x=True, y=True, alpha=0.25)
        plot.setLabel("bottom", "TTFT p90, s")
        plot.setLabel("left", "aggregate throughput, tok/s")
        plot.setMenuEnabled(False)
        self.legend = plot.addLegend(offset=(10, 10), labelTextSize="9pt")
        region_color = QColor(signal_color("ok"))
        region_color.setAlpha(REGION_ALPHA)
        self.region = pg.LinearRegionItem(
            (0.0, 1.0), movable=False, brush=pg.mkBrush(region_color), pen=pg.mkPen(None)
        )
        self.region.setZValue(-50)  # beneath the points, above the grid
        plot.addItem(self.region)
        # The legend's swatch of the region: a bar item drawn nowhere else.
        self.region_sample = pg.BarGraphItem(
            x=[0.0], height=[0.0], width=1.0, brush=pg.mkBrush(region_color), pen=pg.mkPen(None)
        )
        self.front = pg.PlotDataItem(
            [], [], pen=pg.mkPen(signal_color("quiet"), width=1.5, style=Qt.PenStyle.DashLine)
        )
        plot.addItem(self.front)
        self.groups: dict[tuple[str, bool], pg.ScatterPlotItem] = {}
        for source, meets in GROUPS:
            color = signal_color("ok" if meets else "error")
            item = pg.ScatterPlotItem(
                size=POINT_SIZE,
                symbol="o",
                pen=pg.mkPen(color, width=2),
                brush=pg.mkBrush(color) if source == "measured" else QBrush(Qt.BrushStyle.NoBrush),
                hoverable=True,
                tip=lambda x, y, data: data,
            )
            plot.addItem(item)
            self.groups[(source, meets)] = item
        self.winner = pg.ScatterPlotItem(
            size=WINNER_SIZE,
            symbol="o",
            pen=pg.mkPen(session_colors()[1], width=2.5),
            brush=QBrush(Qt.BrushStyle.NoBrush),
        )
        plot.addItem(self.winner)
        self.points: list[ParetoPoint] = []
        self.skipped = 0
        self._labels: list[pg.TextItem] = []
        self._limit_s: float | None = None
        self._legend_at: tuple[tuple[float, float], tuple[float, float]] = ((1, 0), (-10, 10))
        plot.vb.sigTransformChanged.connect(self._place_labels)
        self.show_tried((), ())

    def resizeEvent(self, ev: QResizeEvent | None) -> None:
        legend = getattr(self, "legend", None)  # None while pyqtgraph builds the widget
        if legend is not None:
            legend.setVisible(self.width() >= LEGEND_WIDTH)
        super().resizeEvent(ev)

    def show_recommendation(self, recommendation: Recommendation) -> None:
        self.show_tried(recommendation.tried, recommendation.slos, recommendation.winner)

    def show_tried(
        self,
        tried: Sequence[TriedConfig],
        slos: Sequence[SloTarget],
        winner: TriedConfig | None = None,
    ) -> None:
        plot = self.getPlotItem()
        self.points, self.skipped = pareto_points(tried)
        self._limit_s = ttft_limit_s(slos)
        for (source, meets), item in self.groups.items():
            chosen = [
                p for p in self.points if (p.config.source, p.config.meets_slo) == (source, meets)
            ]
            item.setData(
                x=[p.x for p in chosen],
                y=[p.y for p in chosen],
                data=[point_tip(p.config) for p in chosen],
            )
        front = pareto_front(self.points)
        self.front.setData([p.x for p in front], [p.y for p in front])
        ringed = [p for p in self.points if winner is not None and p.config.label == winner.label]
        self.winner.setData(x=[p.x for p in ringed], y=[p.y for p in ringed])
        self.region.setVisible(self._limit_s is not None)
        if self._limit_s is not None:
            self.region.setRegion((0.0, self._limit_s))
        self._fill_legend(bool(front), bool(ringed))
        title = "Throughput against TTFT p90, each configuration tried"
        said = ", ".join(s.describe() for s in slos)
        if self.skipped:
            said += f"{'; ' if said else ''}{self.skipped} not drawn (no TTFT p90 or tok/s)"
        if said:
            title += f"<br><span style='font-size:9pt'>{html.escape(said)}</span>"
        plot.setTitle(title, size="11pt")
        self._name_points(front, winner)
        self.fit()
        self._place_labels()

    def _fill_legend(self, front: bool, ringed: bool) -> None:
        self.legend.clear()
        for key, item in self.groups.items():
            if any((p.config.source, p.config.meets_slo) == key for p in self.points):
                self.legend.addItem(item, group_name(*key))
        if ringed:
            self.legend.addItem(self.winner, "recommended")
        if front:
            self.legend.addItem(self.front, "Pareto front")
        if self._limit_s is not None:
            said = f"TTFT p90 <= {self._limit_s * 1000:g} ms: the SLO's side"
            self.legend.addItem(
                self.region_sample, html.escape(said, quote=False)
            )  # a legend reads HTML
        series = [Series("", [p.x], [p.y]) for p in self.points]
        spot = legend_spot(series, box=(0.4, 0.45), view=self._view_range())
        offset = (10 if spot[0] == 0 else -10, {0: 10, 1: -10}.get(spot[1], 0))
        self.legend.anchor(spot, spot, offset=offset)
        self._legend_at = spot, offset

    def _name_points(self, front: Sequence[ParetoPoint], winner: TriedConfig | None) -> None:
        """Each point's name beside it; past ``MOST_NAMES`` points only the front's, the
        measured ones' and the winner's (the rest have their name as a tooltip)."""
        plot = self.getPlotItem()
        for label in self._labels:
            plot.removeItem(label)
        named = self.points
        if len(named) > MOST_NAMES:
            keep = {id(p) for p in front}
            named = [
                p
                for p in named
                if id(p) in keep
                or p.config.source == "measured"
                or (winner is not None and p.config.label == winner.label)
            ]
        self._labels = []
        for point in named:
            label = pg.TextItem(point.config.label, color=pg.getConfigOption("foreground"))
            label.setPos(point.x, point.y)
            plot.addItem(label)
            self._labels.append(label)

    def _view_range(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """From zero, with room on the right and at the top for the names; the SLO's limit
        in view where it is near the points (a limit far beyond them all, 30 s against
        0.4 s, pressed them against the axis: the whole view is inside it then)."""
        xs = [p.x for p in self.points]
        limit = self._limit_s
        if limit is not None and (not xs or limit <= LIMIT_SHOWN_WITHIN * max(xs)):
            xs.append(limit)
        ys = [p.y for p in self.points]
        return (0.0, 1.2 * max(xs, default=0.0) or 1.0), (0.0, 1.15 * max(ys, default=0.0) or 1.0)

    def fit(self) -> None:
        (x0, x1), (y0, y1) = self._view_range()
        plot = self.getPlotItem()
        plot.setXRange(x0, x1, padding=0)
        plot.setYRange(y0, y1, padding=0)

    def _place_labels(self) -> None:
        """The names where they cover no other name, point or the legend (``label_places``)."""
        if not self._labels:
            return
        view = self.getPlotItem().vb
        front = [
            view.mapViewToScene(QPointF(x, y)) for x, y in zip(*self.front.getData(), strict=True)
        ]
        anchor_labels(view, self._labels, [front], self.legend, self._legend_at)

    def drawn(self, source: str) -> int:
        """How many points are drawn with figures from ``source`` (for tests)."""
        return sum(len(item.data) for (kind, _), item in self.groups.items() if kind == source)
