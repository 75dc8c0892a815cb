"""Every plot of the app: a pyqtgraph ``PlotWidget`` whose axes cost little to draw and to move.

pyqtgraph draws a plot's grid as its axes' ticks stretched across the plot, in the axis
pen made translucent (``showGrid(alpha=...)``), with antialiasing off. Qt's raster engine
blends such a line pixel by pixel, off its fast paths: an axis of a full-height plot took
20-35 ms to draw, and a live plot's time axis is drawn again each time its range moves.
``PlotAxis`` draws each grid line opaque instead, in the colour the translucent line showed
over the plot's background, so it looks the same and takes the fast path (about ten times
faster); and, opaque, it goes beneath the data, so a curve running along a grid line is not
covered by it.

pyqtgraph also sets each axis's label again, as HTML that Qt parses and lays out, every time
the range moves (for its automatic unit prefix), on all four axes, the two hidden ones
included. The text rarely changes: ``PlotAxis`` sets it only when it does.

And it builds each view's right-click menu (two forms of axis controls) with the plot, a
third of a plot's cost to make; ``PlotViewBox`` builds it on the first right-click.

A pyqtgraph title is as wide as its text, and a plot is never narrower than its title: a
chart a third of the results panel wide was drawn twice its width and cut off at the right,
curves and all. ``Plot`` wraps its title to the width it has instead, again whenever its left
axis widens for longer tick labels (the Gantt's lane names): wrapped to the width the narrow
axis left, the title held the plot wider than its widget.
"""

from __future__ import annotations

import math
from typing import Any

import pyqtgraph as pg
from pyqtgraph.graphicsItems.ViewBox.ViewBoxMenu import ViewBoxMenu
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QPen, QResizeEvent, QTextOption
from PySide6.QtWidgets import QWidget

BENEATH_THE_DATA = -200.0  # pyqtgraph's ViewBox, which holds the data, sits at -100
TITLE_ROW = 30  # px: pyqtgraph's title row, which a title of more lines outgrows
TITLE_MARGIN = 8  # px between a wrapped title and the widget's right edge
MIN_TITLE_WIDTH = 40.0  # px: narrower, a title is cut rather than wrapped a word a line


def seen_over(color: QColor, background: QColor) -> QColor:
    """``color`` as it looks drawn over ``background``: an opaque colour."""
    alpha = color.alphaF()
    return QColor.fromRgbF(
        color.redF() * alpha + background.redF() * (1 - alpha),
        color.greenF() * alpha + background.greenF() * (1 - alpha),
        color.blueF() * alpha + background.blueF() * (1 - alpha),
    )


class PlotAxis(pg.AxisItem):
    """An axis whose grid is opaque and beneath the plot's data, and whose label is laid out
    again only when its text changes (see the module). A ``whole`` axis counts things
    (requests, slots): its ticks are whole numbers, never "request 0.2"."""

    _label_html: str | None = None  # what the label shows; pyqtgraph sets it in __init__
    widthChanged = Signal()  # a vertical axis's width, for its tick labels, changed
    whole = False

    def tickSpacing(self, minVal: float, maxVal: float, size: float) -> Any:
        levels = super().tickSpacing(minVal, maxVal, size)
        if not self.whole or self._tickSpacing is not None:
            return levels
        kept = [(float(round(spacing)), 0.0) for spacing, _ in levels if spacing >= 1]
        return kept or [(1.0, 0.0)]

    def setGrid(self, grid: float | bool) -> None:
        super().setGrid(grid)
        self.setZValue(BENEATH_THE_DATA if grid is not False else 0.5)

    def _updateLabel(self) -> None:
        html = self.labelString()
        if html != self._label_html:
            self.label.setHtml(html)
            self._label_html = html
        self._adjustSize()
        self.picture = None
        self.update()

    def _updateWidth(self) -> None:
        before = self.minimumWidth()
        super()._updateWidth()
        if self.minimumWidth() != before:
            self.widthChanged.emit()

    def generateDrawSpecs(self, p: Any) -> Any:
        specs = super().generateDrawSpecs(p)
        if specs is None or self.grid is False:
            return specs
        axis, ticks, texts = specs
        background = self._background()
        opaque = []
        for pen, start, end in ticks:
            pen = QPen(pen)
            pen.setColor(seen_over(pen.color(), background))
            opaque.append((pen, start, end))
        return axis, opaque, texts

    def _background(self) -> QColor:
        """What the grid is drawn over: the view's background, else the configured one."""
        scene = self.scene()
        views = scene.views() if scene is not None else []
        if views:
            return views[0].backgroundBrush().color()
        return pg.mkColor(pg.getConfigOption("background"))


def count_axis(plot: pg.PlotItem, side: str = "left") -> None:
    """The plot's ``side`` axis counts things: whole-number ticks (``PlotAxis.whole``)."""
    axis = plot.getAxis(side)
    if isinstance(axis, PlotAxis):
        axis.whole = True
        axis.picture = None
        axis.update()


class PlotViewBox(pg.ViewBox):
    """A view whose right-click menu is made when it is first asked for (see the module)."""

    def __init__(self) -> None:
        super().__init__(enableMenu=False)
        self.state["enableMenu"] = True  # offered all the same: made by getMenu

    def getMenu(self, ev: Any) -> ViewBoxMenu | None:
        if self.menu is None and self.menuEnabled():
            self.menu = ViewBoxMenu(self)
            self.updateViewLists()
        return self.menu

    def getContextMenus(self, event: Any) -> list[Any]:
        menu = self.getMenu(event)
        return menu.actions() if menu is not None else []


class PlotArea(pg.PlotItem):
    """pyqtgraph's ``PlotItem`` whose title wraps to the width its widget gives it, in a row
    as tall as its lines (pyqtgraph's is 30 px, a line and a half), see the module."""

    _title_width = -1.0  # no wrapping until the widget says how wide it is

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        title = self.titleLabel.item.document()
        title.setDefaultTextOption(QTextOption(Qt.AlignmentFlag.AlignHCenter))
        title.setDocumentMargin(0)  # a title and its subtitle fit pyqtgraph's 30 px row

    def setTitle(self, title: str | None = None, **args: Any) -> None:
        super().setTitle(title, **args)
        self._fit_title()

    def wrap_title(self, width: float) -> None:
        width = max(MIN_TITLE_WIDTH, width)
        if width != self._title_width:
            self._title_width = width
            self._fit_title()

    def _fit_title(self) -> None:
        label = self.titleLabel
        if not label.isVisible():  # no title: its row is 0 px, and it must claim no width
            label.item.setTextWidth(-1)
            return
        label.item.setTextWidth(self._title_width)
        label.updateMin()
        height = max(TITLE_ROW, math.ceil(label.itemRect().height()))
        label.setMaximumHeight(height)
        self.layout.setRowFixedHeight(0, height)
        label.resizeEvent(None)


class Plot(pg.PlotWidget):
    """A pyqtgraph ``PlotWidget`` over a ``PlotArea``, with a ``PlotAxis`` on each side (the
    top and right ones hidden, as pyqtgraph's own are: it shows every axis it is given) and a
    ``PlotViewBox``."""

    def __init__(self, parent: QWidget | None = None, background: Any = "default") -> None:
        sides = ("left", "bottom", "top", "right")
        plot = PlotArea(axisItems={s: PlotAxis(s) for s in sides}, viewBox=PlotViewBox())
        for side in ("top", "right"):
            plot.hideAxis(side)
        super().__init__(parent, background=background, plotItem=plot)
        plot.getAxis("left").widthChanged.connect(self._wrap_title)

    def resizeEvent(self, ev: QResizeEvent | None) -> None:
        self._wrap_title()
        super().resizeEvent(ev)

    def _wrap_title(self) -> None:
        """The title's lines as wide as the plot's column: the widget less its left axis
        (the width the axis asks for: the layout gives it that on its next pass)."""
        plot = self.getPlotItem()
        if plot is not None:  # None while pyqtgraph builds the widget
            left = plot.getAxis("left")
            axis = left.minimumWidth() if left.isVisible() else 0
            plot.wrap_title(self.width() - axis - TITLE_MARGIN)
