"""The catalogue's repeat rules are the numbers: each figure of a configuration is its
per-repeat values combined as its rule says (worked out here from each repeat's records on
its own), the catalogue alone decides the rule, and a configuration's wording says which
repeat was off."""

from __future__ import annotations

import csv
import dataclasses
import statistics

import pytest

from tests.made_sessions import request, server_of, workload_of, write_session
from workbench.engine.analysis.export import concurrency_columns, write_concurrency_csv
from workbench.engine.base.records import StartupFacts
from workbench.engine.figures import client_limits, metrics
from workbench.engine.figures.client_limits import ClientLoad, client_limited_reason
from workbench.engine.figures.cross_checks import CrossChecked
from workbench.engine.figures.metrics import Combine, Part, figure
from workbench.engine.figures.per_run import RunObservations, summarize_run
from workbench.engine.figures.summaries import summarize_config
from workbench.engine.store import open_session


def _made(tmp_path):
    """The made session's summary, and each of its two repeats summarized on its own."""
    with open_session(write_session(tmp_path / "made.session.sqlite")) as session:
        (summary,) = session.summaries()
        records, observed = session.records(0), session.observations(0)
    alone = [summarize_run([r for r in records if r.repeat == k], observed[k]) for k in (0, 1)]
    return summary, alone


def test_each_figure_combines_its_repeats_by_its_rule(tmp_path):
    summary, alone = _made(tmp_path)
    checked = set()
    for f in metrics.in_part(Part.RUN, Part.SERVER):
        values = [getattr(run, f.key) for run in alone] if hasattr(alone[0], f.key) else None
        numbers = [v for v in values or () if isinstance(v, int | float)]
        if f.combine is Combine.SUM:
            assert f.of(summary) == (sum(numbers) if numbers else None), f.key  # none: None
        elif f.combine in (Combine.MEAN, Combine.MEAN_SD) and numbers:
            assert f.of(summary) == pytest.approx(statistics.fmean(numbers)), f.key
            assert f.sd_of(summary) == pytest.approx(statistics.stdev(numbers)), f.key
        elif f.combine is Combine.JOINED:
            assert f.of(summary) == "+".join(sorted({str(v) for v in values})), f.key
        else:
            continue
        checked.add(f.combine)
    assert checked == {Combine.SUM, Combine.MEAN, Combine.MEAN_SD, Combine.JOINED}
    assert figure("repeats").of(summary) == 2
    # The known numbers: TTFT p50 is the mean of the per-repeat medians 0.2 and 2.0 s, not
    # the pooled median 0.65 s; counts add up over the repeats.
    p50 = figure("ttft_p50_s")
    assert p50.of(summary) == pytest.approx(1.1)
    assert p50.cell(summary, with_sd=True) == "1.100 ±1.273"
    assert summary.mean["ttft_p50_s"] == pytest.approx(1.1)  # what the JSON export holds
    assert summary.value("requests") == 6 and summary.value("ok") == 6
    assert summary.value("failed") == 0 and figure("token_source").of(summary) == "usage"


def _with_rule(monkeypatch, **rules: Combine) -> None:
    changed = tuple(
        dataclasses.replace(f, combine=rules[f.key]) if f.key in rules else f
        for f in metrics.FIGURES
    )
    monkeypatch.setattr(metrics, "FIGURES", changed)


def test_vllms_figures_combine_by_the_catalogues_rules(tmp_path):
    """vLLM's names over repeats: its counts summed (``Combine.SUM``), its times and rates
    averaged (``Combine.MEAN``), as each of our own figures of the kind."""
    summary, alone = _made(tmp_path)
    for name in ("completed", "total_output_tokens"):
        assert summary.vllm_value(name) == sum(run.vllm[name] for run in alone)
    for name in ("mean_ttft_ms", "output_throughput"):
        assert summary.vllm_value(name) == pytest.approx(
            statistics.fmean(run.vllm[name] for run in alone)
        )
    assert summary.vllm_value("no such figure") is None
    assert summary.vllm_value("completed") == 6


def test_the_catalogue_alone_decides_the_rules(tmp_path, monkeypatch):
    """A rule changed in the catalogue changes the summary, its mean and spread (the JSON
    export's) and concurrency.csv's spread columns: no list elsewhere restates it."""
    _with_rule(monkeypatch, requests=Combine.MEAN, ttft_p90_s=Combine.MEAN_SD)
    summary, alone = _made(tmp_path)
    assert summary.value("requests") == 3  # a mean of the 3 requests each repeat sent
    p90 = statistics.fmean(run.ttft_p90_s for run in alone)
    assert summary.mean["ttft_p90_s"] == pytest.approx(p90)
    assert summary.sd["ttft_p90_s"] == pytest.approx(statistics.stdev(r.ttft_p90_s for r in alone))
    assert "ttft_p90_s_sd" in concurrency_columns()
    write_concurrency_csv(tmp_path / "c.csv", [summary])
    with (tmp_path / "c.csv").open() as fh:
        (row,) = list(csv.DictReader(fh))
    assert (row["requests"], float(row["ttft_p90_s"])) == ("3.0", pytest.approx(p90, abs=1e-4))


def test_the_thresholds_are_the_rules_and_the_catalogue_prints_them():
    """The rule marks what its thresholds say, and the catalogue's definitions print them."""
    limit, share, busy = (
        client_limits.DISPATCH_LIMIT_MS,
        client_limits.DISPATCH_SHARE_OF_TTFT,
        client_limits.LOOP_BUSY_LIMIT,
    )
    assert client_limited_reason(limit * 1.01, None)  # no TTFT: judged on its own
    assert client_limited_reason(limit * 0.99, None) is None
    ttft = 2 * limit / 1000 / share  # at this TTFT p50 twice the limit is just its share
    assert client_limited_reason(2 * limit, None, ttft)
    assert client_limited_reason(2 * limit, None, ttft * 1.01) is None
    assert client_limited_reason(None, ClientLoad(1.0, busy + 0.01, 1.0))
    assert client_limited_reason(None, ClientLoad(1.0, busy - 0.01, 1.0)) is None
    assert (
        f"over {limit:g} ms and at least {share:.0%} of TTFT p50"
        in figure("dispatch_p99_ms").definition
    )
    assert f"over {busy:g} marks" in figure("loop_busy").definition
    assert f"busy over {busy:.0%}" in figure("client_limited").definition


def _run(loop_busy: float, checks_failed: tuple[str, ...] = ()):
    records = [request(i, ttft_s=0.1 * (i + 1)) for i in range(3)]
    run = summarize_run(records, RunObservations(ClientLoad(1.0, loop_busy, 1.0)))
    return dataclasses.replace(run, cross_checks=CrossChecked(checks_failed=list(checks_failed)))


def _config(*runs, status="ok"):
    return summarize_config(
        0, "np=1", server_of({"slots": 1}), workload_of({}), StartupFacts(), list(runs), status
    )


def test_the_wording_names_the_repeat_that_was_off():
    busy = f"measuring loop busy {client_limits.LOOP_BUSY_LIMIT + 0.05:.0%} of the run"
    calm, limited = _run(0.1), _run(client_limits.LOOP_BUSY_LIMIT + 0.05, ("output tokens off",))
    two = _config(calm, limited)
    assert two.client_limited == f"repeat 2: {busy}"
    assert figure("client_limited").of(two) == two.client_limited
    assert two.checks_failed == ["repeat 2: output tokens off"]
    assert figure("cross_check_failures").of(two) == "repeat 2: output tokens off"
    assert two.flags == ["client-limited", "cross-check off"]
    assert two.trust_notes == [
        f"client-limited: repeat 2: {busy}",
        "cross-check: repeat 2: output tokens off",
    ]
    one = _config(limited, status="cancelled")  # one repeat: nothing to tell apart
    assert (one.client_limited, one.checks_failed) == (busy, ["output tokens off"])
    assert one.flags == ["cancelled", "client-limited", "cross-check off"]
    assert _config(calm).flags == [] and _config(calm).trust_notes == []
