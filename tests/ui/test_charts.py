"""Chart helpers: where a legend goes, and the roofline view's data."""

from __future__ import annotations

from workbench.engine.analysis.compare import Series
from workbench.engine.analysis.roofline import RooflineReport, RooflineRow
from workbench.ui.charts import legend_spot
from workbench.ui.roofline_view import RooflineView, roofline_chart, roofline_summary


def test_the_legend_goes_where_the_curves_are_not():
    rising = [Series("a", [1, 2, 4], [10, 20, 40])]
    assert legend_spot(rising) == (0, 0)  # top left: a rising line leaves it empty
    falling = [Series("a", [1, 2, 4], [40, 20, 10])]
    assert legend_spot(falling) == (1, 0)
    # A flat line at the top and a falling one at the bottom: only the middle is free.
    roofline = [Series("bound", [1, 2, 4], [258, 253, 244]), Series("m", [1, 2, 4], [69, 33, 20])]
    assert legend_spot(roofline) == (1, 0.5)
    assert legend_spot([]) == (1, 0)


def row(label: str, slots: int, bound: float, decode: float | None) -> RooflineRow:
    return RooflineRow(label, slots, slots, 100.0, 1.0, bound, decode)


def test_roofline_by_slots_or_by_name():
    report = RooflineReport(  # a sweep written as slots = [2, 1]: drawn in slot order
        [row("np=2", 2, 240, None), row("np=1", 1, 250, 70)], 25e9, "given", None
    )
    data = roofline_chart(report)
    assert data.x_label == "slots" and data.x_ticks is None
    assert data.series[0].x == [1.0, 2.0] and data.series[0].y == [250, 240]
    assert data.series[1].x == [1.0]  # no decode: no point
    summary = roofline_summary(report)
    assert "25.0 GB/s (given)" in summary and "np=1, at 28%" in summary
    same_slots = RooflineReport(
        [row("c=4096", 2, 250, 50), row("c=8192", 2, 240, 48)], 25e9, "given", "other-host"
    )
    data = roofline_chart(same_slots)
    assert data.x_label == "configuration" and data.x_ticks == [(0.0, "c=4096"), (1.0, "c=8192")]
    assert "Recorded on other-host" in roofline_summary(same_slots)


def test_the_view_shows_a_report_or_says_when_it_will(qtbot):
    view = RooflineView()
    qtbot.addWidget(view)
    assert "appears when a run has finished" in view.summary.text()
    view.show_report(RooflineReport([row("np=1", 1, 250, 70)], 25e9, "given", None))
    assert view.report is not None and view.chart.point_count() == 2
    view.show_report(RooflineReport([], 25e9, "given", None))  # an external server's session
    assert view.report is None and view.chart.point_count() == 0
