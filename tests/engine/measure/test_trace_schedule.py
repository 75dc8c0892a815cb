"""What a trace asks of the dispatcher beyond send times, against a fake server: each request
its own max_tokens, and a later turn of a recorded session due its delay after the previous
turn's reply ended, not sent when that turn failed."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.fakes.sse_server import Behaviour, FakeServer
from workbench.engine.config.experiment import TraceWorkload
from workbench.engine.events import RequestFinished
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.measure.workload import make_client, plan_records, run_requests

DELAY_S = 0.1


def refusing(prompt: str | None):
    def behaviour(body: dict[str, Any]) -> Behaviour:
        if body["messages"][-1]["content"] == prompt:
            return Behaviour(status=500, error_body='{"error": "no"}')
        return Behaviour(tokens=2, delay_s=0.02)

    return behaviour


def replay(follows, max_tokens, refuse: str | None = None):
    workload = TraceWorkload(requests=3, trace="t.jsonl", request_timeout_s=5.0, max_tokens=64)
    records = plan_records(0, 0, 0, 3, PromptSource(["p0", "p1", "p2"]))
    events: list = []

    async def run():
        async with FakeServer(refusing(refuse)) as server:
            async with make_client(server.base_url, workload) as client:
                await run_requests(
                    client, workload, records, [0.0, 0.05, 0.0], events.append, follows, max_tokens
                )
            return [r.body for r in server.completions]

    bodies = asyncio.run(run())
    return records, bodies, events


def test_each_request_asks_its_own_max_tokens():
    _, bodies, _ = replay(None, [3, 7, 1])
    assert sorted((b["messages"][0]["content"], b["max_tokens"]) for b in bodies) == [
        ("p0", 3),
        ("p1", 7),
        ("p2", 1),
    ]


def test_a_later_turn_is_due_its_delay_after_the_previous_reply():
    records, _, events = replay([None, None, (0, DELAY_S)], None)
    first, _, later = records
    assert all(r.ok for r in records)
    assert first.t_done_ns is not None and later.t_intended_ns is not None
    assert later.t_intended_ns == first.t_done_ns + round(DELAY_S * 1e9)
    assert later.t_submit_ns is not None and later.t_submit_ns >= later.t_intended_ns
    assert len([e for e in events if isinstance(e, RequestFinished)]) == 3


def test_a_turn_after_a_failed_one_is_not_sent():
    records, bodies, events = replay([None, None, (0, DELAY_S)], None, refuse="p0")
    first, other, later = records
    assert not first.ok and other.ok
    assert later.error == "not sent: the turn before it in its session failed"
    assert later.t_submit_ns is None and later.t_intended_ns is None
    assert [b["messages"][0]["content"] for b in bodies].count("p2") == 0
    assert {e.record.index for e in events if isinstance(e, RequestFinished)} == {0, 1, 2}
