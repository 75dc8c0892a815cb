"""What every plot that redraws while a run goes shares."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsItem


def cache_axes(plot: pg.PlotItem) -> None:
    """Keep each axis (its tick text and grid lines) as a pixmap between range changes.

    Data updated at 10 Hz repaints the plot area, and a grid axis spans that whole area:
    without a cache Qt replays every tick label of every axis each time, the largest single
    cost of a frame in a 64-stream run. An axis whose range moves drops its cache itself."""
    for name in ("left", "bottom", "right", "top"):
        axis = plot.getAxis(name)
        axis.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)


def add_legend(plot: pg.PlotItem, offset: tuple[int, int]) -> pg.LegendItem:
    """A legend on a translucent panel of the plot's background: live curves run under it
    wherever it sits, and bare text over a curve is unreadable on a projector."""
    background = QColor(pg.getConfigOption("background"))
    background.setAlpha(200)
    return plot.addLegend(offset=offset, labelTextSize="9pt", brush=pg.mkBrush(background))
