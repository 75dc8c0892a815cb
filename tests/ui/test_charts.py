"""Chart helpers: where a legend goes, and the roofline view's data."""

from __future__ import annotations

import itertools

from PySide6.QtCore import QPointF, QRectF

from workbench.engine.analysis.compare import ChartData, ChartKind, Series
from workbench.engine.analysis.roofline import RooflineReport, RooflineRow
from workbench.ui.views.charts import MetricChart, legend_spot
from workbench.ui.views.roofline_view import RooflineView, roofline_chart, roofline_summary


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
    view.show()  # the chart is made, and drawn, while the view shows
    assert "appears when a run has finished" in view.summary.text()
    view.show_report(RooflineReport([row("np=1", 1, 250, 70)], 25e9, "given", None))
    assert view.report is not None and view.chart.point_count() == 2
    view.show_report(RooflineReport([], 25e9, "given", None))  # an external server's session
    assert view.report is None and view.chart.point_count() == 0


def chart_of(data: ChartData, qtbot) -> MetricChart:
    chart = MetricChart()
    qtbot.addWidget(chart)
    chart.resize(480, 320)
    chart.show_data(data)
    return chart


def test_repeats_draw_error_bars_and_the_y_axis_starts_at_zero(qtbot):
    series = Series("a", [1, 2, 4], [40, 50, 60], [2.0, None, 5.0])
    chart = chart_of(ChartData("agg", "Aggregate throughput", "tok/s", "slots", [series]), qtbot)
    assert chart.error_bar_count() == 2  # no bar where one repeat gives no spread
    low, high = chart.getPlotItem().vb.viewRange()[1]
    assert low <= 0 < 65 <= high  # from zero to the top of the highest bar


def test_each_session_keeps_its_colour_and_its_lines_their_dashes(qtbot):
    lines = [
        Series("A · c=4096", [1, 2], [1, 2], session=0, variant=0),
        Series("A · c=8192", [1, 2], [2, 3], session=0, variant=1),
        Series("B", [1, 2], [3, 4], session=1),
    ]
    chart = chart_of(ChartData("x", "X", "tok/s", "slots", lines), qtbot)
    pens = [curve.opts["pen"] for curve in chart._curves]
    assert pens[0].color() == pens[1].color() != pens[2].color()
    assert pens[0].style() != pens[1].style()


def test_the_trade_off_names_its_points_and_distributions_are_steps(qtbot):
    trade = Series("A", [1300.0, 100.0], [10.0, 12.2], labels=["np=1", "np=2"])
    data = ChartData("t", "Throughput vs TTFT", "tok/s", "TTFT p50 (ms)", [trade])
    data.kind = ChartKind.TRADE_OFF
    chart = chart_of(data, qtbot)
    assert [label.toPlainText() for label in chart._labels] == ["np=1", "np=2"]
    cdf = ChartData("c", "TTFT distribution", "share of requests", "TTFT (s)", [])
    cdf.kind = ChartKind.CDF
    cdf.series = [Series("np=1", [0.1, 1.3, 2.5], [1 / 3, 2 / 3, 1.0])]
    chart.show_data(cdf)
    assert chart._labels == []  # the trade-off's names went with it
    x, y = chart._curves[0].getData()
    assert list(x) == [0.1, 0.1, 1.3, 1.3, 2.5, 2.5]
    assert list(y) == [0.0, 1 / 3, 1 / 3, 2 / 3, 2 / 3, 1.0]
    assert chart.getPlotItem().vb.viewRange()[1][0] <= 0


def test_a_title_from_a_session_is_text_not_markup(qtbot):
    data = ChartData("x", "<b>X</b>", "tok/s", "slots", [], subtitle="<img src=x>")
    chart = chart_of(data, qtbot)
    assert "&lt;b&gt;" in chart.getPlotItem().titleLabel.text
    assert "<img" not in chart.getPlotItem().titleLabel.text


def trade_off(series: list[Series]) -> ChartData:
    data = ChartData("t", "Aggregate throughput vs TTFT p50", "tok/s", "TTFT p50 (s)", series)
    data.kind = ChartKind.TRADE_OFF
    return data


def test_the_trade_offs_names_never_print_over_each_other(qtbot):
    """np=2 and np=4 a few pixels apart read "np=2np=4", and so did two sessions' np=1:
    each name was put above or below its point by turns, wherever the others were."""
    one = Series("A", [1.3, 0.1, 0.14], [10.0, 12.2, 11.6], labels=["np=1", "np=2", "np=4"])
    other = Series("B", [1.32, 0.4], [10.1, 9.0], session=1, labels=["np=1", "np=2"])
    chart = chart_of(trade_off([one, other]), qtbot)
    for size in ((480, 320), (1200, 800)):  # placed again for the size it is drawn at
        chart.resize(*size)
        chart.grab()
        names = [label.sceneBoundingRect() for label in chart._labels]
        for a, b in itertools.combinations(names, 2):
            assert not a.intersects(b), (size, a, b)
        frame = chart.getPlotItem().vb.sceneBoundingRect()
        assert all(frame.contains(name) for name in names), size
        assert not any(chart.legend.sceneBoundingRect().intersects(name) for name in names)
        for label in chart._labels:  # each name beside its point
            point = chart.getPlotItem().vb.mapViewToScene(label.pos())
            name = label.sceneBoundingRect()
            gap = max(name.left() - point.x(), point.x() - name.right(), 0) + max(
                name.top() - point.y(), point.y() - name.bottom(), 0
            )
            assert gap < name.height() * 2.5, (size, label.toPlainText())


def test_a_sweeps_x_axis_fits_its_settings_with_room_on_both_sides(qtbot):
    """Slots 1 and 2 were drawn from 0 (the left half empty) to just past 2, the last
    point on the frame."""
    data = ChartData(
        "agg", "Aggregate throughput", "tok/s", "slots", [Series("a", [1, 2], [10, 12])]
    )
    chart = chart_of(data, qtbot)
    low, high = chart.getPlotItem().vb.viewRange()[0]
    margin = 0.03 * (high - low)
    assert low + margin < 1 and high - margin > 2  # every point inside, away from the frame
    assert 1 - low < 0.15 * (high - low)  # the axis starts near the first point
    single = ChartData("agg", "Aggregate throughput", "tok/s", "slots", [Series("a", [4], [10])])
    chart.show_data(single)
    low, high = chart.getPlotItem().vb.viewRange()[0]
    assert low < 4 < high and abs((low + high) / 2 - 4) < 1e-9


def test_a_name_stays_off_the_error_bar_beside_it(qtbot):
    """With repeats, np=2's name was written across np=4's error bar, a few pixels right."""
    spread = Series("A", [1.0, 1.06], [10.0, 9.0], [None, 3.0], labels=["np=2", "np=4"])
    chart = chart_of(trade_off([spread]), qtbot)
    chart.grab()
    view = chart.getPlotItem().vb
    top, bottom = (view.mapViewToScene(QPointF(1.06, y)) for y in (12.0, 6.0))
    bar = QRectF(top, bottom).adjusted(-0.5, 0, 0.5, 0)  # the bar, a line a pixel wide
    for label in chart._labels:
        assert not label.sceneBoundingRect().intersects(bar), label.toPlainText()
