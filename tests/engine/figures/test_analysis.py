"""Derived numbers, as the catalogue (``metrics``) defines them, from constructed records
with known timestamps."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from tests.made_sessions import server_of, workload_of
from workbench.engine.base.records import RequestRecord, StartupFacts, TokenChunk
from workbench.engine.figures.metrics import FIGURES
from workbench.engine.figures.per_request import percentile, request_metrics
from workbench.engine.figures.per_run import summarize_run
from workbench.engine.figures.summaries import summarize_config

MS = 1_000_000  # ns


def make_record(
    index: int = 0,
    *,
    submit_ms: float = 0.0,
    chunk_ms: tuple[float, ...] = (100.0, 120.0, 150.0, 160.0),
    done_ms: float | None = None,
    ok: bool = True,
    usage: int | None = None,
    predicted_n: int | None = None,
    prompt_ms: float | None = None,
    cache_n: int | None = None,
    warmup: bool = False,
    repeat: int = 0,
) -> RequestRecord:
    """A record whose times are given in ms after an arbitrary origin."""
    origin = 5_000_000_000_000  # perf_counter_ns values are large; differences are what count
    record = RequestRecord(0, repeat, index, f"prompt {index}", warmup=warmup)
    record.t_submit_ns = origin + int(submit_ms * MS)
    record.chunks = [TokenChunk(origin + int(t * MS), "x") for t in chunk_ms]
    if chunk_ms:
        record.t_first_token_ns = record.chunks[0].t_ns
        record.t_last_token_ns = record.chunks[-1].t_ns
    last = chunk_ms[-1] if chunk_ms else submit_ms
    record.t_done_ns = origin + int((done_ms if done_ms is not None else last + 1.0) * MS)
    record.ok = ok
    record.error = None if ok else "boom"
    if usage is not None:
        record.usage = {"completion_tokens": usage}
    timings = {}
    if predicted_n is not None:
        timings["predicted_n"] = predicted_n
    if prompt_ms is not None:
        timings["prompt_ms"] = prompt_ms
    if cache_n is not None:
        timings["cache_n"] = cache_n
    record.timings = timings or None
    return record


# -- percentile --------------------------------------------------------------------------
def test_percentile_known_values() -> None:
    assert percentile([], 50) is None
    assert percentile([7.0], 99) == 7.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([4, 1, 3, 2], 0) == 1  # unsorted input
    assert percentile([1, 2, 3, 4], 100) == 4
    assert percentile([10, 20], 90) == pytest.approx(19.0)
    assert percentile([1, 2, 3, 4, 5], 90) == pytest.approx(4.6)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("q", [0, 1, 25, 50, 90, 99, 99.9, 100])
def test_percentile_matches_numpy_linear(seed: int, q: float) -> None:
    rng = np.random.default_rng(seed)
    values = list(rng.exponential(2.0, size=int(rng.integers(1, 60))))
    expected = float(np.percentile(values, q, method="linear"))
    assert percentile(values, q) == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_the_vllm_named_percentiles_are_the_catalogues_to_the_last_digit(seed: int) -> None:
    """One percentile in one run: vLLM's ``median_`` and ``p99_`` figures (numpy's
    ``np.median`` and ``np.percentile`` once) and the catalogue's p50 and p99 (the workbench's
    own interpolation once) are one computation, so they agree exactly, not to a tolerance."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(int(rng.integers(2, 40))):
        submit = float(rng.uniform(0, 500))
        gaps = np.cumsum(rng.exponential(20.0, size=int(rng.integers(2, 8))))
        chunks = tuple(submit + float(rng.exponential(100.0)) + gaps)
        records.append(make_record(i, submit_ms=submit, chunk_ms=chunks, usage=len(chunks)))
    s = summarize_run(records)
    for name, p50, p99 in (
        ("ttft", s.ttft_p50_s * 1000, s.ttft_p99_s * 1000),
        ("tpot", s.tpot_p50_ms, s.tpot_p99_ms),
        ("itl", s.itl_p50_ms, s.itl_p99_ms),
        ("e2el", s.e2e_p50_s * 1000, s.e2e_p99_s * 1000),
    ):
        assert s.vllm[f"median_{name}_ms"] == p50, name
        assert s.vllm[f"p99_{name}_ms"] == p99, name
    # and both are numpy's definition, to its rounding
    ttfts = [m.ttft_s for r in records if (m := request_metrics(r)) is not None]
    assert s.vllm["p99_ttft_ms"] == pytest.approx(float(np.percentile(ttfts, 99)) * 1000)
    assert s.vllm["median_ttft_ms"] == pytest.approx(float(np.median(ttfts)) * 1000)


# -- one request ------------------------------------------------------------------------
def test_request_metrics_from_known_times() -> None:
    # submit at 0; chunks at 100, 120, 150, 160 ms; the server says 4 tokens, 30 ms prefill
    m = request_metrics(make_record(usage=4, prompt_ms=30.0, cache_n=0))
    assert m is not None
    assert m.ttft_s == pytest.approx(0.100)
    assert m.e2e_s == pytest.approx(0.160)  # to the last token, not to the end of the stream
    assert m.output_tokens == 4 and m.token_source == "usage"
    assert m.tpot_s == pytest.approx(0.060 / 3)
    assert m.decode_tok_s == pytest.approx(3 / 0.060)
    assert m.itl_s == pytest.approx([0.020, 0.030, 0.010])
    assert m.queue_wait_s == pytest.approx(0.070)  # TTFT - prompt_ms
    assert m.prefill_s == pytest.approx(0.030)
    assert m.queue_wait_s + m.prefill_s == pytest.approx(m.ttft_s)
    assert m.cache_hit is False


def test_tpot_uses_the_server_count_not_chunks() -> None:
    # 4 chunks but 13 tokens (several tokens per chunk): TPOT = 60 ms / 12
    m = request_metrics(make_record(usage=13))
    assert m is not None
    assert m.output_tokens == 13
    assert m.tpot_s == pytest.approx(0.060 / 12)
    assert m.decode_tok_s == pytest.approx(12 / 0.060)
    assert len(m.itl_s) == 3  # ITL is between chunks, whatever they carry


def test_queue_wait_is_floored_at_zero() -> None:
    m = request_metrics(make_record(prompt_ms=250.0))  # server prefill longer than our TTFT
    assert m is not None
    assert m.queue_wait_s == 0.0
    assert m.prefill_s == pytest.approx(m.ttft_s)


def test_no_prompt_ms_means_no_queue_split() -> None:
    m = request_metrics(make_record(usage=4))
    assert m is not None
    assert m.queue_wait_s is None and m.prefill_s is None


def test_cache_hit_flag() -> None:
    hit = request_metrics(make_record(cache_n=12))
    miss = request_metrics(make_record(cache_n=0))
    unknown = request_metrics(make_record())
    assert hit is not None and hit.cache_hit is True
    assert miss is not None and miss.cache_hit is False
    assert unknown is not None and unknown.cache_hit is False


@pytest.mark.parametrize(
    ("usage", "predicted_n", "expected"),
    [
        (9, 7, (9, "usage")),
        (None, 7, (7, "timings")),
        (None, None, (4, "chunks")),
    ],
)
def test_token_count_fallback_order(usage, predicted_n, expected) -> None:
    record = make_record(usage=usage, predicted_n=predicted_n)
    assert record.output_tokens == expected
    m = request_metrics(record)
    assert m is not None
    assert (m.output_tokens, m.token_source) == expected


def test_a_non_integer_usage_count_is_not_trusted() -> None:
    record = make_record(predicted_n=7)
    record.usage = {"completion_tokens": "9"}
    assert record.output_tokens == (7, "timings")


def test_single_token_has_no_tpot() -> None:
    m = request_metrics(make_record(chunk_ms=(80.0,), usage=1))
    assert m is not None
    assert m.ttft_s == pytest.approx(0.080) and m.e2e_s == pytest.approx(0.080)
    assert m.tpot_s is None and m.decode_tok_s is None
    assert m.itl_s == []


def test_failed_or_tokenless_requests_have_no_metrics() -> None:
    assert request_metrics(make_record(ok=False)) is None
    assert request_metrics(make_record(chunk_ms=())) is None
    unsent = RequestRecord(0, 0, 0, "p")
    assert request_metrics(unsent) is None


# -- one run ----------------------------------------------------------------------------
def test_summarize_run() -> None:
    records = [
        # a warm-up request: earliest submit and latest end, but excluded from everything
        make_record(
            0, submit_ms=-500.0, chunk_ms=(-400.0, 900.0), done_ms=5000.0, usage=50, warmup=True
        ),
        make_record(
            1,
            submit_ms=0.0,
            chunk_ms=(100.0, 200.0, 300.0),
            done_ms=310.0,
            usage=3,
            prompt_ms=40.0,
            cache_n=0,
        ),
        make_record(
            2,
            submit_ms=10.0,
            chunk_ms=(410.0, 430.0, 450.0),
            done_ms=460.0,
            usage=3,
            prompt_ms=40.0,
            cache_n=5,
        ),
        make_record(3, submit_ms=20.0, chunk_ms=(50.0, 70.0), done_ms=800.0, ok=False),
    ]
    s = summarize_run(records)
    assert (s.requests, s.ok, s.failed) == (3, 2, 1)
    assert s.errors == ["boom"]
    assert s.makespan_s == pytest.approx(0.800)  # first submit (0) to last done (800, failed)
    assert s.output_tokens == 6
    assert s.agg_tok_s == pytest.approx(6 / 0.800)
    ttfts = [0.100, 0.400]
    assert s.ttft_p50_s == pytest.approx(float(np.percentile(ttfts, 50)))
    assert s.ttft_p90_s == pytest.approx(float(np.percentile(ttfts, 90)))
    assert s.ttft_max_s == pytest.approx(0.400)
    assert s.tpot_p50_ms == pytest.approx(float(np.percentile([100.0, 20.0], 50)))
    itl_ms = [100.0, 100.0, 20.0, 20.0]
    assert s.itl_p50_ms == pytest.approx(float(np.percentile(itl_ms, 50)))
    assert s.itl_max_ms == pytest.approx(100.0)
    assert s.e2e_p50_s == pytest.approx(float(np.percentile([0.300, 0.440], 50)))
    assert s.decode_tok_s == pytest.approx(1000.0 / float(np.percentile([100.0, 20.0], 50)))
    assert s.queue_wait_p50_s == pytest.approx(float(np.percentile([0.060, 0.360], 50)))
    assert s.queue_wait_max_s == pytest.approx(0.360)
    assert s.cache_hits == 1
    assert s.token_source == "usage"


def test_one_fast_request_does_not_make_the_headline_decode_speed() -> None:
    # Issue 33's busy run: three requests at about 2 tok/s and one at 83 tok/s. A mean of
    # per-request rates read 22 tok/s beside a TPOT p50 of 506 ms; the headline is 1 / TPOT p50.
    slow = [
        make_record(i, chunk_ms=tuple(100.0 + 500.0 * k for k in range(17)), usage=17)
        for i in range(3)
    ]
    fast = make_record(3, chunk_ms=tuple(100.0 + 12.0 * k for k in range(17)), usage=17)
    s = summarize_run([*slow, fast])
    assert s.tpot_p50_ms == pytest.approx(500.0)
    assert s.decode_tok_s == pytest.approx(2.0)
    assert s.decode_tok_s == pytest.approx(1000.0 / s.tpot_p50_ms)
    rates = [m.decode_tok_s for r in [*slow, fast] if (m := request_metrics(r))]
    assert statistics.fmean(r for r in rates if r) > 20  # what the old headline showed


def test_summarize_run_mixed_token_sources() -> None:
    s = summarize_run([make_record(0, usage=4), make_record(1)])
    assert s.token_source == "chunks+usage"


def test_summarize_run_of_nothing() -> None:
    s = summarize_run([])
    assert (s.requests, s.ok, s.failed) == (0, 0, 0)
    assert s.makespan_s is None and s.agg_tok_s is None and s.ttft_p50_s is None
    assert s.token_source == "none"
    only_warmup = summarize_run([make_record(warmup=True)])
    assert only_warmup.requests == 0 and only_warmup.makespan_s is None


def test_summarize_run_all_failed() -> None:
    s = summarize_run([make_record(0, ok=False), make_record(1, ok=False)])
    assert (s.ok, s.failed) == (0, 2)
    assert s.output_tokens == 0
    assert s.agg_tok_s == 0.0  # a makespan existed, nothing came out of it
    assert s.ttft_max_s is None


# -- one configuration ------------------------------------------------------------------
def _run(submit_end_ms: list[tuple[float, float]], usage: int = 3):
    records = [
        make_record(i, submit_ms=a, chunk_ms=(a + 50.0, a + 60.0, b - 1.0), done_ms=b, usage=usage)
        for i, (a, b) in enumerate(submit_end_ms)
    ]
    return summarize_run(records)


def test_summarize_config_mean_and_sd_across_repeats() -> None:
    runs = [_run([(0.0, 1000.0)]), _run([(0.0, 2000.0)]), _run([(0.0, 3000.0)])]
    server = {"slots": 2, "ctx": 4096, "cont_batching": False}
    workload = {"requests": 8, "concurrency": 0, "max_tokens": 64}
    facts = StartupFacts(n_ctx_slot=2048, n_slots=2, kv_unified=False)
    c = summarize_config(3, "np=2", server_of(server), workload_of(workload), facts, runs)
    assert c.mean["makespan_s"] == pytest.approx(2.0)
    assert c.sd["makespan_s"] == pytest.approx(1.0)  # sample standard deviation
    agg = [3 / 1.0, 3 / 2.0, 3 / 3.0]
    assert c.mean["agg_tok_s"] == pytest.approx(statistics.fmean(agg))
    assert c.sd["agg_tok_s"] == pytest.approx(statistics.stdev(agg))
    assert c.mean["ttft_p50_s"] == pytest.approx(0.050) and c.sd["ttft_p50_s"] == pytest.approx(0)
    assert list(c.mean) == [f.key for f in FIGURES if f.spread] == list(c.sd)
    assert (c.index, c.label, c.slots, c.ctx) == (3, "np=2", 2, 4096)
    assert (c.n_ctx_slot, c.n_slots, c.kv_unified) == (2048, 2, False)
    assert c.cont_batching is False
    assert c.concurrency == 8  # 0 means all requests at once
    assert c.max_tokens == 64
    assert c.status == "ok" and c.error is None
    assert c.value("makespan_s") == pytest.approx(2.0)
    assert c.value("output_tokens") == 9  # counts are summed over repeats
    assert c.value("ttft_max_s") == pytest.approx(statistics.fmean(r.ttft_max_s for r in runs))
    assert c.to_dict()["runs"][0]["requests"] == 1


def test_summarize_config_single_repeat_has_no_sd() -> None:
    facts = StartupFacts()
    c = summarize_config(
        0,
        "x",
        server_of({"slots": 1}),
        workload_of({"concurrency": 2}),
        facts,
        [_run([(0.0, 500.0)])],
    )
    assert c.mean["makespan_s"] == pytest.approx(0.5)
    assert c.sd["makespan_s"] is None
    assert c.concurrency == 2


def test_summarize_config_without_runs_and_with_override() -> None:
    c = summarize_config(
        1,
        "np=-1",
        server_of({"slots": -1}),
        workload_of({}),
        StartupFacts(n_slots=4),
        [],
        status="failed",
        error="server crashed",
        slots_override=4,
    )
    assert c.slots == 4
    assert all(v is None for v in c.mean.values())
    assert c.status == "failed" and c.error == "server crashed"
    assert c.value("makespan_s") is None
    assert c.value("ttft_p90_s") is None
    assert c.ctx == 8192  # a stored configuration without ctx: the schema's default
