"""Metric charts, one code path for the window and for exported files (PNG, SVG, PDF), so an
exported chart is the chart the user saw."""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from pyqtgraph.exporters import SVGExporter
from PySide6.QtCore import QCoreApplication, QEvent, QMarginsF, QPointF, QRectF, QSizeF, Qt
from PySide6.QtGui import QColor, QPageSize, QPainter, QPdfWriter
from PySide6.QtWidgets import QApplication, QWidget

from workbench.engine.analysis.compare import ChartData, ChartKind, Series, chart_data_from
from workbench.engine.base.errors import OutputDirError
from workbench.engine.figures.metrics import Figure
from workbench.engine.figures.summaries import ConfigSummary
from workbench.ui.theme.qt_theme import session_colors
from workbench.ui.widgets.plot_widget import Plot

EXPORT_FORMATS = ("png", "svg", "pdf")
# Qt's PNG "quality" sets zlib's effort: at 80 a 1200x800 chart writes in about 60 % of the
# default's time (a report is written on the GUI thread) in a file about 40 % larger (~35 KB).
PNG_QUALITY = 80


# A session's lines apart from each other (its other swept settings), in its colour.
DASHES = (
    Qt.PenStyle.SolidLine,
    Qt.PenStyle.DashLine,
    Qt.PenStyle.DotLine,
    Qt.PenStyle.DashDotLine,
)


SYMBOL_SIZE = 8  # px: a point's marker
SWEEP_MARGIN = 0.08  # of the swept range, beside the first and the last point
LINE_STEP = 4.0  # px between the points a line is sampled at, under the points' names


def series_color(series: Series) -> QColor:
    colors = session_colors()
    return colors[series.session % len(colors)]


PREDICTED = "predicted"  # a predicted series' name ends so


def with_predictions(
    named: list[tuple[str, list[ConfigSummary]]],
    predicted: Sequence[list[ConfigSummary] | None],
    metrics: tuple[Figure, ...] | None = None,
    relative: bool = False,
) -> list[tuple[ChartData, set[int]]]:
    """``chart_data_from`` with each session's prediction (``predicted``, one per entry of
    ``named``; None: it has none) beside it, each chart with the series of a prediction:
    in its session's colour, named ``SESSION · predicted`` (one session's: ``predicted``),
    to be drawn dashed."""
    owners = [i for i, summaries in enumerate(predicted) if summaries]

    def name(i: int) -> str:
        return f"{named[i][0]} · {PREDICTED}" if len(named) > 1 else PREDICTED

    shown = [*named, *((name(i), predicted[i] or []) for i in owners)]
    charts = []
    for data in chart_data_from(shown, relative, metrics):
        dashed = set()
        for k, series in enumerate(data.series):
            if series.session >= len(named):
                series.session = owners[series.session - len(named)]
                dashed.add(k)
        charts.append((data, dashed))
    return charts


class MetricChart(Plot):
    """A chart of ``ChartData``: lines with markers against the swept setting, with error
    bars where repeats give a spread; a trade-off with each point named; or distributions as
    steps. Each series in its session's colour; a legend that names each series (the
    hardware, in a comparison), titles with the workload, and units on the axes. The y axis
    starts at zero, so a bar's height reads as the value."""

    def __init__(self, parent: QWidget | None = None, legend: bool = True) -> None:
        super().__init__(parent)
        self.setMinimumSize(80, 120)
        plot = self.getPlotItem()
        plot.showGrid(x=True, y=True, alpha=0.25)
        self.legend = plot.addLegend(offset=(10, 10), labelTextSize="9pt") if legend else None
        self._curves: list[pg.PlotDataItem] = []
        self._error_bars: list[pg.ErrorBarItem] = []
        self._labels: list[pg.TextItem] = []
        self._legend_at: tuple[tuple[float, float], tuple[float, float]] | None = None
        self.data: ChartData | None = None
        self.dashed: set[int] = set()  # the places of the predicted series
        # The points' names are placed in pixels: again whenever the view moves or resizes.
        plot.vb.sigTransformChanged.connect(self._place_labels)

    def show_data(self, data: ChartData, dashed: Collection[int] = ()) -> None:
        """Draw ``data``; the series at the places in ``dashed`` are predicted ones:
        dashed, hollow points, no spread."""
        self.data = data
        self.dashed = set(dashed)
        plot = self.getPlotItem()
        title = html.escape(data.title)
        if data.subtitle:
            title += f"<br><span style='font-size:9pt'>{html.escape(data.subtitle)}</span>"
        plot.setTitle(title, size="11pt")
        plot.setLabel("left", data.unit)
        plot.setLabel("bottom", data.x_label)
        while len(self._curves) < len(data.series):
            curve = plot.plot([], [], name=" ")
            bars = pg.ErrorBarItem(x=np.zeros(0), y=np.zeros(0), height=np.zeros(0))
            plot.addItem(bars)
            self._curves.append(curve)
            self._error_bars.append(bars)
        for label in self._labels:
            plot.removeItem(label)
        self._labels = []
        for i, curve in enumerate(self._curves):
            series = data.series[i] if i < len(data.series) else None
            self._draw(curve, self._error_bars[i], series, data.kind, i in self.dashed)
            if self.legend is not None:
                label = self.legend.getLabel(curve)
                if label is not None:  # a name from a session is text, not markup
                    label.setText(html.escape(series.name) if series else "")
        if self.legend is not None:  # into the corner the curves leave empty
            spot = legend_spot(data.series, view=view_range(data))
            offset = (10 if spot[0] == 0 else -10, {0: 10, 1: -10}.get(spot[1], 0))
            self.legend.anchor(spot, spot, offset=offset)
            self._legend_at = spot, offset
        x_values = sorted({x for s in data.series for x in s.x})
        if data.x_ticks is not None:
            plot.getAxis("bottom").setTicks([data.x_ticks])
        elif data.kind is ChartKind.SWEEP and x_values:
            plot.getAxis("bottom").setTicks([[(x, f"{x:g}") for x in x_values]])
        else:
            plot.getAxis("bottom").setTicks(None)
        self.fit()
        self._place_labels()  # the range may not have moved

    def _draw(
        self,
        curve: pg.PlotDataItem,
        bars: pg.ErrorBarItem,
        series: Series | None,
        kind: str,
        predicted: bool = False,
    ) -> None:
        if series is None:
            curve.setData([], [])
            bars.setData(x=np.zeros(0), y=np.zeros(0), height=np.zeros(0))
            return
        color = series_color(series)
        # Past the last colour, the colours come back dashed.
        dash = series.variant + series.session // len(session_colors())
        style = Qt.PenStyle.DashLine if predicted else DASHES[dash % len(DASHES)]
        pen = pg.mkPen(color, width=2, style=style)
        if kind == ChartKind.CDF:  # steps: the share stays until the next request's TTFT
            xs = [x for x in series.x for _ in (0, 1)]
            ys = [0.0, *[y for y in series.y for _ in (0, 1)]][:-1]
            curve.setData(xs, ys, pen=pen, symbol=None)
        else:
            curve.setData(
                series.x,
                series.y,
                pen=pen,
                symbol="o",
                symbolBrush=None if predicted else color,
                symbolPen=pg.mkPen(color),
                symbolSize=SYMBOL_SIZE,
            )
        errors = [None] * len(series.x) if predicted else series.err  # a model has no spread
        spread = [(x, y, e) for x, y, e in zip(series.x, series.y, errors, strict=False) if e]
        bars.setData(
            x=np.array([p[0] for p in spread]),
            y=np.array([p[1] for p in spread]),
            height=np.array([2 * p[2] for p in spread]),
            beam=_beam(series.x),
            pen=pg.mkPen(color, width=1.5),
        )
        for x, y, text in zip(series.x, series.y, series.labels, strict=False):
            label = pg.TextItem(text, color=color)  # where: _place_labels
            label.setPos(x, y)
            self.getPlotItem().addItem(label)
            self._labels.append(label)

    def _place_labels(self) -> None:
        """Each point's name beside it where it covers no other name, no point and not
        the legend, inside the plot (``label_places``): neighbouring configurations often
        sit a few pixels apart."""
        if not self._labels:
            return
        view = self.getPlotItem().vb
        to_scene = view.mapViewToScene
        lines = [
            [to_scene(QPointF(x, y)) for x, y in zip(*curve.getData(), strict=True)]
            for curve in self._curves
            if curve.getData()[0] is not None
        ]
        lines += [  # each error bar, from its bottom to its top
            [to_scene(QPointF(x, y - h / 2)), to_scene(QPointF(x, y + h / 2))]
            for bars in self._error_bars
            for x, y, h in zip(bars.opts["x"], bars.opts["y"], bars.opts["height"], strict=True)
        ]
        anchor_labels(view, self._labels, lines, self.legend, self._legend_at)

    def fit(self) -> None:
        """Apply ``view_range``: each axis it gives is set, the others fit the data."""
        plot = self.getPlotItem()
        x_range, y_range = view_range(self.data) if self.data else (None, None)
        if x_range is None:
            plot.enableAutoRange(axis="x")
        else:
            plot.setXRange(*x_range, padding=0)
        if y_range is None:
            plot.enableAutoRange(axis="y")
        else:
            plot.setYRange(*y_range, padding=0)

    def point_count(self) -> int:
        return sum(len(x) for x, _ in (c.getData() for c in self._curves) if x is not None)

    def error_bar_count(self) -> int:
        """Points drawn with an error bar (for tests)."""
        return sum(len(b.opts["x"]) for b in self._error_bars if b.opts.get("x") is not None)


Range = tuple[float, float]


def view_range(data: ChartData) -> tuple[Range | None, Range | None]:
    """The axes a chart sets itself (None: fit the data). The y axis runs from zero (to one,
    for distributions) to the highest point or error bar; a trade-off's axes from zero, with
    room on the right and at the top for the points' names; a sweep's x axis from its first
    setting to its last with a margin on both sides (fitted, it ran from zero: pyqtgraph
    counts an empty error-bar item as a point at the origin)."""
    points = [(x, y, e) for s in data.series for x, y, e in itertools.zip_longest(s.x, s.y, s.err)]
    tops = [y + (e or 0.0) for _, y, e in points if y is not None]
    xs = [x for x, _, _ in points if x is not None]
    x_range = None
    if data.kind == ChartKind.TRADE_OFF and xs:
        x_range = (0.0, 1.15 * max(xs) or 1.0)
    elif data.kind == ChartKind.SWEEP and xs:
        low, high = min(xs), max(xs)
        margin = SWEEP_MARGIN * (high - low) if high > low else 0.5
        x_range = (low - margin, high + margin)
    if data.kind == ChartKind.CDF:
        return x_range, (0.0, 1.02)
    if tops and min(tops) >= 0:
        headroom = 1.12 if data.kind == ChartKind.TRADE_OFF else 1.06
        return x_range, (0.0, headroom * max(tops) or 1.0)
    return x_range, None


def anchor_labels(
    view: pg.ViewBox,
    labels: list[pg.TextItem],
    lines: list[list[QPointF]],
    legend: pg.LegendItem | None,
    legend_at: tuple[tuple[float, float], tuple[float, float]] | None,
) -> None:
    """Each of a plot's labels (pyqtgraph ``TextItem``s) anchored where ``label_places`` puts
    it: off the ``lines`` (scene points) and off the legend where it shows (placed at
    ``legend_at``, as ``legend_spot`` gives it)."""
    frame = view.sceneBoundingRect()
    avoid = []
    if legend is not None and legend_at is not None and legend.isVisible():
        (ax, ay), (dx, dy) = legend_at
        size = legend.boundingRect().size()
        corner = QPointF(
            frame.left() + ax * (frame.width() - size.width()) + dx,
            frame.top() + ay * (frame.height() - size.height()) + dy,
        )
        avoid.append(QRectF(corner, size))
    points = [view.mapViewToScene(label.pos()) for label in labels]
    sizes = [label.textItem.boundingRect().size() for label in labels]
    for label, point, rect in zip(
        labels, points, label_places(points, sizes, frame, lines, avoid), strict=True
    ):
        label.setAnchor(
            ((point.x() - rect.left()) / rect.width(), (point.y() - rect.top()) / rect.height())
        )


def label_places(
    points: Sequence[QPointF],
    sizes: Sequence[QSizeF],
    frame: QRectF,
    lines: Sequence[Sequence[QPointF]] = (),
    avoid: Sequence[QRectF] = (),
) -> list[QRectF]:
    """Where each point's name goes, in pixels: of the places around its point (beside it
    at the corners and sides, then a row or two further out), the nearest that stays in
    ``frame`` and covers no name placed before it, no other point and nothing in ``avoid``
    (the legend), weighed against how much of the ``lines`` (and error bars) it hides.
    Rectangles are (left, top, right, bottom) rows of arrays here: each name weighs all its
    places at once."""
    radius = SYMBOL_SIZE / 2
    centres = np.array([(p.x(), p.y()) for p in points], dtype=float).reshape(-1, 2)
    markers = np.hstack([centres - radius, centres + radius])
    bounds = _edges([frame])
    along = _samples(lines, frame)
    placed = np.zeros((0, 4))
    for n, (point, size) in enumerate(zip(centres, sizes, strict=True)):
        taken = np.vstack([placed, _edges(avoid), np.delete(markers, n, axis=0)])
        far, spots = _around(point, size.width(), size.height(), radius)
        inside = _overlaps(spots, bounds)[:, 0]
        area = (spots[:, 2] - spots[:, 0]) * (spots[:, 3] - spots[:, 1])
        covered = _overlaps(spots, taken).sum(axis=1)
        x, y = along[:, 0], along[:, 1]
        under = (
            (x >= spots[:, :1]) & (x <= spots[:, 2:3]) & (y >= spots[:, 1:2]) & (y <= spots[:, 3:])
        ).sum(axis=1)
        # Any of a name off the frame or over something costs more than the farthest place.
        cost = far + 1000 * (area - inside + covered) + LINE_STEP * under
        placed = np.vstack([placed, spots[np.argmin(cost)]])
    return [
        QRectF(QPointF(left, top), QPointF(right, bottom)) for left, top, right, bottom in placed
    ]


def _around(point: np.ndarray, w: float, h: float, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """The places a point's name may take, and what each one's distance costs (a row
    further out as much as a name's width of line under it, in pixels): its corners (up
    right first, as a reader looks), its sides, then the same a row and two rows out."""
    x, y = point
    gap = radius / 2
    right, left, centre = x + gap, x - gap - w, x - w / 2
    up, down, middle = y - gap - h, y + gap, y - h / 2
    near = np.array(
        [
            (right, up),
            (right, down),
            (left, up),
            (left, down),
            (centre, up - radius),
            (centre, down + radius),
            (right + radius, middle),
            (left - radius, middle),
        ]
    )
    outwards = np.where(near[:, 1] > middle, 1.0, -1.0)  # the lower places down, others up
    rows = np.repeat(np.arange(3), len(near))
    corners = np.tile(near, (3, 1))
    corners[:, 1] += rows * h * np.tile(outwards, 3)
    far = rows * w + np.tile(np.arange(len(near)), 3)
    return far, np.hstack([corners, corners + np.array([w, h])])


def _edges(rects: Sequence[QRectF]) -> np.ndarray:
    return np.array([(r.left(), r.top(), r.right(), r.bottom()) for r in rects]).reshape(-1, 4)


def _overlaps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The area each rectangle of ``a`` shares with each of ``b``."""
    w = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    h = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    return np.clip(w, 0, None) * np.clip(h, 0, None)


def _samples(lines: Sequence[Sequence[QPointF]], frame: QRectF) -> np.ndarray:
    """The lines' parts inside the frame, a point every ``LINE_STEP`` pixels."""
    parts = [np.zeros((0, 2))]
    for line in lines:
        for a, b in itertools.pairwise(line):
            clipped = _clipped(a, b, frame)
            if clipped is not None:
                start, end = (np.array(p.toTuple()) for p in clipped)
                steps = max(1, math.ceil(np.linalg.norm(end - start) / LINE_STEP))
                parts.append(start + np.outer(np.linspace(0, 1, steps + 1), end - start))
    return np.vstack(parts)


def _clipped(a: QPointF, b: QPointF, frame: QRectF) -> tuple[QPointF, QPointF] | None:
    """The part of the line from ``a`` to ``b`` inside ``frame`` (Liang-Barsky): a view
    zoomed in, or not yet ranged, puts points thousands of pixels away."""
    d = b - a
    start, end = 0.0, 1.0
    for along, room in (
        (-d.x(), a.x() - frame.left()),
        (d.x(), frame.right() - a.x()),
        (-d.y(), a.y() - frame.top()),
        (d.y(), frame.bottom() - a.y()),
    ):
        if along == 0:
            if room < 0:
                return None
        elif along < 0:
            start = max(start, room / along)
        else:
            end = min(end, room / along)
    return (a + d * start, a + d * end) if start <= end else None


def _beam(xs: list[float]) -> float:
    """Error-bar caps a fifth of the closest spacing of the points, so they never touch."""
    ordered = sorted(set(xs))
    gaps = [b - a for a, b in itertools.pairwise(ordered)]
    return 0.2 * min(gaps) if gaps else 0.1


LEGEND_SPOTS = ((1, 0), (0, 0), (1, 1), (0, 1), (1, 0.5), (0, 0.5))  # corners first


def legend_spot(
    series: list[Series],
    box: tuple[float, float] = (0.45, 0.3),
    view: tuple[Range | None, Range | None] = (None, None),
) -> tuple[float, float]:
    """Where the legend goes: the corner (or side middle) of the plot, x and y from the top
    left as pyqtgraph anchors, whose legend-sized box the curves cross least (points and
    the lines between them, in the plot's range: ``view``'s axes, or the data's)."""
    points = [(x, y) for s in series for x, y in zip(s.x, s.y, strict=False)]
    if not points:
        return (1, 0)
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    (x0, x1), (y0, y1) = (
        given or (min(values), max(values)) for given, values in zip(view, (xs, ys), strict=True)
    )
    w, h = (x1 - x0) or 1.0, (y1 - y0) or 1.0
    samples = []
    for s in series:
        pairs = list(zip(s.x, s.y, strict=False))
        for (ax, ay), (bx, by) in itertools.pairwise(pairs):
            samples += [(ax + (bx - ax) * k / 8, ay + (by - ay) * k / 8) for k in range(8)]
        samples += pairs[-1:]
    unit = [((x - x0) / w, 1.0 - (y - y0) / h) for x, y in samples]  # y from the top

    def crossings(spot: tuple[float, float]) -> int:
        left, top = spot[0] * (1.0 - box[0]), spot[1] * (1.0 - box[1])
        return sum(left <= u <= left + box[0] and top <= v <= top + box[1] for u, v in unit)

    return min(LEGEND_SPOTS, key=crossings)


def discard(widget: QWidget) -> None:
    """Delete a widget that was made only to be drawn, now: ``deleteLater`` alone waits for
    an event loop, which a headless export never runs, so a report's charts (each with the
    hidden menu windows pyqtgraph gives a plot) stayed alive until the process ended."""
    widget.deleteLater()
    QCoreApplication.sendPostedEvents(widget, QEvent.Type.DeferredDelete)


def export_widget(
    widget: QWidget,
    path: Path,
    width: int = 1200,
    height: int = 800,
    dpi: int = 150,
    settle: bool = False,
) -> Path:
    """Write a chart (or any widget) at the requested size: PNG and PDF render the widget,
    SVG is vector output of the plot. A widget with a ``fit`` method sets its own ranges;
    other plots fit their data."""
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in EXPORT_FORMATS:
        raise OutputDirError(f"cannot export to .{suffix}: use one of {', '.join(EXPORT_FORMATS)}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"cannot write {path}: {exc.strerror or exc}") from None
    widget.resize(width, height)
    fit = getattr(widget, "fit", None)  # a chart that sets its own ranges (MetricChart, Gantt)
    if fit is not None:
        fit()
    elif isinstance(widget, pg.PlotWidget):
        widget.getPlotItem().enableAutoRange()
    QApplication.processEvents()  # lay the chart out at its new size before drawing it
    if settle:  # an axis widens to fit long tick labels (lane names) while it paints:
        widget.grab()  # draw once, let it lay out again, then take the picture
        QApplication.processEvents()
    if suffix == "png":
        image = widget.grab().toImage()
        image.setDotsPerMeterX(round(dpi / 0.0254))
        image.setDotsPerMeterY(round(dpi / 0.0254))
        ok = image.save(str(path), "PNG", PNG_QUALITY)
    elif suffix == "svg":
        assert isinstance(widget, pg.PlotWidget)
        exporter = SVGExporter(widget.getPlotItem())
        exporter.export(str(path))
        ok = path.is_file()
    else:
        # At the widget's own resolution, so text and geometry keep their proportions;
        # the page is the widget's size (vector content scales losslessly when printed).
        screen_dpi = widget.logicalDpiX()
        writer = QPdfWriter(str(path))
        writer.setResolution(screen_dpi)
        writer.setPageSize(
            QPageSize(
                QSizeF(width * 72 / screen_dpi, height * 72 / screen_dpi), QPageSize.Unit.Point
            )
        )
        writer.setPageMargins(QMarginsF(0, 0, 0, 0))
        painter = QPainter(writer)
        widget.render(painter)  # vector: the plot paints itself into the PDF
        ok = painter.end()
    if not ok:
        raise OutputDirError(f"could not write {path}")
    return path
