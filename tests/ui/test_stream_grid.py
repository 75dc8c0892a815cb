"""The stream grid's cost and looks: whole lines in a pane, and token updates that stay
inside the grid instead of re-laying out the window."""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QColor, QImage, QPalette
from PySide6.QtWidgets import QLabel, QSplitter

from tests.ui.conftest import ensure_dark_theme
from tests.ui.test_run_model import S, started
from workbench.engine.base.records import CONTEXT_FULL, RequestRecord
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import (
    ConfigStarted,
    ExperimentStarted,
    FirstToken,
    RequestFinished,
    RequestSubmitted,
    TokenChunkArrived,
)
from workbench.ui.run_model import RunModel
from workbench.ui.theme.qt_theme import theme
from workbench.ui.views.stream_grid import (
    BIND_DRAWS,
    MAX_PANES,
    PANE_DRAWS_PER_FRAME,
    STATS_EVERY_TICKS,
    StreamGrid,
    StreamPane,
    TailText,
    fit_parts,
)


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


class Events(QObject):
    """Counts one kind of event (a layout request, a resize, a paint) where it is installed."""

    def __init__(self, kind: QEvent.Type = QEvent.Type.LayoutRequest) -> None:
        super().__init__()
        self.kind = kind
        self.count = 0

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() == self.kind:
            self.count += 1
        return False


def LayoutRequests() -> Events:
    return Events(QEvent.Type.LayoutRequest)


def shown_grid(qtbot, width: int = 1200, height: int = 700) -> StreamGrid:
    grid = StreamGrid()
    qtbot.addWidget(grid)
    grid.resize(width, height)
    grid.show()
    qtbot.waitExposed(grid)
    return grid


def test_64_panes_appear_with_one_resize_each(qtbot):
    """Qt lays a visible parent's layout out each time a child of it shows: shown one by one
    into a grid layout, 64 panes were resized about 300 times in the frame a run started."""
    grid = shown_grid(qtbot)
    resizes = Events(QEvent.Type.Resize)
    for pane in grid.findChildren(StreamPane):
        pane.installEventFilter(resizes)
    model = RunModel()
    started(model, MAX_PANES)
    grid.sync(model, {(0, 0, i) for i in range(MAX_PANES)}, True, 1.0)
    qtbot.wait(20)  # whatever layout was asked for happens
    assert len(grid.panes) == MAX_PANES and all(p.isVisible() for p in grid.panes.values())
    assert resizes.count <= MAX_PANES


def test_a_paced_frame_binds_a_share_of_64_new_panes_in_their_order(qtbot):
    """A run's first frame no longer binds and shows all 64 panes: each frame shows the next
    few, so no frame holds the window for long (it took 135 ms in one frame)."""
    grid = shown_grid(qtbot)
    model = RunModel()
    started(model, MAX_PANES)
    keys = {(0, 0, i) for i in range(MAX_PANES)}
    per_frame = PANE_DRAWS_PER_FRAME // BIND_DRAWS
    counts = []
    while not counts or counts[-1] < MAX_PANES:
        first = not counts
        grid.sync(model, keys if first else set(), first, 0.5, PANE_DRAWS_PER_FRAME)
        shown = [pane.isVisible() for pane in grid.panes.values()]
        assert shown == sorted(shown, reverse=True)  # the first requests' panes first
        counts.append(sum(shown))
        assert len(counts) <= MAX_PANES, "the panes never all showed"
    assert counts == [min(per_frame * (n + 1), MAX_PANES) for n in range(len(counts))]
    assert len(counts) == math.ceil(MAX_PANES / per_frame)
    assert [p.title.text() for p in grid.panes.values()] == [f"#{i + 1}" for i in range(64)]


def test_a_paced_frame_draws_a_share_of_the_news_the_oldest_first(qtbot):
    """64 streams with new text on every frame: a frame paints at most PANE_DRAWS_PER_FRAME
    of their texts, and no pane's text is more than one frame behind."""
    grid = shown_grid(qtbot)
    model = RunModel()
    started(model, MAX_PANES)
    keys = [(0, 0, i) for i in range(MAX_PANES)]
    model.apply([FirstToken(*key, S) for key in keys])
    grid.sync(model, set(keys), True, 1.0)  # bound at once, as a reopened session is
    qtbot.wait(20)
    paints = Events(QEvent.Type.Paint)
    for pane in grid.panes.values():
        pane.body.installEventFilter(paints)
    for frame in range(1, 7):
        model.apply([TokenChunkArrived(*key, (1 + frame) * S, f" t{frame}") for key in keys])
        paints.count = 0
        grid.sync(model, set(keys), False, 1.0 + frame, PANE_DRAWS_PER_FRAME)
        qtbot.waitUntil(lambda: paints.count > 0)  # the frame's panes paint, all at once
        assert paints.count <= PANE_DRAWS_PER_FRAME
        ends = [(pane.body.text().split() or ["t0"])[-1] for pane in grid.panes.values()]
        assert ends.count(f"t{frame}") == PANE_DRAWS_PER_FRAME
        assert set(ends) <= {f"t{frame}", f"t{frame - 1}"}
    # What waited a frame came with the next: every text is whole.
    assert all(
        pane.text in (" t1 t2 t3 t4 t5", " t1 t2 t3 t4 t5 t6") for pane in grid.panes.values()
    )


def test_a_new_run_started_and_sent_in_one_frame_has_empty_panes(qtbot):
    """A run's requests have the keys of the last run's: when its start and its first
    requests come in one frame, its panes showed the last run's text."""
    grid = shown_grid(qtbot)
    model = RunModel()
    started(model, 2)
    changes = model.apply([FirstToken(0, 0, 0, S), TokenChunkArrived(0, 0, 0, S, "last run")])
    grid.sync(model, changes.requests, True, 1.0)
    assert grid.panes[(0, 0, 0)].body.text() == "last run"
    config = parse_experiment("[server]\nslots = 1\n").configs()[0]
    again = [ExperimentStarted("e", "s", 1, "managed", 0), ConfigStarted(config, 2)]
    changes = model.apply([*again, *(RequestSubmitted(0, 0, i, False, S) for i in range(2))])
    grid.sync(model, changes.requests, changes.layout, 0.1)
    assert [p.body.text() for p in grid.panes.values()] == ["", ""]


def test_the_numbers_of_64_decoding_panes_change_a_few_panes_a_frame(qtbot):
    """Each decoding pane's numbers are redrawn every STATS_EVERY_TICKS frames, the panes
    taking turns: not 64 header labels in one frame every sixth frame."""
    grid = shown_grid(qtbot, 3000, 1600)  # wide panes: their numbers fit
    model = RunModel()
    started(model, MAX_PANES)
    keys = [(0, 0, i) for i in range(MAX_PANES)]
    model.apply([FirstToken(*key, S) for key in keys])
    grid.sync(model, set(keys), True, 1.0)
    redrawn = []
    for frame in range(STATS_EVERY_TICKS):
        model.apply([TokenChunkArrived(*key, (2 + frame) * S, " tok") for key in keys])
        before = [pane.stats.text() for pane in grid.panes.values()]
        grid.sync(model, set(), False, 2.0 + frame, PANE_DRAWS_PER_FRAME)
        after = [pane.stats.text() for pane in grid.panes.values()]
        redrawn.append({i for i, (b, a) in enumerate(zip(before, after, strict=True)) if b != a})
    assert all(after), "the numbers did not fit the panes"
    assert max(len(panes) for panes in redrawn) <= math.ceil(MAX_PANES / STATS_EVERY_TICKS)
    assert set().union(*redrawn) == set(range(MAX_PANES))


def test_a_frame_that_redraws_a_plot_draws_no_pane(qtbot):
    """Budget 0 (the Gantt or the server plots redraw this frame): no pane text and no
    numbers, whichever panes' turn it is; the next frame catches up."""
    grid = shown_grid(qtbot, 3000, 1600)
    model = RunModel()
    started(model, MAX_PANES)
    keys = [(0, 0, i) for i in range(MAX_PANES)]
    model.apply([FirstToken(*key, S) for key in keys])
    grid.sync(model, set(keys), True, 1.0)
    for frame in range(STATS_EVERY_TICKS):
        model.apply([TokenChunkArrived(*key, (2 + frame) * S, " tok") for key in keys])
        before = [(pane.stats.text(), pane.body.text()) for pane in grid.panes.values()]
        grid.sync(model, set(keys), False, 2.0 + frame, 0)
        assert [(p.stats.text(), p.body.text()) for p in grid.panes.values()] == before


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


def ink(widget: TailText) -> dict[str, list[int]]:
    """The rows holding answer ink (white, the text colour) and dimmed ink (red, the
    placeholder colour) on black."""
    image = QImage(widget.size(), QImage.Format.Format_ARGB32)
    widget.render(image)
    rows: dict[str, list[int]] = {"answer": [], "dimmed": []}
    for y in range(image.height()):
        pixels = [QColor(image.pixel(x, y)) for x in range(image.width())]
        if any(p.green() > 128 for p in pixels):
            rows["answer"].append(y)
        if any(p.red() > 128 and p.green() < 64 for p in pixels):
            rows["dimmed"].append(y)
    return rows


def test_reasoning_is_drawn_dimmed_above_the_answer(qtbot):
    text = TailText()
    qtbot.addWidget(text)
    palette = text.palette()
    palette.setColor(QPalette.ColorRole.Window, QColor("#000000"))
    palette.setColor(QPalette.ColorRole.WindowText, QColor("#ffffff"))
    palette.setColor(QPalette.ColorRole.PlaceholderText, QColor("#ff0000"))
    text.setPalette(palette)
    line = text.fontMetrics().lineSpacing()
    text.resize(300, 6 * line)
    text.setText("the answer", "thinking it over")
    assert (text.text(), text.dimmed()) == ("the answer", "thinking it over")
    rows = ink(text)
    assert rows["answer"] and rows["dimmed"], rows
    assert max(rows["dimmed"]) < min(rows["answer"])  # reasoning first, the answer below
    assert max(rows["answer"]) > text.height() - line  # the newest line at the bottom
    # An answer that fills the pane leaves no room for the reasoning.
    text.setText(" ".join(f"word{i}" for i in range(300)), "thinking it over")
    assert not ink(text)["dimmed"]


def test_a_pane_dims_what_came_as_reasoning_in_the_themes_muted_colour(qtbot, qapp):
    ensure_dark_theme(qapp)
    grid = shown_grid(qtbot, 900, 500)
    model = RunModel()
    started(model, 1)
    key = (0, 0, 0)
    model.apply([FirstToken(*key, S)])
    model.apply([TokenChunkArrived(*key, S, "let me think ", reasoning=True)])
    grid.sync(model, {key}, True, 1.0)
    pane = grid.panes[key]
    assert (pane.body.dimmed(), pane.body.text()) == ("let me think ", "")
    model.apply(
        [
            TokenChunkArrived(*key, 2 * S, "some more ", reasoning=True),
            TokenChunkArrived(*key, 2 * S, "Yes."),
        ]
    )
    grid.sync(model, {key}, False, 2.0)
    assert (pane.body.dimmed(), pane.body.text()) == ("let me think some more ", "Yes.")
    muted = theme("dark").color("muted")
    assert pane.body.palette().color(QPalette.ColorRole.PlaceholderText) == muted
    # A pane bound anew (a reopened session, a seek) gets both parts back.
    grid.sync(model, set(), True, 2.0)
    fresh = StreamGrid()
    qtbot.addWidget(fresh)
    fresh.resize(900, 500)
    fresh.sync(model, {key}, True, 2.0)
    assert (fresh.panes[key].body.dimmed(), fresh.panes[key].body.text()) == (
        "let me think some more ",
        "Yes.",
    )
