"""A conversations file replayed against a fake server that answers each question with its
own text: each turn sends the conversation's recorded user messages so far with the server's
real answers (never the recorded ones), ``users`` conversations at once with the next one of
the file starting when one ends, and ``id_slot = "conversation"`` asks for each one's slot."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from tests.fakes.sse_server import Behaviour, FakeServer
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.experiment import ConversationsWorkload
from workbench.engine.events import RequestFinished
from workbench.engine.measure.conversations import (
    RecordedConversation,
    plan_replay,
    run_conversations,
)
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.measure.workload import make_client, plan_records

RECORDED = (
    RecordedConversation("Be brief.", ("a1", "a2", "a3")),
    RecordedConversation("", ("b1",)),
    RecordedConversation("", ("c1", "c2")),
)


def answering(body: dict[str, Any]) -> Behaviour:
    """Each question answered "A[question]" in two chunks."""
    return Behaviour(tokens=2, texts=(f"A[{body['messages'][-1]['content']}", "]"))


def replay(users: int, id_slot: str = "auto", slots: int | None = None) -> tuple[list, list, list]:
    workload = ConversationsWorkload(
        conversations_file="chats.jsonl",
        users=users,
        id_slot=id_slot,
        requests=6,  # as setup counts the file's user messages
        max_tokens=2,
        request_timeout_s=5.0,
        cache_prompt=True,
    )
    questions = [q for c in RECORDED for q in c.questions]
    records = plan_records(0, 0, 0, workload.per_repeat, PromptSource(questions))
    conversations = plan_replay(records, RECORDED)
    events: list = []

    async def run() -> list:
        async with FakeServer(answering) as server:
            async with make_client(server.base_url, workload) as client:
                await run_conversations(client, workload, conversations, events.append, slots)
            return server.completions

    received = asyncio.run(run())
    return conversations, [r.body for r in received], events


def test_each_turn_sends_the_recorded_questions_with_the_real_answers():
    conversations, bodies, events = replay(users=3)
    assert [(c.id, c.number, [r.turn for r in c.turns]) for c in conversations] == [
        ("r1u1", 1, [1, 2, 3]),
        ("r1u2", 2, [1]),
        ("r1u3", 3, [1, 2]),
    ]
    assert [r.prompt for c in conversations for r in c.turns] == [
        "a1",
        "a2",
        "a3",
        "b1",
        "c1",
        "c2",
    ]
    sent = {b["messages"][-1]["content"]: b["messages"] for b in bodies}
    assert sent["a3"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "a1"},
        {"role": "assistant", "content": "A[a1]"},
        {"role": "user", "content": "a2"},
        {"role": "assistant", "content": "A[a2]"},
        {"role": "user", "content": "a3"},
    ]
    assert sent["b1"] == [{"role": "user", "content": "b1"}]
    assert sent["c2"] == [
        {"role": "user", "content": "c1"},
        {"role": "assistant", "content": "A[c1]"},
        {"role": "user", "content": "c2"},
    ]
    assert all("id_slot" not in b for b in bodies)
    assert sum(isinstance(e, RequestFinished) for e in events) == 6


def test_the_next_conversation_of_the_file_starts_when_one_ends():
    conversations, bodies, _ = replay(users=1)
    order = [b["messages"][-1]["content"] for b in bodies]
    assert order == ["a1", "a2", "a3", "b1", "c1", "c2"]  # one at a time, in file order
    records = [r for c in conversations for r in c.turns]
    assert all(r.ok for r in records)
    for ended, starting in itertools.pairwise(conversations):
        first = starting.turns[0]
        assert first.t_intended_ns >= ended.turns[-1].t_done_ns


def test_two_users_take_the_file_in_order_as_they_come_free():
    _, bodies, _ = replay(users=2)
    order = [b["messages"][-1]["content"] for b in bodies]
    assert set(order[:2]) == {"a1", "b1"}  # the first two conversations at once
    assert order.index("c1") > order.index("b1")  # the third waits for one to end
    assert sorted(order) == ["a1", "a2", "a3", "b1", "c1", "c2"]


def test_a_pinned_conversation_asks_for_its_slot_every_turn():
    _, bodies, _ = replay(users=3, id_slot="conversation", slots=2)
    slots = {b["messages"][-1]["content"]: b["id_slot"] for b in bodies}
    assert slots == {"a1": 0, "a2": 0, "a3": 0, "b1": 1, "c1": 0, "c2": 0}


def test_a_conversation_that_waited_takes_the_slot_of_the_user_that_came_free():
    """Pinned by the file's conversation number, c (the third) would ask for slot 0 while a
    (the first) still runs there; it goes to b's slot, whose user it replaces."""
    _, bodies, _ = replay(users=2, id_slot="conversation", slots=2)
    slots = {b["messages"][-1]["content"]: b["id_slot"] for b in bodies}
    assert slots == {"a1": 0, "a2": 0, "a3": 0, "b1": 1, "c1": 1, "c2": 1}


def test_a_pin_without_the_servers_slot_count_sends_nothing():
    with pytest.raises(WorkbenchError, match="did not say how many slots it has"):
        replay(users=3, id_slot="conversation", slots=None)


def test_a_plan_that_does_not_match_the_file_is_a_bug():
    records = plan_records(0, 0, 0, 5, PromptSource(["q"]))
    with pytest.raises(ValueError, match="one record per user message"):
        plan_replay(records, RECORDED)
