"""Metric charts, one code path for the window and for exported files (PNG, SVG, PDF), so an
exported chart is the chart the user saw."""

from __future__ import annotations

import itertools
from pathlib import Path

import pyqtgraph as pg
from pyqtgraph.exporters import SVGExporter
from PySide6.QtCore import QMarginsF, QSizeF
from PySide6.QtGui import QColor, QPageSize, QPainter, QPdfWriter
from PySide6.QtWidgets import QApplication, QWidget

from workbench.engine.analysis.compare import ChartData, Series
from workbench.engine.base.errors import OutputDirError

# Distinct, colour-blind-friendly series colours (Okabe-Ito), readable on white and dark.
SERIES_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
EXPORT_FORMATS = ("png", "svg", "pdf")


class MetricChart(pg.PlotWidget):
    """A metric against the swept setting: one line with markers per series, a legend that
    names each series (the hardware, in a comparison), titles and units on the axes."""

    def __init__(self, parent: QWidget | None = None, legend: bool = True) -> None:
        super().__init__(parent)
        self.setMinimumSize(80, 120)
        plot = self.getPlotItem()
        plot.showGrid(x=True, y=True, alpha=0.25)
        self.legend = plot.addLegend(offset=(10, 10), labelTextSize="9pt") if legend else None
        self._curves: list[pg.PlotDataItem] = []
        self.data: ChartData | None = None

    def show_data(self, data: ChartData) -> None:
        self.data = data
        plot = self.getPlotItem()
        plot.setTitle(data.title, size="11pt")
        plot.setLabel("left", data.unit)
        plot.setLabel("bottom", data.x_label)
        while len(self._curves) < len(data.series):
            color = QColor(SERIES_COLORS[len(self._curves) % len(SERIES_COLORS)])
            curve = plot.plot(
                [],
                [],
                pen=pg.mkPen(color, width=2),
                symbol="o",
                symbolBrush=color,
                symbolPen=pg.mkPen(color),
                symbolSize=8,
                name=" ",
            )
            self._curves.append(curve)
        for i, curve in enumerate(self._curves):
            series = data.series[i] if i < len(data.series) else None
            curve.setData(series.x if series else [], series.y if series else [])
            if self.legend is not None:
                label = self.legend.getLabel(curve)
                if label is not None:
                    label.setText(series.name if series else "")
        if self.legend is not None:  # into the corner the curves leave empty
            spot = legend_spot(data.series)
            offset = (10 if spot[0] == 0 else -10, {0: 10, 1: -10}.get(spot[1], 0))
            self.legend.anchor(spot, spot, offset=offset)
        x_values = sorted({x for s in data.series for x in s.x})
        if data.x_ticks is not None:
            plot.getAxis("bottom").setTicks([data.x_ticks])
        elif x_values:
            plot.getAxis("bottom").setTicks([[(x, f"{x:g}") for x in x_values]])
        plot.enableAutoRange()

    def point_count(self) -> int:
        return sum(len(x) for x, _ in (c.getData() for c in self._curves) if x is not None)


LEGEND_SPOTS = ((1, 0), (0, 0), (1, 1), (0, 1), (1, 0.5), (0, 0.5))  # corners first


def legend_spot(
    series: list[Series], box: tuple[float, float] = (0.45, 0.3)
) -> tuple[float, float]:
    """Where the legend goes: the corner (or side middle) of the plot, x and y from the top
    left as pyqtgraph anchors, whose legend-sized box the curves cross least (points and
    the lines between them, in the data's own range)."""
    points = [(x, y) for s in series for x, y in zip(s.x, s.y, strict=False)]
    if not points:
        return (1, 0)
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, y0 = min(xs), min(ys)
    w, h = (max(xs) - x0) or 1.0, (max(ys) - y0) or 1.0
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


def export_widget(
    widget: QWidget, path: Path, width: int = 1200, height: int = 800, dpi: int = 150
) -> Path:
    """Write a chart (or any widget) at the requested size: PNG and PDF render the widget,
    SVG is vector output of the plot."""
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in EXPORT_FORMATS:
        raise OutputDirError(f"cannot export to .{suffix}: use one of {', '.join(EXPORT_FORMATS)}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"cannot write {path}: {exc.strerror or exc}") from None
    widget.resize(width, height)
    if isinstance(widget, pg.PlotWidget):
        widget.getPlotItem().enableAutoRange()
    QApplication.processEvents()  # lay the chart out at its new size before drawing it
    if suffix == "png":
        image = widget.grab().toImage()
        image.setDotsPerMeterX(round(dpi / 0.0254))
        image.setDotsPerMeterY(round(dpi / 0.0254))
        ok = image.save(str(path))
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
