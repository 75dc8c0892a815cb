"""Engine events over the agent's wire: every event of a real run (against the mock server)
comes back equal through encode, JSON and decode; what is no event is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.engine import events as ev
from workbench.engine.base.records import RequestKey
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import EventBus
from workbench.engine.figures.stalls import Stall
from workbench.engine.remote import wire
from workbench.engine.run.lifecycle import run_experiment
from workbench.engine.run.runner import RunOptions
from workbench.mock_server import MockProcess

EXPERIMENT = 'name = "wire"\n[workload]\nrequests = 3\nmax_tokens = 12\nwarmup = 1\n'


@pytest.fixture(scope="module")
def run_events(tmp_path_factory) -> list[object]:
    """Every event a short external run against the mock published."""
    bus = EventBus()
    heard = bus.subscribe()
    out = tmp_path_factory.mktemp("wire")
    with MockProcess("--ttft-ms", "20", "--itl-ms", "5", "--tokens", "12") as mock:
        experiment = parse_experiment(EXPERIMENT, name_hint="wire")
        result = run_experiment(experiment, RunOptions(Path(out), base_url=mock.url), bus)
    assert result.status == "complete", result.error
    return heard.drain()


def test_every_event_of_a_run_comes_back_equal(run_events):
    kinds = {type(e) for e in run_events}
    assert kinds >= {
        ev.ExperimentStarted,
        ev.ConfigStarted,
        ev.RequestSubmitted,
        ev.FirstToken,
        ev.TokenChunkArrived,
        ev.RequestFinished,
        ev.ConfigFinished,
        ev.Notice,
        ev.ExperimentFinished,
    }
    for event in run_events:
        assert wire.decode(json.dumps(wire.encode(event))) == event


def test_an_unknown_event_is_refused():
    with pytest.raises(wire.WireError) as caught:
        wire.decode('{"type": "os.system", "data": {}}')
    assert str(caught.value) == "the event: type is not a kind known here, got 'os.system'"


def test_a_field_of_a_wrong_type_is_refused(run_events):
    finished = next(e for e in run_events if isinstance(e, ev.RequestFinished))
    message = wire.encode(finished)
    message["data"]["record"]["index"] = "0; rm -rf /"
    with pytest.raises(wire.WireError) as caught:
        wire.decode(json.dumps(message))
    assert str(caught.value) == (
        "the event: RequestFinished.data.record.index must be a whole number, got '0; rm -rf /'"
    )


def test_a_list_too_long_is_refused(run_events):
    finished = next(e for e in run_events if isinstance(e, ev.RequestFinished))
    message = wire.encode(finished)
    chunk = message["data"]["record"]["chunks"][0]
    message["data"]["record"]["chunks"] = [chunk] * (wire.MAX_ENTRIES + 1)
    with pytest.raises(wire.WireError, match=f"has {wire.MAX_ENTRIES + 1} entries, more than"):
        wire.decode(json.dumps(message))


def test_a_servers_own_figures_in_a_request_are_bounded_as_the_client_bounds_them(run_events):
    finished = next(e for e in run_events if isinstance(e, ev.RequestFinished))
    message = wire.encode(finished)
    message["data"]["record"]["usage"] = {"completion_tokens": 2**70, "ok": 3}
    record = wire.decode(json.dumps(message)).record
    assert record.usage == {"completion_tokens": str(2**70), "ok": 3}


def test_a_config_started_carries_its_run_config_checked(run_events):
    started = next(e for e in run_events if isinstance(e, ev.ConfigStarted))
    message = wire.encode(started)
    assert type(wire.decode(json.dumps(message)).config) is type(started.config)
    message["data"]["config"]["index"] = "0"
    with pytest.raises(wire.WireError, match=r"ConfigStarted\.data\.config\.index must be a whole"):
        wire.decode(json.dumps(message))


def test_stalls_come_back_with_their_causes():
    """A run with stalls sends them (the mock's streams never stall): each stall's stream and
    cause are request keys again."""
    found = ev.StallsFound(
        1,
        (
            Stall(RequestKey(1, 0, 2), 10, 9_000_000_010, cause=RequestKey(1, 0, 3), covering=2),
            Stall(RequestKey(1, 0, 4), 20, 300_000_020, unknown=True),
        ),
    )
    back = wire.decode(json.dumps(wire.encode(found)))
    assert back == found and type(back.stalls[0].cause) is RequestKey
    message = wire.encode(found)
    message["data"]["stalls"][0]["start_ns"] = "soon"
    with pytest.raises(wire.WireError, match=r"StallsFound\.data\.stalls\[0\]\.start_ns must be a"):
        wire.decode(json.dumps(message))
