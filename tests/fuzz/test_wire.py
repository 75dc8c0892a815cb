"""The agent's protocol fuzzed: each reader of what crosses the channel (``protocol.parse`` for
the near side's operations and the far side's messages, ``wire.decode`` for one event) is fed
random JSON, random bytes, and every valid message of each kind mutated (a value replaced by
random JSON, a field dropped or added, bytes of its line changed). Whatever comes, a reader
returns a message of the protocol or raises its one error with one line: never a traceback,
never a line a terminal would act on."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import currently_in_test_context, event, given
from hypothesis import strategies as st

from tests.engine.remote.far_sides import FACTS, HEADER
from workbench.engine import events as ev
from workbench.engine.base.records import RequestKey, RequestRecord, StartupFacts, TokenChunk
from workbench.engine.base.states import ConfigStatus, NoticeLevel, RunStatus, ServerState
from workbench.engine.config.experiment import RequestsWorkload, parse_experiment
from workbench.engine.figures.client_limits import ClientLoad
from workbench.engine.figures.machine_load import MachineLoad
from workbench.engine.figures.predicted import RunPrediction
from workbench.engine.figures.stalls import Stall
from workbench.engine.measure.client_workers import jobs_for
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.measure.workload import plan_records
from workbench.engine.remote import wire
from workbench.engine.remote.protocol import (
    KINDS,
    OPS,
    PROTOCOL,
    ProtocolError,
    Refused,
    dump,
    parse,
)

# -- every valid message of each kind ---------------------------------------------------------

RECORD = RequestRecord(
    0, 1, 2, "a prompt", prompt_tokens=9, t_intended_ns=10, t_submit_ns=12,
    t_first_token_ns=20, t_done_ns=40, http_status=200, ok=True, finish_reason="stop",
    usage={"completion_tokens": 2, "details": {"reasoning_tokens": 1}},
    timings={"predicted_n": 2, "predicted_ms": 1.5}, conversation_id="c", turn=1, worker=0,
    chunks=[TokenChunk(20, "a"), TokenChunk(30, "b", reasoning=True)],
)  # fmt: skip
EVENTS = [
    ev.ExperimentStarted("fuzz", "/far/x.session.sqlite", 1, "managed", 5, "/bin/llama-server"),
    ev.ConfigStarted(parse_experiment('name = "fuzz"\n', name_hint="fuzz").configs()[0], 4),
    ev.ServerStateChanged(0, ServerState.STARTING, "loading"),
    ev.ServerReady(
        0,
        "http://127.0.0.1:8080",
        42,
        ["llama-server", "-m", "m.gguf"],
        "/far/log",
        StartupFacts(n_slots=2, kv_buffer_mib=1.5, devices=("CPU",)),
        2,
    ),
    ev.RequestSubmitted(0, 1, 2, False, 12, "c", 1, 10),
    ev.FirstToken(0, 1, 2, 20),
    ev.TokenChunkArrived(0, 1, 2, 30, "b", 2, True),
    ev.RequestFinished(RECORD),
    ev.ProcessSample(0, 50, 1024, 12.5),
    ev.GpuSample(0, 50, 2048),
    ev.MetricsSample(0, 50, {"llamacpp:tokens_predicted_total": 12.0}),
    ev.SlotsSample(0, 50, [{"id": 0, "is_processing": True, "n_ctx": 512}]),
    ev.SlotMatched(0, 1, 2, 0),
    ev.ClientLoadMeasured(0, 1, ClientLoad(1.0, 0.25, 0.5)),
    ev.MachineLoadMeasured(0, 1, MachineLoad(wall_s=1.0, cores=8, other_cpu_s=0.1, load_avg=0.5)),
    ev.ServerCounters(0, 1, {"requests": 2.0}, None),
    ev.StallsFound(0, (Stall(RECORD.key, 20, 30, cause=RequestKey(0, 1, 3), covering=1),)),
    ev.ConfigFinished(0, ConfigStatus.OK, None, "the log's tail"),
    ev.Notice(NoticeLevel.WARNING, "a notice", 0),
    ev.PredictionMade(RunPrediction((), ("np=8: no calibration",))),
    ev.ExperimentFinished(RunStatus.COMPLETE),
]
assert {type(e).__name__ for e in EVENTS} == set(wire.EVENTS)  # every event, one each
ENCODED = [wire.encode(e) for e in EVENTS]


def _job() -> dict[str, Any]:
    workload = RequestsWorkload(requests=2, max_tokens=8)
    records = plan_records(0, 0, 0, 2, PromptSource())
    [job] = jobs_for("http://127.0.0.1:8080", {"x-key": "v"}, workload, records, [0.0, 0.5])
    return wire.plain(job)


OPS_SENT = [
    {"op": "hello", "protocol": PROTOCOL, "version": "0.1.0"},
    {"op": "check", "model": "/m.gguf", "server_bin": None},
    {"op": "run", "experiment_toml": "[workload]\nrequests = 1\n", "experiment_name": "x",
     "model": None, "server_bin": "/bin/llama-server"},
    {"op": "ping", "seq": 3},
    {"op": "cancel"},
    {"op": "fetch", "run_id": "ab" * 16},
    {"op": "load", "job": _job()},
    {"op": "go", "t0_ns": 123_456_789},
]  # fmt: skip
KINDS_SENT = [
    {"kind": "hello", "protocol": PROTOCOL, "version": "0.1.0", "hostname": "far"},
    {"kind": "facts", "facts": wire.plain(FACTS)},
    {"kind": "session", "run_id": "cd" * 16, "header": wire.plain(HEADER)},
    {"kind": "events", "events": ENCODED},
    {"kind": "ready", "t_ns": 5},
    {"kind": "pong", "seq": -1, "t_ns": 6},
    {"kind": "file", "run_id": "cd" * 16, "size": 3, "sha256": "0" * 64},
    {"kind": "chunk", "data": "AAAA"},
    {"kind": "file_end"},
    {"kind": "error", "text": "no model here"},
    {"kind": "done"},
    {"kind": "done", "load": wire.plain(ClientLoad(1.0, 0.25, 0.5))},
]
assert {m["op"] for m in OPS_SENT} == set(OPS) and {m["kind"] for m in KINDS_SENT} == set(KINDS)

# -- what a reader must do with anything ------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # a newline among them


def _one_line(error: Exception) -> None:
    text = str(error)
    assert text.strip() and not _CONTROL.search(text) and len(text) <= 600, repr(text)


def read_or_refuse(read: Callable[[bytes], Any], line: bytes) -> Any:
    """What ``read`` makes of ``line``, or None where it refused it in one line."""
    try:
        got = read(line)
    except (ProtocolError, wire.WireError) as exc:
        _one_line(exc)
        _note("refused: " + ("a field" if isinstance(exc, Refused) else type(exc).__name__))
        return None
    _note("read")
    return got


def _note(outcome: str) -> None:
    """How a case ended, for ``--hypothesis-show-statistics``."""
    if currently_in_test_context():
        event(outcome)


READERS: dict[str, Callable[[bytes], Any]] = {
    "op": lambda line: parse(line, "op"),
    "kind": lambda line: parse(line, "kind"),
    "event": wire.decode,
}
SEEDS = {"op": OPS_SENT, "kind": KINDS_SENT, "event": ENCODED}
# Each property runs its cases (``max_examples``: 1,000 with HYPOTHESIS_PROFILE=landing) for
# each reader.
each_reader = pytest.mark.parametrize("reader", sorted(READERS))

# -- random values and mutations ----------------------------------------------------------------

_NUMBERS = (
    st.integers()
    | st.sampled_from([0, -1, 2**31, 2**62, 2**63, 2**64, -(2**63) - 1, 10**30])
    | st.floats(allow_nan=True, allow_infinity=True)
)
_WORDS = st.text(max_size=20) | st.sampled_from([*OPS, *KINDS, *wire.EVENTS, "\x1b[2J", ""])
JSON = st.recursive(
    st.none() | st.booleans() | _NUMBERS | _WORDS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_WORDS, inner, max_size=4),
    max_leaves=12,
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*at, key))
    elif isinstance(value, list):
        for n, inner in enumerate(value):
            yield from _paths(inner, (*at, n))


def _mutated(data: st.DataObject, seed: Any) -> Any:
    """``seed`` with one to three changes: a value replaced by random JSON, dropped, or a
    field added beside it."""
    value = copy.deepcopy(seed)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(_paths(value))))
        if not path:
            value = data.draw(JSON)
            continue
        *parent_path, last = path
        parent = value
        for step in parent_path:
            parent = parent[step]
        how = data.draw(st.sampled_from(["replace", "drop", "add"]))
        if how == "replace":
            parent[last] = data.draw(JSON)
        elif how == "drop":
            del parent[last]
        elif isinstance(parent, dict):
            parent[data.draw(_WORDS)] = data.draw(JSON)
        else:
            parent.insert(last, data.draw(JSON))
    return value


def _line(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode() + b"\n"


# -- the properties ------------------------------------------------------------------------------


def test_every_valid_message_is_read_as_it_was_sent():
    for key, seeds in SEEDS.items():
        for seed in seeds:
            assert read_or_refuse(READERS[key], dump(seed)) is not None, seed
    assert [wire.decode(dump(e)) for e in ENCODED] == EVENTS


@each_reader
@given(value=JSON)
def test_random_json_is_read_or_refused_in_one_line(reader, value):
    read_or_refuse(READERS[reader], _line(value))


@each_reader
@given(data=st.binary(max_size=200))
def test_random_bytes_are_read_or_refused_in_one_line(reader, data):
    read_or_refuse(READERS[reader], data)


@each_reader
@given(data=st.data())
def test_each_valid_message_mutated_is_read_or_refused_in_one_line(reader, data):
    seed = data.draw(st.sampled_from(SEEDS[reader]))
    read_or_refuse(READERS[reader], _line(_mutated(data, seed)))


@each_reader
@given(data=st.data())
def test_each_valid_line_with_its_bytes_changed_is_read_or_refused_in_one_line(reader, data):
    line = bytearray(dump(data.draw(st.sampled_from(SEEDS[reader]))))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(line)))
        how = data.draw(st.sampled_from(["flip", "insert", "cut"]))
        if how == "flip" and at < len(line):
            line[at] ^= 1 << data.draw(st.integers(0, 7))
        elif how == "insert":
            line[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        else:
            del line[at : at + data.draw(st.integers(1, 16))]
    read_or_refuse(READERS[reader], bytes(line))


@each_reader
@pytest.mark.parametrize(("opened", "closed"), [("[", "]"), ('{"a":', "}")])
def test_a_message_nested_past_any_depth_is_refused_in_one_line(reader, opened, closed):
    deep = 100_000
    line = (opened * deep + "1" + closed * deep).encode()
    assert read_or_refuse(READERS[reader], line) is None
