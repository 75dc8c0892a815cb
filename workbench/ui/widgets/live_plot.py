"""What every plot that redraws while a run goes shares."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsItem, QLabel, QWidget


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


NOTE_MARGINS = (64, 24, -12, -24)  # clear of the left axis's numbers


class _Centred(QObject):
    """Keeps a note over the middle of the plot it belongs to as the plot resizes."""

    def __init__(self, note: QLabel) -> None:
        super().__init__(note)
        self.note = note

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize and isinstance(watched, QWidget):
            self.note.setGeometry(watched.rect().adjusted(*NOTE_MARGINS))
        return False


class EmptyNote(QLabel):
    """A note over an empty plot saying what will appear there: before a run, a plot's 0-1
    axes and its legend say nothing. While it shows, the legend and the left axis's numbers
    are hidden (an empty memory plot read "0.2 MiB"); ``show_empty`` switches, only when
    the state changes."""

    def __init__(self, widget: pg.PlotWidget, text: str) -> None:
        super().__init__(text, widget)
        self.plot = widget.getPlotItem()
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setWordWrap(True)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        widget.installEventFilter(_Centred(self))
        self.setGeometry(widget.rect().adjusted(*NOTE_MARGINS))
        self._empty: bool | None = None
        self.show_empty(True)

    def show_empty(self, empty: bool) -> None:
        if empty == self._empty:
            return
        self._empty = empty
        self.setVisible(empty)
        self.plot.getAxis("left").setStyle(showValues=not empty)
        if self.plot.legend is not None:
            self.plot.legend.setVisible(not empty)
