"""What a person sees in the window at 1920x1080, at 1366x768 and presenting: two series
told apart, a line not hidden under another nor on the plot's frame, every tab and header
whole, no "request 0.2" on an empty axis, names clear of the bars, a banner that agrees with
the top bar, the folders of sessions one keeps, and a projector's legend and check box."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyqtgraph as pg
import pytest
from PySide6.QtCore import QPointF
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QStyle,
    QStyleOptionButton,
    QWidget,
)

from tests.ui.driving import run
from tests.ui.test_demo_session import DEMO
from workbench.engine.analysis.roofline import RooflineReport, RooflineRow
from workbench.engine.config.preferences import load_preferences
from workbench.ui.controllers.library_controller import LibraryController
from workbench.ui.run_model import RunModel
from workbench.ui.theme.palette import DEFAULT_FONT_PT
from workbench.ui.theme.qt_theme import apply_theme
from workbench.ui.views.gantt import BAR_HEIGHT, MARK_LABEL_ROOM, label_band
from workbench.ui.views.roofline_view import RooflineView
from workbench.ui.views.server_plots import ServerPlots

SIZES = [(1920, 1080), (1366, 768)]


def test_the_rooflines_bound_and_measurement_differ_in_colour_and_points(qtbot) -> None:
    view = RooflineView()
    qtbot.addWidget(view)
    view.show()
    row = RooflineRow("np=1", 1, 1, 100.0, 1.0, 250.0, 70.0)
    view.show_report(RooflineReport([row], 25e9, "given", None))
    bound, measured = view.chart._curves[:2]
    assert bound.opts["pen"].color() != measured.opts["pen"].color()
    assert bound.opts["symbolBrush"] is None and measured.opts["symbolBrush"] is not None


def test_running_shows_over_busy_slots_and_no_line_lies_on_the_frame(qtbot) -> None:
    plots = ServerPlots()
    qtbot.addWidget(plots)
    model = RunModel()
    model.running = ([0.0, 1.0], [1.0, 1.0])
    model.busy_slots = ([0.0, 1.0], [1.0, 1.0])
    plots.sync(model)
    model.running = ([0.0, 1.0, 2.0], [1.0, 1.0, 2.0])
    model.busy_slots = ([0.0, 1.0, 2.0], [1.0, 1.0, 2.0])
    plots.sync(model)
    # Equal counts: the busy slots a shaded area beneath, the running line over it.
    assert plots.running.zValue() > plots.busy.zValue()
    assert plots.busy.opts["fillLevel"] == 0 and plots.busy.opts["fillBrush"] is not None
    top = plots.queue.getPlotItem().vb.viewRange()[1][1]
    assert top >= 2.0 * 1.1  # the plateau at 2 below the frame, not on it
    # Its legend entry a square of the shade (a filled curve's own sample is a triangle).
    (swatch,) = [
        s.item for s, label in plots.queue.getPlotItem().legend.items if label.text == "busy slots"
    ]
    assert isinstance(swatch, pg.BarGraphItem)


def shown_tick_values(axis) -> list[float]:
    """The numbers an axis writes: none with its values hidden; its fixed ticks, or those
    it chooses for its range."""
    if not axis.style["showValues"]:
        return []
    if axis._tickLevels is not None:
        return [value for level in axis._tickLevels for value, _ in level]
    low, high = axis.range
    return [v for _, values in axis.tickValues(low, high, axis.height()) for v in values]


def test_empty_axes_write_no_fractions(window) -> None:
    QApplication.processEvents()
    for plot in (window.gantt, window.plots.memory, window.plots.queue, window.plots.slots):
        values = shown_tick_values(plot.getPlotItem().getAxis("left"))
        assert all(float(v).is_integer() for v in values), (plot.objectName(), values)


def test_count_axes_write_whole_numbers_with_data(qtbot) -> None:
    plots = ServerPlots()
    qtbot.addWidget(plots)
    plots.resize(400, 600)
    plots.show()
    model = RunModel()
    model.running = ([0.0, 1.0], [1.0, 1.0])
    plots.sync(model)
    QApplication.processEvents()
    values = shown_tick_values(plots.queue.getPlotItem().getAxis("left"))
    assert values and all(float(v).is_integer() for v in values)


@pytest.mark.parametrize("size", SIZES)
def test_every_tab_shows_whole(window, size) -> None:
    window.resize(*size)
    QApplication.processEvents()
    bar = window.left.bar  # six tabs: their names wrap onto another row
    assert [b.text() for b in window.left.buttons] == [
        "Experiment",
        "Server",
        "Capacity",
        "SLO",
        "Tune",
        "Sessions",
    ]
    for button in window.left.buttons:
        assert button.isVisible() and bar.rect().contains(button.geometry()), button.text()
        assert button.width() >= button.sizeHint().width()
    tabs = window.results.tabs
    assert not tabs.usesScrollButtons()
    assert tabs.tabBar().tabRect(tabs.count() - 1).right() < tabs.tabBar().width()


def test_a_tab_is_chosen_by_its_name_or_from_the_code(window) -> None:
    window.left.buttons[5].click()
    assert window.left.currentWidget() is window.library
    window.left.setCurrentWidget(window.capacity)
    assert window.left.buttons[2].isChecked() and not window.left.buttons[5].isChecked()


def test_the_capacity_headers_show_whole(window) -> None:
    window.resize(1366, 768)
    window.left.setCurrentWidget(window.capacity)
    QApplication.processEvents()
    header = window.capacity.table.horizontalHeader()
    for column in range(header.count()):
        assert header.sectionSize(column) >= header.sectionSizeHint(column), column


def test_the_top_bar_says_a_replay_whole_at_1366(window, loop) -> None:
    window.resize(1366, 768)
    assert loop.run_until_complete(window.replay.open(DEMO))
    window.replay.seek(23.0)
    QApplication.processEvents()
    assert window.status.text().startswith("replaying np=4")
    assert QLabel.text(window.status) == window.status.text()  # shown whole, not "confi..."


def test_a_configurations_name_sits_above_the_first_bar_at_1366(window, loop) -> None:
    window.resize(1366, 768)
    assert loop.run_until_complete(window.replay.open(DEMO))
    QApplication.processEvents()
    gantt = window.gantt
    view = gantt.getPlotItem().vb
    first = gantt._marks[0]
    name = first.label.sceneBoundingRect()
    bar_top = view.mapViewToScene(QPointF(first.value(), -BAR_HEIGHT / 2)).y()
    assert name.bottom() <= bar_top


def test_the_names_room_is_in_pixels_whatever_the_plots_height() -> None:
    line = 17.0
    for height in (200.0, 400.0, 800.0):
        rows = 24.1
        band = label_band(rows, height, line)
        row_px = height / (rows + band)
        assert band * row_px >= MARK_LABEL_ROOM * line - 1e-6
    assert label_band(24.1, 0.0, line) == pytest.approx(max(0.9, 24.1 * 0.09))


def test_the_banner_agrees_with_the_top_bar_while_replaying(window, loop) -> None:
    assert loop.run_until_complete(window.replay.open(DEMO))
    assert "press Replay" in window.banner.text()
    finished: list[str] = []
    window.replay_finished.connect(finished.append)
    window.replay_bar.set_speed(10)
    window.replay.seek(window.replay.playback.duration_s - 0.5)
    window.replay.play()
    assert "press Replay" not in window.banner.text()
    assert window.banner.text().startswith("Session slots-1-2-4.session.sqlite (complete)")
    run(loop, lambda: finished, 30)
    assert "press Replay" in window.banner.text()  # ended: it may be played again


def test_a_folder_of_sessions_is_added_listed_and_remembered(window, loop, tmp_path) -> None:
    kept = tmp_path / "kept elsewhere"
    kept.mkdir()
    shutil.copy(DEMO, kept / DEMO.name)
    window.left.setCurrentWidget(window.library)
    assert window.library.buttons["Add folder…"].isEnabled()
    window.library.folder_added.emit(kept)
    run(loop, lambda: any(i.path.parent == kept for i in window.library.infos), 30)
    assert str(kept) in window.library.where.text()
    assert load_preferences()[0].session_folders == (str(kept),)
    again = LibraryController(tmp_path / "out", window.tasks)
    assert kept in again.folders  # listed at the next start
    window.library.folder_forgotten.emit(kept)
    run(loop, lambda: not any(i.path.parent == kept for i in window.library.infos), 30)
    assert load_preferences()[0].session_folders == ()


def test_a_file_is_no_folder_to_add(window, loop, tmp_path) -> None:
    said: list[str] = []
    window.sessions.failed.connect(said.append)
    window.library.folder_added.emit(Path(DEMO))
    assert said and "is not a folder" in said[0]
    assert load_preferences()[0].session_folders == ()


def test_presenting_scales_the_gantts_predicted_legend_and_back(window) -> None:
    legend = window.gantt.ghost_legend
    ((_, label),) = legend.items
    before = (label.opts["size"], legend.boundingRect().height())
    window.presentation.set_on(True)
    try:
        size = float(label.opts["size"].removesuffix("pt"))
        scale = window.presentation.font_pt / DEFAULT_FONT_PT  # the titles' scale
        assert size == pytest.approx(float(before[0].removesuffix("pt")) * scale, abs=0.1)
        assert legend.boundingRect().height() > before[1]
    finally:
        window.presentation.set_on(False)
    assert (label.opts["size"], legend.boundingRect().height()) == before


def indicator_contrast(theme: str) -> int:
    """How far the lightest or darkest pixel of an unticked check box's square lies from
    the window's colour under ``theme``, as a child widget draws it."""
    app = QApplication.instance()
    apply_theme(app, theme)
    holder = QWidget()
    layout = QHBoxLayout(holder)
    box = QCheckBox("Gantt lanes by slot")
    layout.addWidget(box)
    holder.show()
    QApplication.processEvents()
    image = holder.grab().toImage()
    holder.close()
    background = QColor(image.pixel(0, 0)).lightness()
    option = QStyleOptionButton()
    box.initStyleOption(option)
    square = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, option, box)
    square.translate(box.geometry().topLeft())
    return max(
        abs(QColor(image.pixel(x, y)).lightness() - background)
        for x in range(square.left(), square.right() + 1)
        for y in range(square.top(), square.bottom() + 1)
    )


@pytest.mark.parametrize("theme", ["projector", "dark"])
def test_a_check_box_shows_on_a_black_projector(qapp, theme) -> None:
    try:
        assert indicator_contrast(theme) >= 60
    finally:
        apply_theme(qapp, "dark")


def test_a_replay_paused_mid_way_shows_each_panes_tokens(window, loop) -> None:
    assert loop.run_until_complete(window.replay.open(DEMO))
    window.replay.seek(window.replay.starts[-1])  # the 4 slots' start
    window.replay_bar.set_speed(10)
    window.replay.play()
    run(loop, lambda: window.replay.playback.position_s >= window.replay.starts[-1] + 2.5, 30)
    window.replay.pause()
    decoding = [
        (key, view)
        for key, view in window.model.requests.items()
        if key in window.grid.panes and view.state.label == "decode"
    ]
    assert decoding
    for key, view in decoding:
        assert view.chunks > 0
        assert f"{view.chunks} tok" in window.grid.panes[key]._stat_parts, key
