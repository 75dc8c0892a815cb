"""A trace's and conversations' traffic through the scheduler model, against answers worked
out by hand: a generating step costs 10 ms, a prompt 1 ms a token, nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.engine.base.records import RequestRecord
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.figures.conversation_cache import turn_caches
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.predict.calibration import ChatTokens
from workbench.engine.predict.costs import DecodeCost, PrefillCost, StepCosts
from workbench.engine.predict.scheduler_model import Request, ServerShape, predict
from workbench.engine.predict.sweep import PredictedConfig, predict_experiment

FLAT = StepCosts(DecodeCost(10.0, 0.0, 0.0), PrefillCost(0.0, 1.0))
CHAT = ChatTokens(prompt=30, system_prompt=14, exchange=11, opening=24, system_opening=8)


def predicted(tmp_path: Path, server: str, workload: str) -> PredictedConfig:
    text = f"name = 'p'\n[server]\nctx = 8192\n{server}\n[workload]\nwarmup = 0\n{workload}"
    (only,) = predict_experiment(
        parse_experiment(text), FLAT, PromptSource(), 30, tmp_path, chat=CHAT
    )
    return only


def trace(tmp_path: Path, rows: list[dict]) -> str:
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return "arrival = 'trace'\ntrace = 't.jsonl'\nendpoint = 'completion'\n"


def by_index(config: PredictedConfig) -> list[RequestRecord]:
    return sorted(config.records, key=lambda r: r.index)


def ttft_s(record: RequestRecord) -> float:
    return seconds(record.t_first_token_ns) - seconds(record.t_submit_ns)


def seconds(ns: int | None) -> float:
    assert ns is not None
    return ns / 1e9


def test_a_trace_on_one_slot_is_served_first_come_first_served_each_waiting_its_turn(tmp_path):
    """Rows at 0, 0 and 100 ms: the first prefills 100 ms and generates 2 more tokens (done
    at 120 ms); the second waits for it (taken at 120 ms, first token at 170 ms, done at 180
    ms); the third, due at 100 ms, waits until 180 ms and has its token at 200 ms."""
    workload = trace(
        tmp_path,
        [
            {"timestamp": 0, "input_length": 100, "output_length": 3},
            {"timestamp": 0, "input_length": 50, "output_length": 2},
            {"timestamp": 100, "input_length": 20, "output_length": 1},
        ],
    )
    config = predicted(tmp_path, "slots = 1", workload)
    assert config.config.workload.requests == 3  # the rows, as the run's setup counts them
    first, second, third = by_index(config)
    assert [ttft_s(r) for r in (first, second, third)] == pytest.approx([0.10, 0.17, 0.10])
    assert [seconds(r.t_intended_ns) for r in (first, second, third)] == pytest.approx(
        [0.0, 0.0, 0.1]
    )
    assert [seconds(r.t_done_ns) for r in (first, second, third)] == pytest.approx(
        [0.12, 0.18, 0.20]
    )
    assert config.summary.value("queue_wait_max_s") == pytest.approx(0.12)


def test_a_traces_concurrency_limit_counts_its_rows_not_the_requests_setting(tmp_path):
    """requests = 1 is replaced by the trace's 2 rows, as the run's setup replaces it: with
    no concurrency limit both rows go at once, and on 2 slots neither waits."""
    workload = trace(
        tmp_path,
        [
            {"timestamp": 0, "input_length": 100, "output_length": 1},
            {"timestamp": 0, "input_length": 100, "output_length": 1},
        ],
    )
    config = predicted(tmp_path, "slots = 2", workload + "requests = 1\n")
    assert [ttft_s(r) for r in by_index(config)] == pytest.approx([0.2, 0.2])


def test_a_sessions_later_turn_is_due_its_delay_after_the_turn_before_it_ended(tmp_path):
    workload = trace(
        tmp_path,
        [
            {"session_id": "a", "timestamp": 0, "input_length": 100, "output_length": 2},
            {"session_id": "a", "delay": 500, "input_length": 10, "output_length": 1},
        ],
    )
    first, later = by_index(predicted(tmp_path, "slots = 1", workload))
    assert seconds(first.t_done_ns) == pytest.approx(0.11)
    assert seconds(later.t_intended_ns) == pytest.approx(0.61)
    assert seconds(later.t_first_token_ns) == pytest.approx(0.62)


def test_rows_that_share_hash_ids_share_those_blocks_in_the_cache(tmp_path):
    """Blocks of 16 tokens: the second row shares its first two with the first row, so a
    slot that served the first processes only its last 8 tokens."""
    workload = trace(
        tmp_path,
        [
            {"timestamp": 0, "input_length": 40, "output_length": 1, "hash_ids": [1, 2, 3]},
            {"timestamp": 1000, "input_length": 40, "output_length": 1, "hash_ids": [1, 2, 4]},
            {"timestamp": 2000, "input_length": 40, "output_length": 1, "hash_ids": [5, 2, 3]},
        ],
    )
    with_cache = workload + "block_size = 16\ncache_prompt = true\n"
    records = by_index(predicted(tmp_path, "slots = 1", with_cache))
    assert [r.timings["cache_n"] for r in records] == [0, 32, 0]
    assert [r.timings["prompt_n"] for r in records] == [40, 8, 40]


def conversations(tmp_path: Path, slots: int, extra: str = "") -> PredictedConfig:
    return predicted(
        tmp_path,
        f"slots = {slots}",
        "kind = 'conversations'\nusers = 2\nturns = 2\nuser_tokens = 100\nmax_tokens = 5\n" + extra,
    )


def turn(records: list[RequestRecord], cid: str, number: int) -> RequestRecord:
    (found,) = [r for r in records if r.conversation_id == cid and r.turn == number]
    return found


def test_two_conversations_on_one_slot_evict_each_others_history(tmp_path):
    """Turn 1 is the template's 30 tokens and the message's 100; turn 2 adds the 5-token
    answer, the 11 tokens of an exchange and the next 100. Each turn waits for the slot,
    and the deferred one takes it first: user 2's first turn before user 1's second, which
    before user 2's second. So each later turn finds the other conversation's prompt in
    the cache: only the template's opening (24 tokens) is reused, the rest of its history
    processed again."""
    config = conversations(tmp_path, 1)
    records = config.records
    assert [(r.conversation_id, r.turn) for r in by_index(config)] == [
        ("r1u1", 1), ("r1u2", 1), ("r1u1", 2), ("r1u2", 2),
    ]  # fmt: skip
    assert [r.prompt_tokens for r in by_index(config)] == [130, 130, 246, 246]
    taken = sorted(records, key=lambda r: seconds(r.t_first_token_ns))
    assert [(r.conversation_id, r.turn) for r in taken] == [
        ("r1u1", 1), ("r1u2", 1), ("r1u1", 2), ("r1u2", 2),
    ]  # fmt: skip
    later = [turn(records, cid, 2) for cid in ("r1u1", "r1u2")]
    assert [(r.timings["cache_n"], r.timings["prompt_n"]) for r in later] == [(24, 222)] * 2
    caches = turn_caches(records)
    assert all(caches[r.key].lost for r in later)
    assert config.summary.value("lost_turns") == 2
    assert config.summary.value("reprefilled_tokens") == 2 * (130 - 24)


def test_two_conversations_on_two_slots_prefill_only_their_new_message(tmp_path):
    """Each conversation comes back to the slot that holds its history: its later turn
    processes the exchange's 11 tokens, the new message's 100 and the answer's last token
    (sampled, never decoded)."""
    config = conversations(tmp_path, 2)
    later = [r for r in config.records if r.turn == 2]
    assert [(r.timings["cache_n"], r.timings["prompt_n"]) for r in later] == [(134, 112)] * 2
    assert config.summary.value("later_cache_share") == pytest.approx(1.0)
    assert config.summary.value("lost_turns") == 0
    # both first turns prefill in one step of 260 tokens; both later ones in one of 224
    assert config.summary.value("later_ttft_p50_s") == pytest.approx(0.224)


def test_a_think_time_delays_each_later_turn(tmp_path):
    config = conversations(tmp_path, 2, "think_time_s = 2.0\n")
    first, later = turn(config.records, "r1u1", 1), turn(config.records, "r1u1", 2)
    assert seconds(later.t_intended_ns) - seconds(first.t_done_ns) == pytest.approx(2.0)


def test_a_pinned_conversation_waits_for_its_own_slot_though_another_is_free():
    """Three users on two slots, pinned: user 3 asks for slot 0 (3 - 1 mod 2), which user 1
    holds, and waits for it although slot 1 frees first."""
    long, short = Request(0.0, 10, 50, pinned=True), Request(0.0, 10, 1, pinned=True)
    one, two, three = predict([long, short, short], ServerShape(2, 4096), FLAT, users=3)
    assert (one.slot, two.slot, three.slot) == (0, 1, 0)
    assert three.taken_s == pytest.approx(one.done_s)
    free = predict([long, short, replace_pin(short)], ServerShape(2, 4096), FLAT, users=3)
    assert free[2].slot == 1 and free[2].taken_s == pytest.approx(free[1].done_s)


def replace_pin(request: Request) -> Request:
    return Request(request.due_s, request.prompt_tokens, request.max_tokens)


def test_a_conversations_turns_after_a_refused_one_are_not_sent():
    """A turn too long for its slot is refused: the turn after it is never sent."""
    turns = [Request(0.0, 5000, 2), Request(0.0, 5100, 2, after=0)]
    refused, unsent = predict(turns, ServerShape(1, 4096), FLAT, users=1)
    assert refused.refused and unsent.unsent and unsent.token_times_s == ()


def test_the_next_conversation_starts_on_the_user_that_ended_one():
    """Two users, three one-turn conversations: the third starts when the first ends."""
    first, second, third = (Request(0.0, 100, n) for n in (1, 30, 1))
    done = predict([first, second, third], ServerShape(2, 4096), FLAT, users=2)
    assert done[2].sent_s == pytest.approx(done[0].done_s)
