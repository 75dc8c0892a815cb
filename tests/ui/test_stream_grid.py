"""The stream grid's cost and looks: whole lines in a pane, and token updates that stay
inside the grid instead of re-laying out the window."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QColor, QImage, QPalette
from PySide6.QtWidgets import QLabel, QSplitter

from tests.ui.test_run_model import S, started
from workbench.engine.base.records import CONTEXT_FULL, RequestRecord
from workbench.engine.events import FirstToken, RequestFinished, TokenChunkArrived
from workbench.ui.run_model import RunModel
from workbench.ui.stream_grid import MAX_PANES, StreamGrid, TailText, fit_parts


def rows_with_ink(widget: TailText) -> list[int]:
    image = QImage(widget.size(), QImage.Format.Format_ARGB32)
    widget.render(image)
    background = widget.palette().color(QPalette.ColorRole.Window).rgb()
    return [
        y
        for y in range(image.height())
        if any(image.pixel(x, y) != background for x in range(image.width()))
    ]


def test_a_pane_shows_the_newest_whole_lines_and_no_cut_line(qtbot):
    text = TailText()
    qtbot.addWidget(text)
    palette = text.palette()
    palette.setColor(QPalette.ColorRole.Window, QColor("#000000"))
    palette.setColor(QPalette.ColorRole.WindowText, QColor("#ffffff"))
    text.setPalette(palette)
    line = text.fontMetrics().lineSpacing()
    text.resize(200, int(2.5 * line))  # room for two and a half lines
    text.setText(" ".join(f"word{i}" for i in range(200)) + " LAST")
    ink = rows_with_ink(text)
    assert ink, "nothing drawn"
    # Two whole lines at the bottom; the half line's room above them stays empty.
    assert min(ink) >= text.height() - 2 * line
    assert max(ink) > text.height() - line  # the newest line is at the bottom


def test_short_text_sits_at_the_bottom(qtbot):
    text = TailText()
    qtbot.addWidget(text)
    line = text.fontMetrics().lineSpacing()
    text.resize(300, 5 * line)
    text.setText("hello")
    assert text.text() == "hello"
    assert min(rows_with_ink(text)) >= text.height() - line


class LayoutRequests(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:
            self.count += 1
        return False


def test_tokens_in_64_panes_do_not_re_lay_out_the_window(qtbot):
    """A pane's new text must not travel up to the splitters: re-laying out the plots
    beside the grid at 30 Hz is what made frames late with 64 streams."""
    splitter = QSplitter(Qt.Orientation.Vertical)
    grid = StreamGrid()
    splitter.addWidget(grid)
    splitter.addWidget(QLabel("the Gantt would be here"))
    qtbot.addWidget(splitter)
    splitter.resize(1200, 900)
    splitter.show()
    qtbot.waitExposed(splitter)
    model = RunModel()
    started(model, MAX_PANES)
    keys = [(0, 0, i) for i in range(MAX_PANES)]
    model.apply([FirstToken(*key, S) for key in keys])
    grid.sync(model, set(keys), True, 1.0)
    assert len(grid.panes) == MAX_PANES and all(p.isVisible() for p in grid.panes.values())
    qtbot.wait(50)  # the first layout settles

    watch = LayoutRequests()
    splitter.installEventFilter(watch)
    for tick in range(6):  # a second's worth of header numbers, text on every tick
        t = (2 + tick) * S
        model.apply([TokenChunkArrived(*key, t, f" token{tick}") for key in keys])
        grid.sync(model, set(keys), False, t / S)
        qtbot.wait(5)
    splitter.removeEventFilter(watch)
    assert watch.count == 0
    assert all("token5" in pane.body.text() for pane in grid.panes.values())


def test_whole_texts_bound_at_once_fill_the_panes(qtbot):
    """A reopened session binds every text at once, before the panes have their new size
    (they were last laid out 8 by 8): each must keep enough to fill the pane it becomes."""
    grid = StreamGrid()
    qtbot.addWidget(grid)
    grid.resize(1200, 700)
    grid.show()
    qtbot.waitExposed(grid)
    model = RunModel()
    started(model, 4)
    text = " ".join(f"word{i}" for i in range(600))
    keys = [(0, 0, i) for i in range(4)]
    model.apply([FirstToken(*key, S) for key in keys])
    model.apply([TokenChunkArrived(*key, 2 * S, text) for key in keys])
    grid.sync(model, set(keys), True, 2.0)
    qtbot.wait(50)
    for pane in grid.panes.values():
        metrics = pane.body.fontMetrics()
        per_line = pane.body.width() // metrics.averageCharWidth()
        lines = pane.body.height() // metrics.lineSpacing()
        assert lines >= 8
        shown = pane.body.text()
        assert per_line * lines <= len(shown) <= pane.capacity()
        assert shown.endswith("word599") and pane.text.endswith(shown)


def test_panes_bound_before_the_grid_first_shows_stay_shown(qtbot):
    grid = StreamGrid()
    qtbot.addWidget(grid)
    model = RunModel()
    started(model, 3)
    grid.sync(model, {(0, 0, i) for i in range(3)}, True, 0.5)
    grid.resize(900, 500)
    grid.show()
    qtbot.waitExposed(grid)
    assert len(grid.panes) == 3 and all(p.isVisible() for p in grid.panes.values())


def test_a_narrow_pane_drops_its_last_numbers_whole(qtbot):
    label = QLabel()
    metrics = label.fontMetrics()
    parts = ["TTFT 1.23s", "21 tok/s", "64 tok"]
    full = "TTFT 1.23s · 21 tok/s · 64 tok"
    assert fit_parts(parts, metrics.horizontalAdvance(full), metrics) == full
    two = "TTFT 1.23s · 21 tok/s"
    assert fit_parts(parts, metrics.horizontalAdvance(full) - 5, metrics) == two
    assert fit_parts(parts, 10, metrics) == ""  # no half numbers
    assert fit_parts([], 100, metrics) == ""


def test_a_request_that_did_not_fit_says_why_in_its_pane(qtbot):
    """Refused before its first token, a request has no text of its own: its pane shows the
    server's reason, and its state says it did not fit, for an audience to read."""
    grid = StreamGrid()
    qtbot.addWidget(grid)
    grid.resize(900, 500)
    grid.show()
    model = RunModel()
    started(model, 2)
    refused = (
        f"{CONTEXT_FULL}: request (3000 tokens) exceeds the available context size "
        "(2048 tokens), try increasing it (HTTP 400)"
    )
    records = [
        RequestRecord(0, 0, 0, "p", t_submit_ns=S, t_done_ns=2 * S, error=refused),
        RequestRecord(0, 0, 1, "p", t_submit_ns=S, t_done_ns=2 * S, error="HTTP 503: busy"),
    ]
    model.apply([RequestFinished(r) for r in records])
    grid.sync(model, {(0, 0, 0), (0, 0, 1)}, True, 2.0)
    refused_pane, busy_pane = grid.panes.values()
    assert refused_pane.state.text() == "did not fit" and busy_pane.state.text() == "failed"
    assert refused_pane.body.text().strip() == f"✖ {refused}"
    assert busy_pane.body.text().strip() == "✖ HTTP 503: busy"
