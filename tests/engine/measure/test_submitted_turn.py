"""A conversation's turn says which conversation it is from the moment it is sent: the
window colours its bar by its conversation before it has finished."""

from __future__ import annotations

from tests.fakes.sse_server import Behaviour, FakeServer
from workbench.engine.base.records import RequestRecord
from workbench.engine.config.experiment import WorkloadSettings
from workbench.engine.events import RequestSubmitted
from workbench.engine.measure.client import stream_request
from workbench.engine.measure.workload import make_client


async def test_a_turn_is_submitted_with_its_conversation_and_turn() -> None:
    workload = WorkloadSettings(requests=1, max_tokens=4, request_timeout_s=5.0)
    record = RequestRecord(0, 0, 3, "Say hi.", conversation_id="r1u2", turn=2)
    events: list[object] = []
    async with (
        FakeServer(Behaviour(tokens=2)) as server,
        make_client(server.base_url, workload) as client,
    ):
        await stream_request(client, record, workload, 7, events.append)
    submitted = [e for e in events if isinstance(e, RequestSubmitted)]
    assert [(e.index, e.conversation_id, e.turn) for e in submitted] == [(3, "r1u2", 2)]
