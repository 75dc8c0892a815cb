"""Each verdict on constructed data whose answer is known."""

from __future__ import annotations

from dataclasses import replace

import pytest

from workbench.engine.analysis.verdicts import (
    INCONCLUSIVE,
    NOT_SUPPORTED,
    SUPPORTED,
    auto_pool_against_explicit,
    context_per_slot,
    decode_speed_falls,
    linear_fit,
    prompts_stall_streams,
    throughput_diminishing,
    ttft_linear_in_load,
)
from workbench.engine.base.records import CONTEXT_FULL, RequestRecord
from workbench.engine.figures.per_run import summarize_run
from workbench.engine.figures.stalls import StallFigures
from workbench.engine.figures.steady_state import SteadyFigures
from workbench.engine.figures.summaries import ConfigSummary


def summary(
    slots: int,
    agg: float,
    ttft: float,
    decode: float,
    sd: float | None = None,
    n_ctx_slot: int | None = None,
    ctx: int = 8192,
    concurrency: int = 8,
):
    mean = {"agg_tok_s": agg, "ttft_p50_s": ttft, "decode_tok_s": decode}
    spread = {k: (sd * v if sd is not None else None) for k, v in mean.items()}
    return ConfigSummary(
        0,
        f"np={slots}",
        slots,
        ctx,
        n_ctx_slot,
        slots,
        False,
        True,
        concurrency,
        64,
        "ok",
        [],
        mean,
        spread,
    )


LAB = [summary(1, 14.1, 11.5, 16.3), summary(2, 19.8, 8.0, 12.8), summary(4, 27.0, 5.1, 9.8)]


def test_the_lab_table_supports_its_lessons():
    # The reference lab (Apple M4, 9B model): 14.1 -> 19.8 -> 27.0 tok/s is +5.7 then +3.6
    # per added slot: diminishing. TTFT against 8/N: 11.5, 8.0, 5.1 s is not linear in 8/N.
    assert throughput_diminishing(LAB).verdict == SUPPORTED
    assert decode_speed_falls(LAB).verdict == SUPPORTED
    verdict = ttft_linear_in_load(LAB)
    assert verdict.verdict in (SUPPORTED, INCONCLUSIVE, NOT_SUPPORTED)
    assert any("R^2" in n for n in verdict.numbers)


def test_throughput_verdicts():
    growing = [summary(1, 10, 1, 1), summary(2, 12, 1, 1), summary(4, 30, 1, 1)]
    assert throughput_diminishing(growing).verdict == NOT_SUPPORTED  # gains grow per slot
    falling = [summary(1, 30, 1, 1), summary(2, 20, 1, 1), summary(4, 10, 1, 1)]
    assert throughput_diminishing(falling).verdict == NOT_SUPPORTED
    noisy = [
        summary(1, 10, 1, 1, sd=0.2),
        summary(2, 11, 1, 1, sd=0.2),
        summary(4, 11.5, 1, 1, sd=0.2),
    ]
    assert throughput_diminishing(noisy).verdict == INCONCLUSIVE
    assert throughput_diminishing(LAB[:2]).verdict == INCONCLUSIVE  # too few points


def test_ttft_linearity():
    linear = [summary(n, 1, 0.5 + 0.25 * 8 / n, 1) for n in (1, 2, 4, 8)]
    verdict = ttft_linear_in_load(linear)
    assert verdict.verdict == SUPPORTED and "R^2 = 1.000" in verdict.numbers[-1]
    flat = [summary(1, 1, 3.0, 1), summary(2, 1, 1.0, 1), summary(4, 1, 3.1, 1)]
    assert ttft_linear_in_load(flat).verdict == NOT_SUPPORTED
    assert ttft_linear_in_load(LAB[:1]).verdict == INCONCLUSIVE
    assert linear_fit([0, 1, 2], [1, 3, 5]) == pytest.approx((1.0, 2.0, 1.0))


def test_an_over_saturated_configuration_leaves_ttft_linearity_open():
    linear = [summary(n, 1, 0.5 + 0.25 * 8 / n, 1) for n in (1, 2, 4, 8)]
    saturated = replace(
        summarize_run([]), steady=SteadyFigures(over_saturated="the queue grew 1.00 requests/s")
    )
    linear[0] = replace(linear[0], runs=[saturated])
    verdict = ttft_linear_in_load(linear)
    assert verdict.verdict == INCONCLUSIVE
    assert verdict.numbers[-1] == "over-saturated, TTFT grows with the run's length: np=1"


def test_context_per_slot():
    good = [summary(n, 1, 1, 1, n_ctx_slot=8192 // n) for n in (1, 2, 4)]
    assert context_per_slot(good).verdict == SUPPORTED
    padded = [summary(3, 1, 1, 1, n_ctx_slot=2816)]  # 8192/3 padded up to 256 cells
    assert context_per_slot(padded).verdict == SUPPORTED
    wrong = [summary(2, 1, 1, 1, n_ctx_slot=8192)]
    assert context_per_slot(wrong).verdict == NOT_SUPPORTED
    assert context_per_slot([summary(2, 1, 1, 1)]).verdict == INCONCLUSIVE


def test_context_per_slot_cites_the_requests_that_did_not_fit():
    """At 4 slots of 2,048 tokens, 3,000-token prompts are refused: the verdict says so, and
    the configuration is marked as not doing the same task."""
    refused = f"{CONTEXT_FULL}: request (3000 tokens) exceeds the available context size"
    records = [RequestRecord(0, 0, i, "p", t_submit_ns=1, error=refused) for i in range(3)]
    records.append(RequestRecord(0, 0, 3, "p", t_submit_ns=1, error="HTTP 503: busy"))
    four = replace(summary(4, 1, 1, 1, n_ctx_slot=2048), runs=[summarize_run(records)])
    one = summary(1, 1, 1, 1, n_ctx_slot=8192)
    verdict = context_per_slot([one, four])
    assert verdict.verdict == SUPPORTED
    expected = "3 of 4 requests did not fit the context (2048 tokens per slot)"
    assert verdict.numbers[-1] == f"-np 4: {expected}"
    assert four.not_same_task == expected and "not the same task" in four.flags
    assert four.trust_notes == [f"not the same task: {expected}"]  # the report says it too
    assert one.not_same_task is None and one.flags == []
    # Its zero throughput is not a lesson about slots: the speed verdicts leave it out.
    two = summary(2, 2, 1, 1, n_ctx_slot=4096)
    verdict = throughput_diminishing([one, two, four])
    assert (verdict.verdict, verdict.numbers) == (INCONCLUSIVE, ["needs 3 slot counts, has 2"])


def test_decode_speed():
    rising = [summary(1, 1, 1, 10), summary(2, 1, 1, 20)]
    assert decode_speed_falls(rising).verdict == NOT_SUPPORTED
    flat = [summary(1, 1, 1, 10, sd=0.1), summary(2, 1, 1, 10.1, sd=0.1)]
    assert decode_speed_falls(flat).verdict == INCONCLUSIVE


def test_a_small_uptick_inside_the_noise_does_not_reject_diminishing_returns():
    points = [
        summary(1, 14.1, 1, 1),
        summary(2, 19.8, 1, 1),
        summary(4, 27.0, 1, 1),
        summary(8, 41.9, 1, 1),
    ]  # +5.70, +3.60, +3.72 per added slot
    assert throughput_diminishing(points).verdict != NOT_SUPPORTED


def test_a_sweep_over_slots_and_ctx_is_judged_on_one_ctx():
    two_d = [
        summary(n, 10 * n**0.5, 8 / n, 20 / n, n_ctx_slot=c // n, ctx=c)
        for c in (4096, 8192)
        for n in (1, 2, 4)
    ]
    two_d.append(summary(4, 99, 1, 1, ctx=16384))  # another ctx with one slot count only
    for verdict in (
        throughput_diminishing(two_d),
        decode_speed_falls(two_d),
        ttft_linear_in_load(two_d),
    ):
        assert verdict.verdict == SUPPORTED, verdict
    assert context_per_slot(two_d).verdict == SUPPORTED


def test_one_slot_reads_one_slot():
    numbers = decode_speed_falls(LAB).numbers
    assert numbers[:3] == [
        "1 slot: 16.3 tok/s per request",
        "2 slots: 12.8 tok/s per request",
        "4 slots: 9.8 tok/s per request",
    ]


def test_the_auto_pool_against_explicit_slots():
    """What llama-server b11434 said for Gemma 3 270M at -c 8192: -np -1 is 4 slots sharing
    one pool of 8192 tokens, 61.5 MiB of KV (its windowed cache is one stream's); -np 4 is 4
    slots of 2048, 84.0 MiB. A session without the pair gets no such verdict."""
    auto = replace(
        summary(4, 20.0, 1.0, 5.0, n_ctx_slot=8192),
        kv_unified=True,
        kv_buffer_mib=61.5,
        auto_slots=True,
    )
    explicit = replace(summary(4, 20.0, 1.0, 5.0, n_ctx_slot=2048), kv_buffer_mib=84.0)
    verdict = auto_pool_against_explicit([auto, explicit])
    assert verdict is not None and verdict.verdict == SUPPORTED
    assert verdict.numbers == [
        "-np -1 -c 8192: 4 slots, one unified pool, up to 8192 tokens a request, KV 61.5 MiB",
        "-np 4 -c 8192: 4 slots, a cache each, up to 2048 tokens a request, KV 84.0 MiB",
        "the auto pool's KV is 0.73x the explicit slots' (61.5 against 84.0 MiB) and one "
        "request may use 8192 tokens, not 2048: concurrent long requests share the pool",
    ]
    split = replace(auto, kv_unified=False, n_ctx_slot=2048)
    assert auto_pool_against_explicit([split, explicit]).verdict == NOT_SUPPORTED
    assert auto_pool_against_explicit([explicit]) is None
    assert auto_pool_against_explicit([auto, replace(explicit, ctx=4096)]) is None


def test_a_slot_capped_at_the_training_context_is_what_the_server_does():
    """SmolLM2 (trained on 8192) at -np 2 -c 32768: llama-server gives each slot 8192, not
    16384 (measured), and says so; a slot of 16384 there would be the surprise."""
    capped = replace(summary(2, 20.0, 1.0, 5.0, n_ctx_slot=8192, ctx=32768), n_ctx_train=8192)
    verdict = context_per_slot([capped])
    assert verdict.verdict == SUPPORTED
    assert verdict.numbers == [
        "-np 2 -c 32768: n_ctx_slot 8192 (ctx/N = 16384, capped at the model's training "
        "context 8192)"
    ]
    assert context_per_slot([replace(capped, n_ctx_slot=16384)]).verdict == NOT_SUPPORTED


def stalled(label: str, *repeats: StallFigures, busy: str | None = None) -> ConfigSummary:
    runs = [replace(summarize_run([]), stalls=r, machine_busy=busy) for r in repeats]
    return replace(summary(4, 10.0, 1.0, 10.0), label=label, runs=runs)


def document(longest: float, ttft: float, prompts: int = 1) -> StallFigures:
    return StallFigures(
        stall_max_s=longest,
        stalled_by_prompts_share=1.0,
        stall_cause_tokens=2924,
        stall_cause_ttft_s=ttft,
        stall_cause_streams=3,
        stall_cause_prompts=prompts,
        ttft_held_max_s=0.0,
    )


def test_a_long_prompt_freezes_streams_and_a_smaller_batch_trades_it_for_ttft():
    """The long-prompt experiment's sweep as measured: 9.8 s, 1.9 s and 1.2 s freezes for a
    TTFT of 15.8 s, 17.3 s and 31.9 s. Each smaller -b is set against the worst."""
    found = prompts_stall_streams(
        [
            stalled("b=2048", document(9.8, 15.8)),
            stalled("b=256", document(1.9, 17.3)),
            stalled("b=64", document(1.2, 31.9)),
        ]
    )
    assert found is not None and found.verdict == SUPPORTED
    assert found.numbers[0] == (
        "b=2048: 3 streams froze up to 9.8 s while a 2,924-token prompt was processed "
        "(its TTFT 15.8 s); prompts caused 100% of the stalled time"
    )
    assert found.numbers[3:] == [
        "b=256 against b=2048: the longest freeze 1.9 s, not 9.8 s, for +9% on the prompt's TTFT",
        "b=64 against b=2048: the longest freeze 1.2 s, not 9.8 s, for +102% on the prompt's TTFT",
        "noise: a 5 % guess (no repeats in this session)",
    ]


def test_repeats_measure_the_stall_verdicts_noise():
    """Two repeats each: a 0.3 s difference inside 2 sd of freezes that vary by 0.6 s, and
    TTFTs that did not vary at all, so their 0.5 s difference is real."""
    found = prompts_stall_streams(
        [
            stalled("b=2048", document(2.0, 10.0), document(2.6, 10.0)),
            stalled("b=1024", document(2.0, 10.5), document(2.0, 10.5)),
        ]
    )
    assert found is not None
    assert found.numbers[2] == (
        "b=1024 against b=2048: the longest freeze 2.0 s, not 2.3 s (within noise), for +5% "
        "on the prompt's TTFT"
    )
    assert found.numbers[-1] == "noise: 2 sd across repeats"


def test_stalls_with_no_prompt_their_cause():
    """No stall, no verdict; stalls no prompt covered: inconclusive, and where the server
    gave no timings the verdict says so. Several prompts admitted together are named, and a
    busy machine leaves the verdict open."""
    calm = StallFigures(stalled_stream_share=0.0, stalled_s=0.0, ttft_held_max_s=0.0)
    assert prompts_stall_streams([stalled("np=4", calm)]) is None
    untimed = StallFigures(stall_max_s=1.5, stalled_by_prompts_share=0.0)
    found = prompts_stall_streams([stalled("vllm", untimed)])
    assert found is not None and found.verdict == INCONCLUSIVE
    assert found.numbers == [
        "vllm: streams froze up to 1.5 s, the longest with no prompt its cause; prompts "
        "caused 0% of the stalled time",
        "the server gave no timings to place prompts by, or no prompt's processing covered "
        "the stalls",
    ]
    queue = replace(document(0.9, 4.7, prompts=3), stall_cause_tokens=54, stall_cause_streams=1)
    found = prompts_stall_streams([stalled("np=4", queue)])
    assert found is not None and found.verdict == SUPPORTED
    assert found.numbers[0].startswith(
        "np=4: 1 stream froze up to 0.9 s while a 54-token prompt was processed with 2 others"
    )
    busy = prompts_stall_streams([stalled("np=4", queue, busy="load 3.1 on 2 cores")])
    assert busy is not None and busy.verdict == INCONCLUSIVE
    assert "busy machine at np=4: load 3.1 on 2 cores" in busy.numbers
