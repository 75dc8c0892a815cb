"""What the prompt cache did, per configuration: hit rate, TTFT with and without hits, the
cache's state, and hits nobody asked for."""

from __future__ import annotations

import pytest

from tests.made_sessions import server_of, workload_of
from workbench.engine.base.records import RequestRecord, StartupFacts, TokenChunk
from workbench.engine.figures.per_run import summarize_run
from workbench.engine.figures.summaries import summarize_config

S = 1_000_000_000


def record(index: int, ttft_s: float, cache_n: int, prompt: int = 100) -> RequestRecord:
    first = int(ttft_s * S)
    return RequestRecord(
        0, 0, index, "p",
        t_submit_ns=0, t_first_token_ns=first, t_last_token_ns=first + S, t_done_ns=first + S,
        ok=True, usage={"completion_tokens": 2, "prompt_tokens": prompt},
        timings={"prompt_n": prompt - cache_n, "cache_n": cache_n, "prompt_ms": 10.0},
        chunks=[TokenChunk(first, "a"), TokenChunk(first + S, "b")],
    )  # fmt: skip


def config(workload: dict, records: list[RequestRecord]):
    return summarize_config(
        0, "c", server_of({}), workload_of(workload), StartupFacts(), [summarize_run(records)]
    )


def test_hits_the_rate_and_ttft_with_and_without():
    records = [record(0, 0.9, 0), record(1, 0.2, 80), record(2, 0.3, 60)]
    summary = config({"cache_prompt": True, "warmup": 0}, records)
    assert summary.value("cache_hit_rate") == pytest.approx(140 / 300)
    assert summary.value("ttft_hit_p50_s") == pytest.approx(0.25)
    assert summary.value("ttft_miss_p50_s") == pytest.approx(0.9)
    assert summary.value("cache_hits") == 2
    assert summary.cache_state == "cold" and summary.unasked_cache_hits is None
    assert config({"cache_prompt": True, "warmup": 1}, records).cache_state == "warm"


def test_hits_the_experiment_did_not_ask_for_are_flagged():
    records = [record(0, 0.9, 0), record(1, 0.2, 80)]
    summary = config({"cache_prompt": False}, records)
    assert summary.cache_state == "off"
    assert summary.unasked_cache_hits == (
        "1 request reused cached prompt tokens though cache_prompt is off"
    )
    assert any(n.startswith("prompt cache: 1 request reused") for n in summary.trust_notes)
    clean = config({"cache_prompt": False}, [record(0, 0.9, 0)])
    assert clean.unasked_cache_hits is None and clean.trust_notes == []


def test_prompt_tokens_reused_from_the_cache_are_not_counted_against_the_server():
    """llama.cpp's prompt_tokens_total counts only the prompt it processed: a warm cache's
    4,194 reported tokens were 82 processed ones (measured, prefix-cache.toml)."""
    from workbench.engine.figures.cross_checks import token_checks

    records = [record(0, 0.3, 980, prompt=1000), record(1, 0.3, 990, prompt=1000)]
    counters = "llamacpp:prompt_tokens_total"
    (prompt,) = token_checks(records, {counters: 100.0}, {counters: 130.0})  # no output counter
    assert (prompt.name, prompt.client, prompt.server, prompt.agrees) == (
        "prompt tokens",
        30.0,
        30.0,
        True,
    )
