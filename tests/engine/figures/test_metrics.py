"""The catalogue of figures: its keys are real, its repeat rules are the ones the numbers follow,
and the CSV keeps the lab's layout."""

from __future__ import annotations

import csv
import dataclasses

import pytest

from tests.made_sessions import TWO_REPEATS, write_session
from workbench.engine.analysis.export import concurrency_columns, write_concurrency_csv
from workbench.engine.analysis.slo import ConfigGoodput, Slo, goodput
from workbench.engine.figures import metrics
from workbench.engine.figures.metrics import Combine, Part, field_at, figure
from workbench.engine.figures.per_run import RunSummary, summarize_run
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.store import open_session


def test_every_key_names_what_it_reads():
    run_fields = {f.name for f in dataclasses.fields(RunSummary)}
    config_fields = {f.name for f in dataclasses.fields(ConfigSummary)}
    slo_fields = {f.name for f in dataclasses.fields(ConfigGoodput)}
    for f in metrics.FIGURES:
        if f.combine is Combine.SETTING:  # a field, or a property over the repeats
            assert f.key in config_fields or hasattr(ConfigSummary, f.key), f.key
        elif f.part is Part.SLO:
            assert f.key in slo_fields, f.key
        elif f.combine is not Combine.RUNS and f.part is not Part.LIVE:
            # A repeat's figure is where its dotted path says, in its part's sub-record.
            assert f.path.split(".")[0] in run_fields, f.key
            assert f.path.endswith(f.key) and field_at(summarize_run([]), f.path) in (
                None,
                0,
                "none",
            )
    keys = [f.key for f in metrics.FIGURES]
    assert len(keys) == len(set(keys))
    assert all(f.estimate == (f.part is Part.LIVE) for f in metrics.FIGURES)
    assert all("estimate" in f.title for f in metrics.FIGURES if f.estimate)


def test_the_slo_evaluation_judges_the_tables_ttft_p50(tmp_path):
    path = write_session(tmp_path / "made.session.sqlite")
    with open_session(path) as session:
        (summary,) = session.summaries()
        # Between the pooled median (0.65 s) and the table's (1.1 s): the table's decides.
        (result,) = goodput(session, Slo(ttft_s=1.0))
    assert result.ttft_p50_s == pytest.approx(figure("ttft_p50_s").of(summary))
    assert result.ttft_p90_s == pytest.approx(figure("ttft_p90_s").of(summary))
    assert not result.acceptable and result.reasons == ["TTFT p50 1.100 s > 1 s"]
    assert result.good == sum(t <= 1.0 for ts in TWO_REPEATS.values() for t in ts)


def test_concurrency_csv_keeps_its_columns(tmp_path):
    # The lab's columns first, exactly, then the rest in the order the outputs page gives.
    assert concurrency_columns() == [
        "slots", "ctx", "n_ctx_slot", "concurrency", "max_tokens", "total_s", "agg_tok_s",
        "ttft_p50_s", "ttft_max_s", "decode_tok_s", "label", "input_tokens", "status",
        "repeats", "cache_state", "requests", "failed", "context_failed", "not_same_task",
        "prompt_tokens_p50", "prefill_tok_s", "cache_hits", "cache_hit_rate", "ttft_hit_p50_s",
        "ttft_miss_p50_s", "output_tokens", "ttft_p90_s", "ttft_p99_s", "tpot_p50_ms",
        "tpot_p90_ms", "tpot_p99_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms", "itl_max_ms",
        "e2e_p50_s", "e2e_p90_s", "queue_wait_p50_s", "queue_wait_max_s", "dispatch_p50_ms",
        "dispatch_p99_ms", "dispatch_max_ms", "connect_p50_ms", "ttft_from_intended_p50_s",
        "ttft_from_intended_p99_s", "e2e_from_intended_p50_s", "loop_busy", "tokens_per_chunk",
        "client_limited", "cross_check_failures", "total_s_sd",
        "agg_tok_s_sd", "ttft_p50_s_sd", "ttft_max_s_sd", "decode_tok_s_sd", "n_slots",
        "kv_unified", "cont_batching", "token_source",
        # vllm bench serve's names, last
        "completed", "total_input_tokens", "total_output_tokens", "request_throughput",
        "output_throughput", "total_token_throughput",
        *(f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el")
          for s in ("mean", "median", "std", "p99")),
        # over the steady state, and the over-saturation flag, after every older column
        "steady_s", "steady_requests", "steady_agg_tok_s", "steady_ttft_p50_s",
        "steady_ttft_p90_s", "steady_tpot_p50_ms", "over_saturated",
        # TTFO where reasoning was streamed, then a conversations run's turns
        "ttfo_p50_s", "ttfo_p50_s_sd", "ttfo_p90_s", "turn1_ttft_p50_s", "turn1_ttft_p90_s",
        "later_ttft_p50_s", "later_ttft_p90_s", "later_cache_share", "reprefilled_tokens",
        "later_turns", "lost_turns", "lost_turn_share", "conversations_per_slot",
        # a draft model's drafts (speculative decoding)
        "spec_acceptance", "spec_drafts", "spec_draft_tokens", "spec_accepted_tokens",
        # a figure added to the measured ones later (E2E p99), after every older column
        "e2e_p99_s",
        # requests a stop cut short, counted apart from the failed ones
        "cancelled",
        # why other processes on the machine shaped the numbers (schema 11)
        "machine_busy",
        # generation stalls, after every older column
        "stall_max_s", "stall_p99_s", "stalled_stream_share", "stalled_s",
        "stalled_s_per_1k_prompt", "gaps_within_share",
        # what caused them, added after
        "stalled_by_prompts_share", "stall_cause_tokens", "stall_cause_ttft_s",
        "stall_cause_streams", "stall_cause_prompts", "ttft_held_max_s",
    ]  # fmt: skip
    with open_session(write_session(tmp_path / "made.session.sqlite")) as session:
        summaries = session.summaries()
    write_concurrency_csv(tmp_path / "c.csv", summaries)
    with (tmp_path / "c.csv").open() as fh:
        (row,) = list(csv.DictReader(fh))
    assert (row["ttft_p50_s"], row["ttft_p50_s_sd"], row["repeats"]) == ("1.1", "1.2728", "2")
    # vLLM's: counts summed over the repeats, the rest averaged (TTFT means 0.2 s and 2 s).
    assert (row["completed"], row["total_output_tokens"]) == ("6", "66")
    assert (row["mean_ttft_ms"], row["p99_ttft_ms"]) == ("1100.0", "1639.0")  # p99s 298 and 2980 ms
    assert row["mean_tpot_ms"] == row["median_itl_ms"] == "100.0"


def test_display_formats():
    assert figure("agg_tok_s").text(12.345) == "12.3"
    assert figure("agg_tok_s").text(12.345, 0.25) == "12.3 ±0.2"
    assert figure("failed").text(3) == "3" and figure("failed").text(None) == "-"
    assert figure("cont_batching").text(False) == "off"
    assert figure("live_chunk_rate").live_text(41.6) == "live ≈42 chunks/s"
    assert figure("live_decode_rate").live_text(20.9) == "≈21 chunks/s"
    assert figure("ttft_p50_s").heading == "TTFT p50 (s)"
    with pytest.raises(KeyError):
        figure("nonsense")


def test_per_request_figures_come_from_the_catalogue(tmp_path, monkeypatch):
    from workbench.engine.analysis import export
    from workbench.engine.figures.metrics import RequestFigure

    extra = RequestFigure("tpot_s", "tpot_us", "TPOT", "us", 1e6, 1, "TPOT in microseconds")
    column = export.RequestColumn(extra.column, lambda r: extra.value(r.metrics))
    monkeypatch.setattr(export, "REQUEST_TABLE", (*export.REQUEST_TABLE, column))
    with open_session(write_session(tmp_path / "made.session.sqlite")) as session:
        export.write_requests_csv(tmp_path / "r.csv", session)
    with (tmp_path / "r.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 6
    first = rows[0]
    assert (first["ttft_s"], first["tpot_ms"], first["tpot_us"]) == ("0.1", "100.0", "100000.0")
    assert first["dispatch_ms"] == ""  # made without an arrival schedule: not measured


def test_requests_csv_names_each_catalogue_figure_once_in_one_declaration():
    """The columns' order is said in one place (no flags that move a column to the end): a
    per-request figure of the catalogue not placed there, or placed twice, is caught."""
    from workbench.engine.analysis.export import REQUEST_COLUMNS, REQUEST_TABLE
    from workbench.engine.figures.metrics import REQUEST_FIGURES

    assert [c.name for c in REQUEST_TABLE] == REQUEST_COLUMNS
    assert len(set(REQUEST_COLUMNS)) == len(REQUEST_COLUMNS)
    assert all(REQUEST_COLUMNS.count(f.column) == 1 for f in REQUEST_FIGURES)


class Asked:
    """A summary as the catalogue sees one: it asks for a figure's value and spread by key,
    and reads nothing else of it (no ``mean``, ``sd`` or ``runs`` here)."""

    def value(self, key: str):
        return {"ttft_p50_s": 1.5, "steady_agg_tok_s": None}.get(key)

    def spread(self, key: str):
        return 0.25 if key == "ttft_p50_s" else None


def test_the_catalogue_asks_a_summary_and_does_not_reach_into_it():
    ttft = figure("ttft_p50_s")
    assert ttft.of(Asked()) == 1.5 and ttft.sd_of(Asked()) == 0.25
    assert ttft.cell(Asked(), with_sd=True) == "1.500 ±0.250"
    shown = metrics.shown_in(metrics.View.WINDOW, having=[Asked()])
    assert ttft in shown and figure("steady_agg_tok_s") not in shown  # optional, no value


def test_a_summary_applies_the_repeat_rules_itself(tmp_path):
    with open_session(write_session(tmp_path / "made.session.sqlite")) as session:
        (summary,) = session.summaries()
    ttft, requests = figure("ttft_p50_s"), figure("requests")
    assert summary.value("ttft_p50_s") == summary.mean["ttft_p50_s"] == ttft.over(summary.runs)
    assert summary.spread("ttft_p50_s") == summary.sd["ttft_p50_s"] == ttft.sd_over(summary.runs)
    assert summary.value("requests") == requests.over(summary.runs)
    assert summary.spread("requests") is None  # a sum has no spread
    assert summary.value("label") == summary.label
