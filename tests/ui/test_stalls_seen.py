"""Stalls seen in the window: the stream pane says how long its stream froze and whose
prompt did it, the Gantt marks the stretch inside the decode bar and outlines the cause on
hover, and the legend names the mark only for a run that has one; the exported Gantt
(pictures and page) marks them too."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPointF

from tests.ui.test_run_model import S, started
from workbench.engine.base.records import RequestKey
from workbench.engine.events import ConfigFinished, FirstToken, StallsFound
from workbench.engine.figures.stalls import Stall
from workbench.ui.exports.gantt_export import drawn_views
from workbench.ui.exports.gantt_html import gantt_document
from workbench.ui.run_model import RunModel
from workbench.ui.views import gantt as gantt_module
from workbench.ui.views.gantt import LOST_HEIGHT, GanttView
from workbench.ui.views.gantt_rows import STALL_HEIGHT, request_tooltip
from workbench.ui.views.legend import StateLegend
from workbench.ui.views.stream_grid import pane_stats


def stalled_run() -> RunModel:
    """Three requests sent 0.1 s apart; the first froze from 2 s to 11 s while the third's
    prompt was processed, and 12 s to 12.4 s with no cause the server could tell."""
    model = RunModel()
    started(model, 3)
    model.apply([FirstToken(0, 0, 0, 1 * S), FirstToken(0, 0, 1, 1 * S)])
    first, third = RequestKey(0, 0, 0), RequestKey(0, 0, 2)
    model.apply(
        [
            StallsFound(
                0,
                (
                    Stall(first, 2 * S, 11 * S, cause=third, covering=1),
                    Stall(first, 12 * S, 12_400_000_000, unknown=True),
                ),
            ),
            ConfigFinished(0, "ok"),
        ]
    )
    return model


def test_the_pane_says_how_long_and_whose_prompt():
    model = stalled_run()
    first, second, _ = model.ordered()
    assert [s.words() for s in first.stalls] == [
        "froze 9.0 s: prompt of #3",
        "froze 0.4 s: cause unknown",
    ]
    assert pane_stats(first, 20.0)[:2] == ["froze 9.0 s: prompt of #3", "TTFT 1.00s"]
    assert not any("froze" in part for part in pane_stats(second, 20.0))
    assert "stalls: 2, the longest froze 9.0 s: prompt of #3" in request_tooltip(first)


class Tips:
    """Stands in for QToolTip (the offscreen platform cannot raise a tip window)."""

    def __init__(self) -> None:
        self.shown: list[str] = []

    def showText(self, _pos: object, text: str, _widget: object) -> None:
        self.shown.append(text)


def test_the_gantt_marks_the_stall_and_outlines_its_cause(qtbot, monkeypatch):
    tips = Tips()
    monkeypatch.setattr(gantt_module, "QToolTip", tips)
    gantt = GanttView()
    qtbot.addWidget(gantt)
    model = stalled_run()
    gantt.sync(model, 20.0)
    marks = gantt.stalls.opts
    assert list(marks["x0"]) == [2.0, 12.0] and list(marks["y"]) == [0, 0]
    assert list(marks["width"]) == [9.0, pytest.approx(0.4)] and marks["height"] == STALL_HEIGHT
    assert list(gantt.cause.opts["x0"]) == []
    gantt.resize(900, 500)
    gantt.show()
    qtbot.waitExposed(gantt)
    gantt.sync(model, 20.0)
    view_box = gantt.getPlotItem().vb
    gantt._hover(view_box.mapViewToScene(QPointF(5.0, 0.0)))  # on the first stall
    assert ">froze 9.0 s: prompt of #3\n\nrequest #1" in tips.shown[-1]
    outline = gantt.cause.opts
    assert (list(outline["x0"]), list(outline["y"])) == ([0.2], [2])  # sent at 0.2 s, row 3
    assert list(outline["width"]) == [pytest.approx(19.8)] and outline["height"] == LOST_HEIGHT
    gantt._hover(view_box.mapViewToScene(QPointF(1.5, 0.0)))  # on its decode bar, no stall
    assert list(gantt.cause.opts["x0"]) == []
    assert ">request #1" in tips.shown[-1]


def test_the_legend_names_stalls_only_when_there_are_some(qtbot):
    legend = StateLegend()
    qtbot.addWidget(legend)
    legend.resize(3000, 40)
    legend.show()
    stalled = legend.stall_label[0]
    assert not stalled.isVisible()
    gantt = GanttView(states=legend)
    qtbot.addWidget(gantt)
    gantt.sync(stalled_run(), 20.0)
    assert stalled.isVisible() and stalled.text().startswith("stalled")


def test_the_exported_page_marks_each_stall_with_its_cause():
    """The HTML Gantt's data: each stall on its stream with the number of the request whose
    prompt caused it and the words the window's tip says; the page keys them ``stalled``."""
    document = gantt_document(stalled_run(), "t")
    first, _, third = document["requests"]
    assert first["stalls"] == [
        [2.0, 11.0, 3, "froze 9.0 s: prompt of #3"],
        [12.0, 12.4, None, "froze 0.4 s: cause unknown"],
    ]
    assert third["number"] == 3 and third["stalls"] == []
    assert document["stall"]["label"] == "stalled"
    assert document["stall"]["height"] == STALL_HEIGHT


def test_the_exported_pictures_legend_names_the_stalls(qtbot):
    model = stalled_run()
    for _, view in drawn_views(model, "t"):
        names = [label.text for _, label in view.ghost_legend.items]
        assert "stalled" in names
