"""The scheduler model against loads whose answers are known by hand: constant step costs,
so every wait, first token and end is a sum of steps."""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import replace

import pytest

from tests.made_sessions import server_of, workload_of
from workbench.engine.analysis.export import concurrency_columns, concurrency_row
from workbench.engine.base.errors import ExperimentError
from workbench.engine.base.records import StartupFacts
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.settings import validated_as
from workbench.engine.figures.per_request import request_metrics
from workbench.engine.figures.summaries import summarize
from workbench.engine.predict.costs import DecodeCost, MicroBatchCost, PrefillCost, StepCosts
from workbench.engine.predict.scheduler_model import (
    Predicted,
    Request,
    ServerShape,
    predict,
    predicted_records,
)

# A generating step costs 10 ms (+ 5 ms a sequence where asked); a prompt 0.5 ms a token.
FLAT = StepCosts(DecodeCost(10.0, 0.0, 0.0), PrefillCost(0.0, 0.5))
PER_SEQUENCE = StepCosts(DecodeCost(10.0, 5.0, 0.0), PrefillCost(0.0, 0.5))
ONE_SLOT = ServerShape(slots=1, ctx_per_slot=2048)
# How llama-server logs the slot it chose for a task (server-context.cpp, get_available_slot).
SELECTED = re.compile(r"id +(\d+) \| task -?\d+ \| selected slot by (LRU|LCP similarity)")


def approx(values):
    return pytest.approx(values, abs=1e-9)


def test_one_slot_serves_a_burst_first_come_first_served_each_waiting_for_those_before():
    """100-token prompts (50 ms) and 5 tokens (the first from the prompt's step, then 4
    steps of 10 ms): 90 ms each, so request k waits k x 90 ms for the slot."""
    done = predict([Request(0.0, 100, 5)] * 3, ONE_SLOT, FLAT)
    assert [p.slot for p in done] == [0, 0, 0]
    assert [p.taken_s for p in done] == approx([0.0, 0.09, 0.18])
    assert [p.first_token_s for p in done] == approx([0.05, 0.14, 0.23])
    assert [p.done_s for p in done] == approx([0.09, 0.18, 0.27])
    assert done[0].token_times_s == approx((0.05, 0.06, 0.07, 0.08, 0.09))
    metrics = [request_metrics(r) for r in predicted_records(done)]
    assert [m.queue_wait_s for m in metrics if m] == approx([0.0, 0.09, 0.18])
    assert [m.ttft_s for m in metrics if m] == approx([0.05, 0.14, 0.23])
    assert [m.e2e_s for m in metrics if m] == approx([0.09, 0.18, 0.27])


def test_two_slots_decode_together_at_the_two_sequence_step_cost():
    """Both prompts in one batch (100 ms), then 4 steps of 10 + 2 x 5 ms. The first task
    takes the last of the never-used slots (get_available_slot's LRU ties with ``<=``)."""
    done = predict([Request(0.0, 100, 5)] * 2, ServerShape(2, 1024), PER_SEQUENCE)
    assert [p.slot for p in done] == [1, 0]
    for p in done:
        assert p.taken_s == 0.0 and p.first_token_s == approx(0.1)
        assert p.token_times_s == approx((0.1, 0.12, 0.14, 0.16, 0.18))


def test_continuous_batching_starts_a_new_prompt_beside_a_decode_and_nocb_waits_for_it():
    """A generates from 50 ms, a token each 15 ms; B arrives at 60 ms. With continuous
    batching B's prompt (50 ms) joins A's next step, which stretches A's gap to 65 ms; with
    -nocb a prompt enters only a batch no slot is generating in, so B starts when A ends."""
    load = [Request(0.0, 100, 5), Request(0.06, 100, 5)]
    a, b = predict(load, ServerShape(2, 1024), PER_SEQUENCE)
    assert b.taken_s == approx(0.065) and b.prompt_start_s == approx(0.065)
    assert b.first_token_s == approx(0.13) and a.token_times_s[2] == approx(0.13)
    a, b = predict(load, ServerShape(2, 1024, cont_batching=False), PER_SEQUENCE)
    assert a.token_times_s == approx((0.05, 0.065, 0.08, 0.095, 0.11))
    assert b.taken_s == approx(0.065)  # it has its slot, but not its prompt's turn
    assert b.prompt_start_s == approx(0.11) and b.first_token_s == approx(0.16)


def test_a_long_prompt_is_chunked_by_the_batch_and_other_slots_decode_between_its_chunks():
    """-b 64 with A generating: each step carries A's token and 63 of B's 189 prompt
    tokens, so B's prompt takes 3 steps and A gets a token after each."""
    load = [Request(0.0, 10, 10), Request(0.001, 189, 2)]
    a, b = predict(load, ServerShape(2, 1024, batch_size=64), FLAT)
    assert b.prompt_start_s == approx(0.005)  # A's prompt step ended there
    step = 0.010 + 63 * 0.0005
    assert b.first_token_s == approx(0.005 + 3 * step)
    assert a.token_times_s[:4] == approx(tuple(0.005 + k * step for k in range(4)))


def test_alone_a_prompt_of_three_batches_takes_three_steps():
    """Each step's prompt costs its 2 ms base once: 192 tokens at -b 64 are 3 steps."""
    costs = StepCosts(DecodeCost(10.0, 0.0, 0.0), PrefillCost(2.0, 0.5))
    (p,) = predict([Request(0.0, 192, 1)], ServerShape(1, 1024, batch_size=64), costs)
    assert p.first_token_s == approx(3 * 0.002 + 192 * 0.0005)
    (whole,) = predict([Request(0.0, 192, 1)], ServerShape(1, 1024), costs)
    assert whole.first_token_s == approx(0.002 + 192 * 0.0005)


def test_a_smaller_ub_makes_a_long_prompt_and_the_freeze_it_causes_longer():
    """-b 2048, A generating while B's 2,000 tokens arrive: at -ub 64 B's step runs 32
    micro-batches where the calibration's -ub 512 ran 4, each with its base and a pass over
    the cache it starts on: that much longer B's prompt and A's gap."""
    each = MicroBatchCost(2.0, 0.01, 64)
    costs = replace(FLAT, micro_batch=each)
    load = [Request(0.0, 10, 10), Request(0.001, 2000, 2)]
    gaps: dict[int | str, float] = {}
    for ubatch in (512, 64):
        a, b = predict(load, ServerShape(2, 4096, ubatch_size=ubatch), costs)
        gaps[ubatch] = longest_gap(a)
        assert b.first_token_s is not None and b.prompt_start_s is not None
        gaps[f"prompt {ubatch}"] = b.first_token_s - b.prompt_start_s
    besides = (each.ms(2000, 0, 64) - each.ms(2000, 0, 512)) / 1000
    assert gaps[64] - gaps[512] == approx(besides)
    assert gaps["prompt 64"] - gaps["prompt 512"] == approx(besides)
    # without the micro-batch's cost the model does not price -ub: the same gap at both
    a, _ = predict(load, ServerShape(2, 4096, ubatch_size=64), FLAT)
    assert longest_gap(a) == approx(gaps[512])


def longest_gap(p: Predicted) -> float:
    return max(y - x for x, y in itertools.pairwise(p.token_times_s))


def test_several_waiting_prompts_share_one_batch_in_slot_order():
    """-b 150: slot 0's 100 tokens first, then 50 of slot 1's; the rest next step."""
    a, b = predict([Request(0.0, 100, 1)] * 2, ServerShape(2, 1024, batch_size=150), FLAT)
    assert (a.slot, b.slot) == (1, 0)
    assert b.first_token_s == approx(0.075)  # slot 0's whole prompt in the first step
    assert a.first_token_s == approx(0.075 + 0.025)


def test_a_prompt_as_long_as_its_slot_is_refused_and_frees_the_slot_at_once():
    """The server's rule (``n_tokens >= n_ctx``) and words, as the client records them; the
    next request takes the slot in the same instant."""
    refused, served = predict([Request(0.0, 2048, 8), Request(0.0, 100, 1)], ONE_SLOT, FLAT)
    assert refused.refused is not None and refused.token_times_s == ()
    assert refused.done_s == 0.0 and served.taken_s == 0.0
    assert served.first_token_s == approx(0.05)
    record, ok = predicted_records([refused, served])
    assert record.http_status == 400 and record.context_full and not record.ok
    assert "request (2048 tokens) exceeds the available context size (2048 tokens)" in (
        record.error or ""
    )
    assert ok.ok and ok.error is None


def test_an_answer_that_fills_its_slot_stops_short_as_the_real_server_does():
    """tests/engine/measure/test_sized_prompts_real.py measured it: a 400-token prompt in a
    512-token slot makes 512 - 400 tokens of 200 asked, and the client says why."""
    (p,) = predict([Request(0.0, 400, 200)], ServerShape(1, 512), FLAT)
    assert len(p.token_times_s) == 112 and p.truncated
    (record,) = predicted_records([p])
    assert not record.ok and record.context_full
    assert record.error == (
        "did not fit the slot's context: the server stopped at 112 of 200 tokens after a "
        "prompt of 400 tokens (finish_reason length: the context filled up)"
    )


def test_a_warm_slot_evaluates_only_the_prompts_uncached_tail():
    """The second of two identical prompts evaluates one token (the server needs one for
    its logits); a shared 400-token opening leaves the other 100; without cache_prompt
    everything is evaluated again."""

    def second(first: Request, then: Request) -> Predicted:
        return predict([first, then], ONE_SLOT, FLAT)[1]

    same = Request(0.0, 400, 2, prefix="doc", shared_tokens=400)
    again = second(same, Request(1.0, 400, 2, prefix="doc", shared_tokens=400))
    assert (again.cached_tokens, again.processed_tokens) == (399, 1)
    assert again.first_token_s - again.prompt_start_s == approx(0.0005)
    opening = Request(0.0, 500, 2, prefix="system", shared_tokens=400)
    tail = second(opening, Request(1.0, 500, 2, prefix="system", shared_tokens=400))
    assert (tail.cached_tokens, tail.processed_tokens) == (400, 100)
    cold = second(same, Request(1.0, 400, 2, prefix="doc", shared_tokens=400, cache_prompt=False))
    assert (cold.cached_tokens, cold.processed_tokens) == (0, 400)
    (record,) = predicted_records([tail])
    assert record.timings is not None
    assert (record.timings["cache_n"], record.timings["prompt_n"]) == (400, 100)
    assert record.timings["prompt_ms"] == approx(50.0)


def test_a_conversations_next_turn_reuses_the_answer_before_it():
    """A turn whose prompt is its prefix whole keeps its answer (but the last token,
    never decoded) in the slot: the next turn, which opens with both, reuses them."""
    turn = Request(0.0, 300, 20, prefix="chat", shared_tokens=300)
    (_, nxt) = predict(
        [turn, Request(1.0, 350, 20, prefix="chat", shared_tokens=320)], ONE_SLOT, FLAT
    )
    assert nxt.cached_tokens == 300 + 20 - 1


def test_a_free_slot_is_chosen_by_the_share_of_the_prompt_its_cache_holds():
    """Slot 1 served "a", slot 0 "b"; the next "b" goes back to slot 0 (LRU would have
    chosen slot 1, idle longer) and finds its prefix cached."""
    load = [
        Request(0.0, 100, 2, prefix="a", shared_tokens=80),
        Request(1.0, 100, 2, prefix="b", shared_tokens=80),
        Request(2.0, 100, 2, prefix="b", shared_tokens=80),
    ]
    done = predict(load, ServerShape(2, 1024), FLAT)
    assert [p.slot for p in done] == [1, 0, 0]
    assert done[2].cached_tokens == 80


def test_nothing_is_sent_before_it_is_due():
    """Poisson arrivals at 20 a second to 2 slots: each request goes at its time (no
    client-side limit), and reaches a slot no sooner than the request overhead after."""
    rng = random.Random(25)
    due, t = [], 0.0
    for _ in range(40):
        t += rng.expovariate(20.0)
        due.append(t)
    costs = StepCosts(DecodeCost(10.0, 5.0, 0.0), PrefillCost(0.0, 0.5), request_overhead_ms=3)
    done = predict([Request(d, 60, 8) for d in due], ServerShape(2, 1024), costs)
    assert [p.sent_s for p in done] == due
    assert all(p.arrived_s == approx(p.sent_s + 0.003) for p in done)
    assert all(p.taken_s is not None and p.taken_s >= p.arrived_s for p in done)
    assert any(p.taken_s > p.arrived_s for p in done)  # some waited for a slot or a step


def test_a_client_side_concurrency_limit_holds():
    """6 requests at once, 4 slots, 2 in flight at most: each next one goes when one ends."""
    done = predict([Request(0.0, 100, 5)] * 6, ServerShape(4, 1024), FLAT, concurrency=2)
    for t in sorted({p.sent_s for p in done} | {p.done_s for p in done}):
        assert sum(p.sent_s <= t < p.done_s for p in done) <= 2
    ends = sorted(p.done_s for p in done)
    assert sorted(p.sent_s for p in done)[2:] == approx(ends[:4])


def test_the_summary_of_a_prediction_has_the_hand_computed_figures_under_the_csvs_names():
    """The one-slot burst through ``summarize``, as a measured run's records go: TTFT
    50/140/230 ms, 15 tokens in 270 ms, a 10 ms TPOT; the concurrency.csv row has them."""
    records = predicted_records(predict([Request(0.0, 100, 5)] * 3, ONE_SLOT, FLAT))
    summary = summarize(
        0,
        "np=1",
        server_of({"slots": 1, "ctx": 2048}),
        workload_of({"requests": 3, "max_tokens": 5, "warmup": 0}),
        StartupFacts(n_slots=1, n_ctx_slot=2048, n_ctx=2048),
        records,
    )
    (run,) = summary.runs
    assert run.ttft_p50_s == approx(0.14) and run.ttft_max_s == approx(0.23)
    assert run.agg_tok_s == approx(15 / 0.27)
    assert run.tpot_p50_ms == approx(10.0) and run.itl_max_ms == approx(10.0)
    assert run.queue_wait_p50_s == approx(0.09) and run.e2e_p50_s == approx(0.18)
    assert (run.ok, run.failed, run.output_tokens) == (3, 0, 15)
    row = concurrency_row(summary)
    assert set(row) <= set(concurrency_columns())
    assert float(row["ttft_p50_s"]) == approx(0.14)


def test_a_shape_comes_from_a_servers_settings():
    assert ServerShape.of(ServerSettings(slots=4, ctx=8192)) == ServerShape(4, 2048)
    unified = ServerShape.of(ServerSettings(slots=4, ctx=8192, kv_unified=True, batch_size=512))
    assert (unified.ctx_per_slot, unified.batch_size) == (8192, 512)
    # -ub as the server runs it: never more than -b
    assert ServerShape.of(ServerSettings(slots=1, ctx=4096, ubatch_size=128)).ubatch_size == 128
    assert ServerShape.of(ServerSettings(slots=1, ctx=4096, batch_size=64)).ubatch_size == 64
    assert (
        ServerShape.of(ServerSettings(slots=2, ctx=4096, cont_batching=False)).cont_batching
        is False
    )
    with pytest.raises(ExperimentError, match="ctx = 0"):
        ServerShape.of(ServerSettings(slots=1, ctx=0))
    # llama-server caps a slot at the model's training context (SmolLM2's 8192 at -c 32768)
    assert ServerShape.of(ServerSettings(slots=1, ctx=32768), train_ctx=8192).ctx_per_slot == 8192
    assert ServerShape.of(ServerSettings(slots=1, ctx=32768)).ctx_per_slot == 32768


@pytest.mark.server
def test_the_real_server_picks_slots_as_the_model_does(recorded_session):
    """get_available_slot's rules as the real server logs them at 2 slots: the warm-up found
    both slots unused and took the last (LRU ties go to the last slot), and the first
    measured request went back to it by the share of its prompt the slot held (the built-in
    prompts share over half their tokens), where LRU alone would have chosen slot 0."""
    (log,) = recorded_session.parent.glob("logs/*/config-1-*.log")
    found = (SELECTED.search(line) for line in log.read_text().splitlines())
    picks = [(int(m[1]), m[2]) for m in found if m]
    assert picks[:2] == [(1, "LRU"), (1, "LCP similarity")]
    chat = {"prefix": "chat template and opening", "shared_tokens": 25}
    load = [Request(0.0, 50, 12, **chat), Request(10.0, 47, 12, **chat)]
    assert [p.slot for p in predict(load, ServerShape(2, 1024), FLAT)] == [1, 1]


@pytest.mark.server
def test_without_continuous_batching_the_real_server_starts_a_prompt_only_when_none_generates(
    tmp_path,
):
    """The -nocb rule the model follows, in the real server's own log (one clock, one
    thread): no task's prompt starts while another task is generating. Of 3 requests at 2
    slots, those the HTTP threads hand over during a step wait for it; one that gets a
    freed slot while the other slot generates holds it, its prompt not begun, until that
    one ends (the model: its prompt starts when both others are done)."""
    from workbench.engine.config.experiment import parse_experiment
    from workbench.engine.run.lifecycle import run_experiment
    from workbench.engine.run.runner import RunOptions

    experiment = parse_experiment(
        "name = 'nocb'\n[server]\nslots = 2\nctx = 2048\ncont_batching = false\n"
        "[workload]\nrequests = 3\nmax_tokens = 16\nwarmup = 0\n"
    )
    result = run_experiment(experiment, RunOptions(tmp_path))
    assert [s.value("ok") for s in result.summaries] == [3]
    (log,) = tmp_path.glob("logs/*/config-0-*.log")
    tasks = _tasks_in_log(log.read_text())
    assert len(tasks) == 3
    for start, _, _ in tasks.values():
        assert not any(first < start < end for _, first, end in tasks.values())
    load = [Request(0.0, 50, 16)] * 3
    *two, third = predict(load, ServerShape(2, 1024, cont_batching=False), PER_SEQUENCE)
    assert third.prompt_start_s == max(p.done_s for p in two)


# llama-server's log lines (server-context.cpp): a prompt's start, its time at release,
# the release; each stamped minutes.seconds.ms.us by common_log.
LOG_LINE = re.compile(
    r"^(\d+)\.(\d+)\.(\d+)\.(\d+) I slot .*\| task (\d+) \| "
    r"(new prompt|prompt eval time = +([\d.]+) ms|stop processing)"
)


def _tasks_in_log(text: str) -> dict[int, tuple[float, float, float]]:
    """Each task's prompt start, first token (start + its prompt eval time) and release."""
    seen: dict[int, dict[str, float]] = {}
    for line in text.splitlines():
        if m := LOG_LINE.match(line):
            at = int(m[1]) * 60 + int(m[2]) + int(m[3]) / 1e3 + int(m[4]) / 1e6
            what = m[6].split(" ")[0] if m[7] is None else "prompt_ms"
            seen.setdefault(int(m[5]), {})[what] = float(m[7]) / 1e3 if m[7] else at
    return {
        task: (t["new"], t["new"] + t["prompt_ms"], t["stop"])
        for task, t in seen.items()
        if {"new", "prompt_ms", "stop"} <= set(t)
    }


def test_a_per_slot_limit_is_each_slots_context_in_its_shared_pool():
    """``kv_unified_per_slot``: 2 slots of a 2048-token pool, each request at most 1024."""
    settings = validated_as(ServerSettings, {"slots": 2, "kv_unified_per_slot": 1024})
    assert ServerShape.of(settings) == ServerShape(2, 1024)
    refused, served = predict(
        [Request(0.0, 1024, 1), Request(0.0, 100, 1)], ServerShape.of(settings), FLAT
    )
    assert refused.refused is not None and served.refused is None
