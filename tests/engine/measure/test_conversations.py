"""Conversations against a fake server that answers each question with its own text: every
turn carries the conversation so far with the real answers, goes after the previous answer
and the think time, and a failed turn ends its conversation only."""

from __future__ import annotations

import asyncio
import itertools
import random
from typing import Any

import pytest

from tests.fakes.sse_server import Behaviour, FakeServer
from workbench.engine.config.experiment import (
    ConversationsWorkload,
)
from workbench.engine.events import RequestFinished
from workbench.engine.measure.conversations import (
    plan_conversations,
    run_conversations,
    think_time_ns,
)
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.measure.workload import make_client, plan_records

THINK_S = 0.05
QUESTIONS = [f"q{i}" for i in range(6)]  # turn by turn: q0 and q1 are the two first turns


def answering(fail: str | None = None):
    """Each question answered "A[question]" in two chunks; ``fail`` refused with HTTP 500."""

    def behaviour(body: dict[str, Any]) -> Behaviour:
        question = body["messages"][-1]["content"]
        if question == fail:
            return Behaviour(status=500, error_body='{"error": "no"}')
        return Behaviour(tokens=2, texts=(f"A[{question}", "]"))

    return behaviour


def converse(
    fail: str | None = None, system: str = "", spread: str = "fixed"
) -> tuple[list, list, list]:
    workload = ConversationsWorkload(
        users=2,
        turns=3,
        think_time_s=THINK_S,
        think_time_spread=spread,
        max_tokens=2,
        request_timeout_s=5.0,
        cache_prompt=True,
    )
    records = plan_records(0, 0, 0, workload.per_repeat, PromptSource(QUESTIONS))
    conversations = plan_conversations(records, workload.users, system)
    events: list = []

    async def run() -> list:
        async with FakeServer(answering(fail)) as server:
            async with make_client(server.base_url, workload) as client:
                await run_conversations(client, workload, conversations, events.append)
            return server.completions

    received = asyncio.run(run())
    return conversations, received, events


def test_each_turn_carries_the_conversation_with_its_real_answers():
    conversations, received, events = converse(system="Be brief.")
    assert [c.id for c in conversations] == ["r1u1", "r1u2"]
    first = conversations[0]
    assert [(r.prompt, r.conversation_id, r.turn) for r in first.turns] == [
        ("q0", "r1u1", 1),
        ("q2", "r1u1", 2),
        ("q4", "r1u1", 3),
    ]
    bodies = {r.body["messages"][-1]["content"]: r.body for r in received}
    assert len(bodies) == 6
    assert bodies["q4"]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "q0"},
        {"role": "assistant", "content": "A[q0]"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "A[q2]"},
        {"role": "user", "content": "q4"},
    ]
    assert bodies["q1"]["messages"][1:] == [{"role": "user", "content": "q1"}]
    assert all(b["cache_prompt"] is True for b in bodies.values())
    assert sum(isinstance(e, RequestFinished) for e in events) == 6


@pytest.mark.parametrize("spread", ["fixed", "exponential"])
def test_a_turn_goes_after_the_previous_answer_and_the_think_time(spread):
    conversations, _, _ = converse(spread=spread)
    pauses = []
    for conversation in conversations:
        first = conversation.turns[0]
        assert first.t_intended_ns == first.t_ready_ns
        for before, after in itertools.pairwise(conversation.turns):
            assert before.ok and after.ok
            assert before.t_done_ns is not None and after.t_submit_ns is not None
            assert after.t_intended_ns == after.t_ready_ns
            pauses.append(after.t_intended_ns - before.t_done_ns)
            assert after.t_submit_ns >= after.t_intended_ns
    if spread == "fixed":
        assert pauses == [THINK_S * 1e9] * 4
    else:  # drawn from each turn's seed: the same every run, one pause unlike another
        workload = ConversationsWorkload(think_time_s=THINK_S, think_time_spread=spread)
        assert pauses == [
            think_time_ns(workload, before) for c in conversations for before in c.turns[:-1]
        ]
        assert len(set(pauses)) == 4 and all(p > 0 for p in pauses)
        assert think_time_ns(workload, conversations[0].turns[0]) == round(
            random.Random(42 + 0).expovariate(1 / THINK_S) * 1e9
        )


def test_a_failed_turn_ends_its_conversation_and_no_other():
    conversations, received, events = converse(fail="q2")
    failed, going_on = conversations
    assert [r.ok for r in failed.turns] == [True, False, False]
    assert failed.turns[1].error is not None and "HTTP 500" in failed.turns[1].error
    assert failed.turns[2].error == "not sent: turn 2 of its conversation failed"
    assert failed.turns[2].t_submit_ns is None
    assert all(r.ok for r in going_on.turns)
    assert "q4" not in {r.body["messages"][-1]["content"] for r in received}
    assert sum(isinstance(e, RequestFinished) for e in events) == 6
