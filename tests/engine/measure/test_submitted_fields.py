"""What a request says as it is sent, so the window can draw it before it has finished: when
it was due (the Gantt's arrival tick) and which conversation and turn it is (its bar's
colour)."""

from __future__ import annotations

from tests.fakes.sse_server import Behaviour, FakeServer
from workbench.engine.base.records import RequestRecord
from workbench.engine.config.experiment import RequestsWorkload
from workbench.engine.events import RequestSubmitted
from workbench.engine.measure.client import stream_request
from workbench.engine.measure.workload import make_client


async def submitted(record: RequestRecord) -> RequestSubmitted:
    workload = RequestsWorkload(requests=1, max_tokens=4, request_timeout_s=5.0)
    events: list[object] = []
    async with (
        FakeServer(Behaviour(tokens=2)) as server,
        make_client(server.base_url, workload) as client,
    ):
        await stream_request(client, record, workload, 7, events.append)
    (event,) = [e for e in events if isinstance(e, RequestSubmitted)]
    return event


async def test_a_request_is_submitted_with_its_intended_time() -> None:
    event = await submitted(RequestRecord(0, 0, 3, "Say hi.", t_intended_ns=123_456))
    assert (event.index, event.t_intended_ns) == (3, 123_456)


async def test_a_turn_is_submitted_with_its_conversation_and_turn() -> None:
    event = await submitted(RequestRecord(0, 0, 3, "Say hi.", conversation_id="r1u2", turn=2))
    assert (event.index, event.conversation_id, event.turn) == (3, "r1u2", 2)
