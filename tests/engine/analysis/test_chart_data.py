"""The charts' data for a report: spread across repeats, units that suit the values, the
workload in each title, one colour per session, the throughput-vs-TTFT trade-off and TTFT
distributions."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tests.made_sessions import Config, build_session, burst, startup_facts
from workbench.engine.analysis.compare import (
    CDF_POINTS,
    ChartKind,
    chart_data,
    suited_unit,
    workload_caption,
)
from workbench.engine.store import open_session

REPEATED = """name = "repeated"
[server]
slots = [1, 2]
ctx = 2048
[workload]
requests = 3
max_tokens = 12
repeats = 2
"""


def repeat_of(records, repeat):
    return [replace(r, repeat=repeat) for r in records]


@pytest.fixture(scope="module")
def repeated_session(tmp_path_factory):
    """Slots 1 and 2, two repeats each of 3 requests of 12 tokens sent together. np=1:
    repeat 0 makes a token every 0.1 s (makespan 3.6 s: 10 tok/s), repeat 1 every 0.2 s
    (6.9 s: 36/6.9 tok/s). np=2: every 0.125 s in both (identical repeats, no spread)."""
    np1 = burst(0, 3, slots=1, at_s=0.0) + repeat_of(burst(3, 3, slots=1, at_s=10.0, itl_s=0.2), 1)
    np2 = burst(6, 3, slots=2, at_s=20.0, itl_s=0.125) + repeat_of(
        burst(9, 3, slots=2, at_s=30.0, itl_s=0.125), 1
    )
    return build_session(
        tmp_path_factory.mktemp("repeated") / "repeated.session.sqlite",
        REPEATED,
        [Config(np1, startup_facts(1, 2048)), Config(np2, startup_facts(2, 2048))],
    )


def by_key(charts):
    return {c.key: c for c in charts}


def test_seconds_read_as_milliseconds_below_one_second():
    assert suited_unit("s", [0.05, 0.8]) == ("ms", 1000.0)
    assert suited_unit("s", [0.05, 1.2]) == ("s", 1.0)
    assert suited_unit("s", []) == ("s", 1.0)
    assert suited_unit("tok/s", [0.5]) == ("tok/s", 1.0)


def test_each_point_carries_its_spread_across_repeats(repeated_session):
    with open_session(repeated_session) as session:
        charts = by_key(chart_data([session]))
    (agg,) = charts["agg_tok_s"].series
    assert agg.x == [1.0, 2.0]
    assert agg.y[0] == pytest.approx((10.0 + 36 / 6.9) / 2)
    assert agg.err[0] == pytest.approx(abs(10.0 - 36 / 6.9) / math.sqrt(2))
    assert agg.err[1] == pytest.approx(0.0, abs=1e-9)  # the same both times
    assert charts["agg_tok_s"].unit == "tok/s"


def test_the_title_carries_the_workload_and_the_bars_meaning(repeated_session):
    with open_session(repeated_session) as session:
        charts = by_key(chart_data([session]))
        chart = charts["agg_tok_s"]
        caption = workload_caption([session.summaries()], "bars")
    assert chart.subtitle == caption
    assert caption == "3 requests · concurrency 3 · 12 tokens out · 2 repeats, bars ±1 sd"
    # Only where bars are drawn: the trade-off's are throughput's, the distributions have none.
    assert charts["throughput_vs_ttft"].subtitle.endswith("2 repeats, throughput bars ±1 sd")
    assert charts["ttft_cdf"].subtitle == "3 requests · concurrency 3 · 12 tokens out · 2 repeats"


def test_times_below_a_second_are_charted_in_ms(sweep_session, tmp_path):
    """Four slots serve the 3 requests at once: every TTFT is 0.1 s. The sweep's np=1 waits
    1.3 s (p50), so its chart stays in seconds."""
    path = build_session(
        tmp_path / "quick.session.sqlite",
        "[server]\nslots = 4\n[workload]\nrequests = 3\n",
        [Config(burst(0, 3, slots=4, at_s=0.0), startup_facts(4, 4096))],
    )
    with open_session(path) as quick, open_session(sweep_session) as sweep:
        fast = by_key(chart_data([quick]))
        slow = by_key(chart_data([sweep]))
    assert fast["ttft_p50_s"].unit == "ms" and fast["ttft_p50_s"].y_scale == 1000.0
    assert fast["ttft_p50_s"].series[0].y == pytest.approx([100.0])
    assert fast["throughput_vs_ttft"].x_label == "TTFT p50 (ms)"
    assert fast["throughput_vs_ttft"].series[0].x == pytest.approx([100.0])
    assert fast["ttft_cdf"].x_label == "TTFT (ms)"
    assert slow["ttft_p50_s"].unit == "s" and slow["ttft_p50_s"].y_scale == 1.0


def test_the_trade_off_names_each_configuration(sweep_session):
    """np=1: TTFT p50 1.3 s at 10 tok/s; np=2: 0.1 s at 36/2.95 tok/s."""
    with open_session(sweep_session) as session:
        chart = by_key(chart_data([session]))["throughput_vs_ttft"]
    assert chart.kind is ChartKind.TRADE_OFF
    assert chart.title == "Aggregate throughput vs TTFT p50"
    assert chart.x_label == "TTFT p50 (s)" and chart.unit == "tok/s"
    (series,) = chart.series
    assert series.labels == ["np=1", "np=2"]
    assert series.x == pytest.approx([1.3, 0.1])
    assert series.y == pytest.approx([10.0, 36 / 2.95])


def test_one_session_gets_one_distribution_with_a_line_per_configuration(sweep_session):
    with open_session(sweep_session) as session:
        chart = by_key(chart_data([session]))["ttft_cdf"]
    assert chart.kind is ChartKind.CDF and chart.unit == "share of requests"
    np1, np2 = chart.series
    assert (np1.name, np2.name) == ("np=1", "np=2")
    assert np1.x == pytest.approx([0.1, 1.3, 2.5])  # the warm-up is not measured
    assert np1.y == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert np2.x == pytest.approx([0.1, 0.1, 1.575])
    assert np1.session != np2.session  # told apart by colour


def test_compared_sessions_keep_one_colour_each_in_every_chart(sweep_session, repeated_session):
    with open_session(sweep_session) as a, open_session(repeated_session) as b:
        charts = chart_data([a, b])
    keys = [c.key for c in charts]
    assert keys[-2:] == ["ttft_cdf_1", "ttft_cdf_2"]  # one distribution per configuration
    for chart in charts:
        assert {s.session for s in chart.series} == {0, 1}, chart.key
        for s in chart.series:
            assert s.name.startswith(("sweep", "repeated")[s.session]), chart.key
    assert by_key(charts)["ttft_cdf_1"].title == "TTFT distribution · np=1"
    # Shared by both sessions; one has repeats, the other not: no count, but the bars' meaning.
    assert by_key(charts)["agg_tok_s"].subtitle == (
        "3 requests · concurrency 3 · 12 tokens out · bars ±1 sd across repeats"
    )


def test_relative_charts_leave_out_the_trade_off_and_distributions(sweep_session):
    with open_session(sweep_session) as session:
        charts = chart_data([session], relative=True)
    assert {c.kind for c in charts} == {ChartKind.SWEEP}


def test_a_long_distribution_keeps_its_quantiles(tmp_path):
    path = build_session(
        tmp_path / "many.session.sqlite",
        "[server]\nslots = 4\n[workload]\nrequests = 1000\nmax_tokens = 2\n",
        [Config(burst(0, 1000, slots=4, at_s=0.0, tokens=2, itl_s=0.001), startup_facts(4, 4096))],
    )
    with open_session(path) as session:
        (line,) = by_key(chart_data([session]))["ttft_cdf"].series
    assert len(line.x) == CDF_POINTS
    assert line.y[0] == pytest.approx(1 / 1000) and line.y[-1] == 1.0
    assert line.x == sorted(line.x)


def test_a_distribution_counts_failed_requests_and_leaves_out_failed_configurations(tmp_path):
    """np=1: 2 of 3 requests answered, so its line ends at 2/3. np=2's server never started:
    no line, as in the other charts."""
    from tests.made_sessions import failed

    path = build_session(
        tmp_path / "failures.session.sqlite",
        "[server]\nslots = [1, 2]\n[workload]\nrequests = 3\n",
        [
            Config(
                [*burst(0, 2, slots=1, at_s=0.0), failed(2, submit_s=0.0, done_s=0.5, error="500")],
                startup_facts(1, 4096),
            ),
            Config([], None, status="failed", error="the server did not start"),
        ],
    )
    with open_session(path) as session:
        (line,) = by_key(chart_data([session]))["ttft_cdf"].series
    assert line.name == "np=1"
    assert line.y == pytest.approx([1 / 3, 2 / 3])
