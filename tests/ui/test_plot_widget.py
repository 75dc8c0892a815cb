"""The grid's lines are opaque, in the colour the translucent ones showed, and beneath the
data: a curve along a grid line stays the curve's colour. A label is laid out again only when
its text changes."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QApplication

from workbench.ui.widgets.plot_widget import Plot, PlotAxis, seen_over


def test_a_translucent_colour_seen_over_a_background():
    seen = seen_over(QColor(255, 255, 255, 51), QColor(0, 0, 0))
    assert seen.alpha() == 255 and seen.red() == seen.green() == seen.blue() == 51
    assert seen_over(QColor(10, 20, 30), QColor(200, 200, 200)) == QColor(10, 20, 30)


def test_grid_lines_are_opaque_and_beneath_the_data(qtbot):
    widget = Plot(background="#101010")
    qtbot.addWidget(widget)
    widget.resize(400, 300)
    plot = widget.getPlotItem()
    plot.showGrid(x=True, y=True, alpha=0.25)
    plot.setXRange(0, 10, padding=0)
    plot.setYRange(0, 10, padding=0)
    plot.plot([0, 10], [5, 5], pen=pg.mkPen("#ff0000", width=1))  # along the y = 5 grid line
    widget.show()
    qtbot.waitExposed(widget)

    left = plot.getAxis("left")
    assert isinstance(left, PlotAxis) and left.zValue() < plot.vb.zValue()
    _, ticks, _ = left.generateDrawSpecs(QPainter())
    assert ticks and all(pen.color().alpha() == 255 for pen, _, _ in ticks)
    # Seen over the dark background, each is darker than the axis's own (opaque) pen.
    assert all(pen.color().lightness() < left.pen().color().lightness() for pen, _, _ in ticks)

    image = widget.grab().toImage()
    rect = plot.vb.mapRectToScene(plot.vb.boundingRect())
    on_the_line = widget.mapFromScene(plot.vb.mapViewToScene(pg.Point(5, 5)))
    assert rect.contains(widget.mapToScene(on_the_line))
    assert QColor(image.pixel(on_the_line)).name() == "#ff0000"


def test_without_a_grid_the_axis_stays_above_the_data(qtbot):
    widget = Plot()
    qtbot.addWidget(widget)
    plot = widget.getPlotItem()
    plot.showGrid(x=True, y=True, alpha=0.25)
    plot.showGrid(x=False, y=False)
    assert plot.getAxis("left").zValue() == plot.getAxis("bottom").zValue() == 0.5


def test_a_label_is_laid_out_again_only_when_its_text_changes(qtbot):
    """Each range move sets pyqtgraph's label again, on all four axes: only a new unit
    prefix reaches Qt's HTML layout."""
    widget = Plot()
    qtbot.addWidget(widget)
    plot = widget.getPlotItem()
    plot.setLabel("left", "memory", units="B")
    left = plot.getAxis("left")
    assert all(isinstance(plot.getAxis(name), PlotAxis) for name in ("top", "right"))
    plot.setYRange(0, 50e6, padding=0)
    assert "MB" in left.label.toPlainText()
    laid_out = []
    real = left.label.setHtml
    left.label.setHtml = lambda html: (laid_out.append(html), real(html))
    for top in (100e6, 200e6, 300e6):  # still MB
        plot.setYRange(0, top, padding=0)
    assert laid_out == []
    plot.setYRange(0, 3e9, padding=0)
    assert len(laid_out) == 1 and "GB" in left.label.toPlainText()


def test_a_plot_is_laid_out_as_pyqtgraphs_own(qtbot):
    """Its top and right axes are there (kept in step, cheaply) but hidden, as pyqtgraph's
    are: shown, they took 20 px from every plot."""
    ours, theirs = Plot(), pg.PlotWidget()
    for widget in (ours, theirs):
        qtbot.addWidget(widget)
        widget.getPlotItem().setLabel("bottom", "time", units="s")
        widget.resize(400, 300)
        widget.show()
    qtbot.waitExposed(ours)
    assert [ours.getPlotItem().getAxis(s).isVisible() for s in ("top", "right")] == [False] * 2
    assert ours.getPlotItem().vb.geometry() == theirs.getPlotItem().vb.geometry()


# A real right-click, offscreen: the platform cannot raise a menu nor grab the keyboard, and
# pyqtgraph's scene takes the click on release, not on press.
@pytest.mark.qt_log_ignore(
    "does not support raise", "does not support grabbing", "not accepted by receiving widget"
)
def test_the_right_click_menu_is_made_on_the_first_right_click(qtbot):
    from PySide6.QtCore import QPoint, Qt
    from PySide6.QtWidgets import QApplication, QMenu

    widget = Plot()
    qtbot.addWidget(widget)
    widget.resize(300, 200)
    widget.show()
    qtbot.waitExposed(widget)
    view = widget.getPlotItem().vb
    assert view.menu is None and view.menuEnabled()
    centre = widget.mapFromScene(view.mapToScene(view.boundingRect().center()))
    qtbot.mouseClick(widget.viewport(), Qt.MouseButton.RightButton, pos=QPoint(centre))
    menus = [w for w in QApplication.topLevelWidgets() if isinstance(w, QMenu) and w.isVisible()]
    assert len(menus) == 1 and menus[0] is view.menu
    titles = [action.text() for action in menus[0].actions()]
    assert "View All" in titles and "Plot Options" in titles  # the view's and the plot's
    menus[0].close()


def test_a_long_title_wraps_to_the_plot_instead_of_widening_it(qtbot):
    """A chart a third of the results panel wide was drawn at its title's width, twice its
    own, and cut off at the right: its curves too."""
    widget = Plot()
    qtbot.addWidget(widget)
    plot = widget.getPlotItem()
    plot.setTitle("Short", size="11pt")
    widget.resize(600, 300)
    widget.show()
    qtbot.waitExposed(widget)
    one_line = plot.titleLabel.itemRect().height()
    assert plot.layout.rowMinimumHeight(0) == 30  # pyqtgraph's own row, as before
    title = "Per-request decode speed<br><span style='font-size:9pt'>8 requests · 64 out</span>"
    plot.setTitle(title, size="11pt")
    widget.resize(175, 300)
    qtbot.waitUntil(lambda: plot.geometry().width() <= 175)
    assert plot.titleLabel.itemRect().height() > 2 * one_line  # wrapped, not cut
    assert plot.layout.rowMinimumHeight(0) >= plot.titleLabel.itemRect().height()
    view = plot.vb.mapRectToScene(plot.vb.boundingRect())
    assert view.right() <= 175 and view.height() > 100


def test_the_title_wraps_again_when_the_left_axis_widens(qtbot):
    """The Gantt's lane names ("np=2 · slot 1") widen the left axis after its title was
    wrapped to the width the rows' numbers left: the title held the plot wider than its
    widget, and the right of the plot, its legend too, was cut off."""
    widget = Plot()
    qtbot.addWidget(widget)
    plot = widget.getPlotItem()
    plot.setTitle("Slots: prefill and decode per server slot")
    plot.setYRange(0, 2, padding=0)
    widget.resize(600, 300)
    widget.show()
    qtbot.waitExposed(widget)
    narrow = plot.getAxis("left").width()
    plot.getAxis("left").setTicks([[(i, f"np=2 · slot {i}") for i in range(3)]])
    widget.grab()  # the axis measures its labels as it paints, then asks for their width
    QApplication.processEvents()
    assert plot.getAxis("left").width() > narrow + 40
    assert plot.geometry().width() <= 600
    assert plot.vb.mapRectToScene(plot.vb.boundingRect()).right() <= 600
