"""The tune's Pareto chart: measured points filled and predicted ones hollow, the SLO's region
shaded, the front and the winner drawn; points without a figure left out; the PNG
``workbench tune`` writes."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from tests.ui.test_report import png_size
from tests.ui.tune_records import SLOS, TRIED, WINNER, recommendation, tried
from workbench.engine.base.errors import OutputDirError
from workbench.engine.tune.records import SloTarget
from workbench.ui.exports.pareto import write_pareto_chart
from workbench.ui.exports.report import ChartOptions
from workbench.ui.views.pareto_chart import ParetoChart, pareto_front, pareto_points


def chart_of(qtbot, *args) -> ParetoChart:
    chart = ParetoChart()
    qtbot.addWidget(chart)
    chart.resize(640, 420)
    chart.show_tried(*args)
    return chart


def legend_names(chart: ParetoChart) -> list[str]:
    return [label.text for _, label in chart.legend.items]


def test_measured_points_are_filled_and_predicted_ones_hollow(qtbot):
    chart = chart_of(qtbot, TRIED, SLOS, WINNER)
    assert chart.drawn("measured") == 3 and chart.drawn("predicted") == 3
    assert chart.skipped == 1  # np=16 has no figures: left out, said in the title
    assert "1 not drawn" in chart.getPlotItem().titleLabel.text
    for (source, _), item in chart.groups.items():
        filled = item.opts["brush"].style() != Qt.BrushStyle.NoBrush
        assert filled == (source == "measured")
    failing = chart.groups[("measured", False)]
    assert failing.opts["pen"].color() != chart.groups[("measured", True)].opts["pen"].color()
    assert sorted(zip(failing.data["x"], failing.data["y"], strict=True)) == [
        (1.1, 101.0),
        (2.6, 58.0),
    ]
    names = legend_names(chart)
    assert "measured, meets every SLO" in names and "predicted, fails an SLO" in names
    assert "recommended" in names and "Pareto front" in names


def test_the_ttft_slo_is_shaded_and_the_winner_ringed(qtbot):
    chart = chart_of(qtbot, TRIED, SLOS, WINNER)
    assert chart.region.isVisible() and chart.region.getRegion() == (0.0, 2.0)
    assert "TTFT p90 &lt;= 2000 ms: the SLO's side" in legend_names(chart)  # HTML, escaped
    assert list(zip(chart.winner.data["x"], chart.winner.data["y"], strict=True)) == [(1.4, 96.0)]
    low, high = chart.getPlotItem().vb.viewRange()[0]
    assert low == 0 and high > 5.2  # every point and the limit in view
    assert len(chart._labels) == 6  # each drawn point named


def test_a_limit_far_beyond_every_point_does_not_press_them_against_the_axis(qtbot):
    quick = (tried(1, 0.40, 24.0), tried(2, 0.45, 26.0))
    chart = chart_of(qtbot, quick, (SloTarget("ttft", 90, 30_000.0),))
    low, high = chart.getPlotItem().vb.viewRange()[0]
    assert low == 0 and 0.45 < high < 1  # the points spread; all of the view is in the SLO
    assert chart.region.getRegion() == (0.0, 30.0)


def test_without_a_ttft_p90_slo_nothing_is_shaded(qtbot):
    chart = chart_of(qtbot, TRIED, (SloTarget("tpot", 50, 120.0),))
    assert not chart.region.isVisible()
    assert not any("TTFT p90 &lt;=" in name for name in legend_names(chart))
    assert chart.winner.data.size == 0 and "recommended" not in legend_names(chart)


def test_an_empty_tune_draws_nothing_and_does_not_fail(qtbot):
    chart = chart_of(qtbot, (), SLOS)
    assert chart.drawn("measured") == chart.drawn("predicted") == 0
    chart.show_tried((tried(1, None, 30.0), tried(2, 1.0, None)), SLOS)
    assert chart.skipped == 2 and chart.front.getData() == (None, None)


def test_the_front_is_what_no_other_point_beats_on_both_axes():
    points, _ = pareto_points(TRIED)
    front = [(p.x, p.y) for p in pareto_front(points)]
    # Faster first (np=8 predicted, 0.81 s); np=4's 1.4 s is beaten by np=8's measured 1.1 s.
    assert front == [(pytest.approx(0.81), 70.0), (1.1, 101.0)]


def test_many_points_name_only_the_front_the_measured_and_the_winner(qtbot):
    many = tuple(tried(n, 1 + n / 10, 50 + n, why_lost="x") for n in range(20))
    chart = chart_of(qtbot, (*many, WINNER), SLOS, WINNER)
    names = {label.textItem.toPlainText() for label in chart._labels}
    assert WINNER.label in names and len(names) < 21


def test_the_chart_is_written_as_a_png(tmp_path, qapp):
    path = tmp_path / "tune" / "pareto.png"
    write_pareto_chart(recommendation(), path, ChartOptions(width=800, height=500))
    assert png_size(path) == (800, 500) and path.stat().st_size > 5000


def test_a_chart_to_an_unknown_format_is_one_clear_error(tmp_path, qapp):
    with pytest.raises(OutputDirError, match=r"cannot export to \.bmp"):
        write_pareto_chart(recommendation(), tmp_path / "pareto.bmp")
