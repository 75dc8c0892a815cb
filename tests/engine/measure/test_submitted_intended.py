"""A request says when it was due as it is sent: the window ticks its arrival on the Gantt
from that moment, not once it has finished."""

from __future__ import annotations

from tests.fakes.sse_server import Behaviour, FakeServer
from workbench.engine.base.records import RequestRecord
from workbench.engine.config.experiment import WorkloadSettings
from workbench.engine.events import RequestSubmitted
from workbench.engine.measure.client import stream_request
from workbench.engine.measure.workload import make_client


async def test_a_request_is_submitted_with_its_intended_time() -> None:
    workload = WorkloadSettings(requests=1, max_tokens=4, request_timeout_s=5.0)
    record = RequestRecord(0, 0, 3, "Say hi.", t_intended_ns=123_456)
    events: list[object] = []
    async with (
        FakeServer(Behaviour(tokens=2)) as server,
        make_client(server.base_url, workload) as client,
    ):
        await stream_request(client, record, workload, 7, events.append)
    submitted = [e for e in events if isinstance(e, RequestSubmitted)]
    assert [(e.index, e.t_intended_ns) for e in submitted] == [(3, 123_456)]
