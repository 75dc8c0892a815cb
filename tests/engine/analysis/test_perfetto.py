"""Sessions as a Chrome/Perfetto trace: every file passes a check of the Trace Event Format's
rules (the check is tested to fail), and its slices lie where the records say."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import shutil
import sqlite3
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import older_session
from tests.made_sessions import (
    NS,
    Config,
    build_session,
    failed,
    request,
    rss_samples,
    startup_facts,
    write_sweep,
)
from workbench.engine.analysis.perfetto import HANDOVER_US, trace_events, write_trace
from workbench.engine.events import GpuSample, MetricsSample, SlotsSample
from workbench.engine.figures.per_request import request_metrics
from workbench.engine.store import open_session
from workbench.engine.store.rows import RemoteOrigin
from workbench.engine.store.writer import write_remote_origin

PHASES = frozenset("XBEbeniCMsf")
METADATA = frozenset({"process_name", "process_sort_index", "thread_name", "thread_sort_index"})


def problems(doc: Any) -> list[str]:
    """What breaks the Trace Event Format's rules (the JSON Object Format) in ``doc``: the
    fields each phase needs, durations, B/E balance and X nesting per thread, async b/e
    balance per id, numeric counters. Empty: a valid trace."""
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not a JSON object with a traceEvents list"]
    found: list[str] = []
    if doc.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        found.append(f"displayTimeUnit {doc['displayTimeUnit']!r}")
    slices: dict[tuple[int, int], list[tuple[float, float, str]]] = {}
    stacks: dict[tuple[int, int], list[str]] = {}
    asyncs: dict[tuple[int, str, Any], int] = {}
    flows: dict[tuple[int, str, Any], list[tuple[str, tuple[int, int], float]]] = {}
    for n, e in enumerate(doc["traceEvents"]):
        where = f"event {n} ({e.get('ph') if isinstance(e, dict) else e!r})"
        if not isinstance(e, dict) or e.get("ph") not in PHASES:
            found.append(f"{where}: no known ph")
            continue
        ph = e["ph"]
        if not isinstance(e.get("pid"), int) or not isinstance(e.get("tid"), int):
            found.append(f"{where}: pid and tid must be whole numbers")
            continue
        if not isinstance(e.get("name"), str):
            found.append(f"{where}: no name")
            continue
        if ph != "M" and not _number(e.get("ts")):
            found.append(f"{where}: ts is no number")
            continue
        track = (e.get("pid"), e.get("tid"))
        if ph == "X":
            if not _number(e.get("dur")) or e["dur"] < 0:
                found.append(f"{where}: dur must be a number >= 0")
                continue
            slices.setdefault(track, []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
        elif ph == "B":
            stacks.setdefault(track, []).append(e["name"])
        elif ph == "E" and not stacks.get(track):
            found.append(f"{where}: E without a B on its thread")
        elif ph == "E":
            stacks[track].pop()
        elif ph in "be":
            if "id" not in e or not isinstance(e.get("cat"), str):
                found.append(f"{where}: an async event needs cat and id")
                continue
            key = (e["pid"], e["cat"], e["id"])
            asyncs[key] = asyncs.get(key, 0) + (1 if ph == "b" else -1)
            if asyncs[key] < 0:
                found.append(f"{where}: e before its b (id {e['id']})")
        elif ph in "sf":
            if "id" not in e or not isinstance(e.get("cat"), str):
                found.append(f"{where}: a flow event needs cat and id")
                continue
            flows.setdefault((e["pid"], e["cat"], e["id"]), []).append((ph, track, e["ts"]))
        elif ph == "C":
            values = e.get("args")
            if not isinstance(values, dict) or not values:
                found.append(f"{where}: a counter needs its values in args")
            elif not all(_number(v) for v in values.values()):
                found.append(f"{where}: a counter's value is no number: {values}")
        elif ph in "iI" and e.get("s", "t") not in ("g", "p", "t"):
            found.append(f"{where}: instant scope {e.get('s')!r}")
        elif ph == "M" and (e["name"] not in METADATA or not isinstance(e.get("args"), dict)):
            found.append(f"{where}: metadata {e['name']!r} without args")
    found += [f"thread {t}: {len(s)} B without E" for t, s in stacks.items() if s]
    found += [f"async {k}: b without e" for k, left in asyncs.items() if left]
    for track, spans in slices.items():
        found += [f"thread {track}: {p}" for p in _overlaps(spans)]
    for key, ends in flows.items():
        if sorted(ph for ph, _, _ in ends) != ["f", "s"]:
            found.append(f"flow {key}: needs one start and one finish, has {ends}")
            continue
        # Each end binds to the slice enclosing it on its thread: there must be one.
        for ph, track, ts in ends:
            if not any(a <= ts <= b for a, b, _ in slices.get(track, [])):
                found.append(f"flow {key}: its {ph} at {ts} on {track} is in no slice")
    return found


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _overlaps(spans: list[tuple[float, float, str]]) -> list[str]:
    """Slices of one thread that overlap in part: sorted by start (the longer first), each
    next must start after the one before ended or lie wholly inside it."""
    found, open_ = [], []
    for start, end, name in sorted(spans, key=lambda s: (s[0], -s[1])):
        while open_ and open_[-1][0] <= start:
            open_.pop()
        if open_ and end > open_[-1][0]:
            found.append(f"{name} [{start}, {end}] overlaps {open_[-1][1]} in part")
        open_.append((end, name))
    return found


def exported(sessions: list[Path], folder: Path) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        opened = [stack.enter_context(open_session(p)) for p in sessions]
        path, count = write_trace(opened, folder)
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert len(doc["traceEvents"]) == count
    assert problems(doc) == []
    return doc


def threads(doc: dict[str, Any], pid: int = 1) -> dict[int, str]:
    return {
        e["tid"]: e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == pid
    }


def of_request(doc: dict[str, Any], config: int, index: int, ph: str = "X") -> list[dict]:
    return [
        e
        for e in doc["traceEvents"]
        if e["ph"] == ph
        and e.get("args", {}).get("config_index") == config
        and e["args"].get("request") == index
    ]


def event(ph: str, **fields: Any) -> dict[str, Any]:
    return {"ph": ph, "name": "x", "pid": 1, "tid": 1, "ts": 0, **fields}


def test_the_check_catches_what_breaks_the_format():
    inside = [event("X", ts=0, dur=10), event("X", ts=2, dur=3), event("X", ts=10, dur=5)]
    assert problems({"traceEvents": inside}) == []
    flow = [
        event("X", ts=0, dur=10),
        event("s", ts=5, id=1, cat="c"),
        event("f", ts=8, id=1, cat="c"),
    ]
    assert problems({"traceEvents": flow}) == []
    assert "is in no slice" in " ".join(problems({"traceEvents": [*flow[1:], event("X", dur=2)]}))
    assert "one start and one finish" in " ".join(problems({"traceEvents": flow[:2]}))
    partial = [event("X", ts=0, dur=10), event("X", ts=5, dur=10)]
    assert "overlaps" in " ".join(problems({"traceEvents": partial}))
    assert problems({"traceEvents": [event("X", dur=-1)]})
    assert problems({"traceEvents": [event("C", args={"n": "3"})]})
    assert problems({"traceEvents": [event("b", cat="q", id=1)]})
    assert problems({"traceEvents": [event("e", cat="q", id=1)]})
    assert problems({"traceEvents": [event("B")]})
    assert problems({"traceEvents": [event("i", s="x")]})
    assert problems({"traceEvents": [{"ph": "X", "ts": 0, "dur": 1}]})  # no pid, tid, name
    assert problems([]) and problems({"events": []})


def test_a_sweeps_slices_lie_where_its_records_say(tmp_path):
    session = write_sweep(tmp_path / "sweep.session.sqlite")
    doc = exported([session], tmp_path / "out")
    events = doc["traceEvents"]
    names = threads(doc)
    assert set(names.values()) >= {"slot 0", "slot 1", "no slot", "worker 0", "worker 0 · 3"}
    (process,) = [e for e in events if e["name"] == "process_name"]
    assert process["args"]["name"] == "made-host · sweep"
    # np=1's third request: sent at 2 s, 1.2 s in the queue, 0.1 s of prefill, then 11 gaps
    # of 0.1 s to its last token (TTFT 1.3 s, E2E 2.4 s), on slot 0.
    with open_session(session) as opened:
        (record,) = [r for r in opened.records(0) if r.index == 2]
    prefill, decode, sent = (
        next(e for e in of_request(doc, 0, 2) if e["name"] == name)
        for name in ("prefill", "decode", "request")
    )
    us = 1000
    assert abs(sent["ts"] - record.t_submit_ns / us) <= 1
    assert abs(sent["ts"] + sent["dur"] - record.t_done_ns / us) <= 1
    assert prefill["ts"] == 3_200_000 and prefill["dur"] == 100_000
    assert abs(decode["ts"] - record.t_first_token_ns / us) <= 1
    assert abs(decode["ts"] + decode["dur"] - record.t_last_token_ns / us) <= 1
    assert names[decode["tid"]] == "slot 0" == names[prefill["tid"]]
    assert names[sent["tid"]].startswith("worker 0")
    assert decode["args"] == {
        "config": "np=1",
        "config_index": 0,
        "repeat": 0,
        "request": 2,
        "ttft_ms": 1300.0,
        "e2e_ms": 2400.0,
        "queue_wait_ms": 1200.0,
        "slot": 0,
        "worker": 0,
        "number": 2,  # its number as requests.csv gives it (the key's request counts warm-ups)
    }
    # Numbers run on over the sweep: np=2's measured requests follow np=1's 3.
    numbers = {
        (e["args"]["config_index"], e["args"]["number"])
        for e in events
        if e["name"] == "request" and "number" in e["args"]
    }
    assert numbers == {(0, 1), (0, 2), (0, 3), (1, 4), (1, 5), (1, 6)}
    (wait, end) = of_request(doc, 0, 2, "b") + [
        e for e in events if e["ph"] == "e" and e["id"] == of_request(doc, 0, 2, "b")[0]["id"]
    ]
    assert (wait["name"], wait["ts"], end["ts"]) == ("queue wait", 2_000_000, 3_200_000)
    # The configurations one after another on the session's axis, their labels as instants.
    instants = {e["name"]: e["ts"] for e in events if e["ph"] == "i"}
    assert instants == {"start np=1": 0, "end np=1": 5_600_000, "start np=2": 6_000_000,
                        "end np=2": 10_950_000}  # fmt: skip
    counters = Counter(e["name"] for e in events if e["ph"] == "C")
    assert counters["RSS MiB"] == 7 and counters["requests (from the records)"] > 0
    waiting = [e["args"] for e in events if e["name"] == "requests (from the records)"]
    assert {"running": 1, "waiting": 2} in waiting  # np=1 at 2 s: one served, two queued
    assert doc["displayTimeUnit"] == "ms"
    assert doc["otherData"]["sessions"][0]["host"] == "made-host"


def test_requests_that_would_overlap_on_a_lane_get_lanes_of_their_own(tmp_path):
    """Two requests the log put on slot 0 at once, two with no slot at once, a failed one;
    the server's /metrics, /slots and GPU memory as counters."""
    toml = "[server]\nslots = 2\n[workload]\nrequests = 8\n"
    requests = [
        request(0, submit_s=0.0, slot=0),
        request(1, submit_s=0.5, slot=0),  # while 0 still decodes on slot 0
        request(2, submit_s=0.0, slot=None),
        request(3, submit_s=0.2, slot=None),
        failed(4, submit_s=0.3, done_s=0.9, error="HTTP 500: boom"),
        # slot 1: the next request's prefill (from 1.198 s) 2 ms before the client saw the
        # last token before it (at 1.2 s): the slot's own lane, its prefill from 1.2 s
        request(5, submit_s=0.0, slot=1),
        request(6, submit_s=1.0, ttft_s=0.248, prefill_s=0.05, slot=1),
        # a second client worker's whole answer (not streamed) after 1 s, the server 0.2 s
        # on its prompt and 0.5 s generating: 0.3 s queued, decoding from 3.5 s to 4 s
        replace(
            request(7, submit_s=3.0, ttft_s=1.0, tokens=1, slot=1),
            streamed=False,
            worker=1,
            timings={"prompt_n": 20, "prompt_ms": 200.0, "predicted_n": 9, "predicted_ms": 500.0},
        ),
    ]
    metrics = [
        MetricsSample(0, round(t * NS), {"llamacpp:requests_processing": n, "other": math.inf})
        for t, n in ((0.0, 0.0), (0.25, 3.0), (2.0, 0.0))
    ]
    slots = [SlotsSample(0, NS // 4, [{"id": 0, "is_processing": True}, {"id": 1}])]
    gpu = [GpuSample(0, NS // 2, 512 * 2**20)]
    made = Config(requests, startup_facts(2, 4096), [*metrics, *slots, *gpu, *rss_samples(0, [90])])
    session = build_session(tmp_path / "lanes.session.sqlite", toml, [made])
    doc = exported([session], tmp_path / "out")
    names = threads(doc)
    lane = {
        (e["args"]["request"], e["name"]): names[e["tid"]]
        for e in doc["traceEvents"]
        if e["ph"] == "X" and e["name"] in ("decode", "failed request")
    }
    assert lane[(0, "decode")] == "slot 0" and lane[(1, "decode")] == "slot 0 · 2"
    assert {lane[(2, "decode")], lane[(3, "decode")]} == {"no slot", "no slot · 2"}
    assert lane[(4, "failed request")].startswith("worker 0")
    assert lane[(5, "decode")] == "slot 1" == lane[(6, "decode")] == lane[(7, "decode")]
    whole = {e["name"]: (e["ts"], e["dur"]) for e in of_request(doc, 0, 7)}
    assert whole == {
        "request": (3_000_000, 1_000_000),
        "prefill": (3_300_000, 200_000),
        "decode": (3_500_000, 500_000),
    }
    (sent,) = [e for e in of_request(doc, 0, 7) if e["name"] == "request"]
    assert names[sent["tid"]] == "worker 1" and sent["args"]["worker"] == 1
    (handed,) = [e for e in of_request(doc, 0, 6) if e["name"] == "prefill"]
    assert (handed["ts"], handed["dur"], handed["args"]["queue_wait_ms"]) == (
        1_200_000,
        48_000,
        198.0,
    )
    failures = [e for e in doc["traceEvents"] if e["ph"] == "i" and e["name"] == "failed request"]
    assert [(f["ts"], f["args"]["error"]) for f in failures] == [(900_000, "HTTP 500: boom")]
    counted = {e["name"]: e["args"] for e in doc["traceEvents"] if e["ph"] == "C"}
    assert counted["requests (server /metrics)"] == {"running": 0.0}  # its last sample
    assert "requests (from the records)" not in counted  # the server's own counts came
    assert counted["busy slots"] == {"busy": 1}
    assert counted["GPU memory MiB"] == {"MiB": 512.0}


def test_a_crash_and_an_error_are_marks_in_time(tmp_path):
    session = write_sweep(tmp_path / "crashed.session.sqlite")
    with contextlib.closing(sqlite3.connect(session)) as conn, conn:
        conn.execute(
            "INSERT INTO server_states (config_idx, t_ns, state, detail) VALUES (1, ?, ?, ?)",
            (9 * NS, "crashed", "exited with signal 9"),
        )
        conn.execute(
            "INSERT INTO notices (t_ns, config_idx, level, text) VALUES (?, 1, 'error', ?)",
            (9 * NS + 1000, "llama-server exited mid-run"),
        )
    doc = exported([session], tmp_path / "out")
    marks = {e["name"]: (e["ts"], e["s"], e["args"]) for e in doc["traceEvents"] if e["ph"] == "i"}
    assert marks["server crashed"] == (
        9_000_000,
        "p",
        {"config": "np=2", "detail": "exited with signal 9"},
    )
    assert marks["error"] == (
        9_000_001,
        "p",
        {"text": "llama-server exited mid-run", "config": "np=2"},
    )


def test_thousands_of_requests_export_in_bounded_events_and_lanes(tmp_path):
    """A long run: each request a few events, its lanes as many as were in flight at once
    (4 sent together every 0.5 s, each 1.2 s long: 12 in flight, 3 per slot)."""
    toml = "[server]\nslots = 4\n[workload]\nrequests = 3000\n"
    requests = [
        request(k, submit_s=0.5 * (k // 4), slot=k % 4, tokens=4, ttft_s=0.9, prefill_s=0.9)
        for k in range(3000)
    ]
    session = build_session(tmp_path / "long.session.sqlite", toml, [Config(requests)])
    with open_session(session) as opened:
        events = trace_events([opened])
        assert iter(events) is events  # made one at a time, never held as a list
    doc = exported([session], tmp_path / "out")
    assert len(doc["traceEvents"]) < 3000 * 8
    names = Counter(n.split(" · ")[0] for n in threads(doc).values())
    assert names == {"slot 0": 3, "slot 1": 3, "slot 2": 3, "slot 3": 3, "worker 0": 12}


def test_two_sessions_are_two_processes_placed_by_their_wall_clocks(tmp_path):
    here = write_sweep(tmp_path / "here.session.sqlite")
    far = tmp_path / "far.session.sqlite"
    shutil.copy(here, far)
    with contextlib.closing(sqlite3.connect(here)) as conn:
        (wall,) = conn.execute("SELECT wall_origin FROM session").fetchone()
    with contextlib.closing(sqlite3.connect(far)) as conn, conn:
        conn.execute("UPDATE session SET wall_origin = ?", (wall + 2.5,))
    write_remote_origin(
        far,
        RemoteOrigin(
            host="gpubox",
            run_id="r1",
            agent_version="0.1.0",
            protocol=1,
            clock_offset_ns=1234,
            rtt_ns=800,
            received_all=True,
        ),
    )
    doc = exported([far, here], tmp_path / "out")
    processes = {
        e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"
    }
    assert processes == {1: "gpubox · sweep", 2: "made-host · sweep"}
    order = {e["pid"]: e["args"]["sort_index"] for e in doc["traceEvents"]
             if e["name"] == "process_sort_index"}  # fmt: skip
    assert order == {1: 1, 2: 2}
    starts = {e["pid"]: e["ts"] for e in doc["traceEvents"] if e["name"] == "start np=1"}
    assert starts == {1: 2_500_000, 2: 0}  # the later session 2.5 s after the earlier one
    placed = doc["otherData"]["sessions"]
    assert [(p["host"], p["starts_at_us"], p["clock_offset_ns"]) for p in placed] == [
        ("gpubox", 2_500_000, 1234),
        ("made-host", 0, None),
    ]
    assert "wall_origin" in doc["otherData"]["placement"]


@pytest.mark.server
def test_a_real_sessions_trace_puts_each_request_on_its_slot(recorded_session, tmp_path):
    doc = exported([recorded_session], tmp_path / "out")
    names = threads(doc)
    with open_session(recorded_session) as session:
        records = [r for c in session.configs for r in session.records(c.index)]
    measured = [r for r in records if not r.warmup]
    assert measured and all(r.slot is not None for r in measured)
    # A slot serves its requests one after another: the next one's prefill begins (TTFT
    # less the server's prompt time) within a few ms of the client seeing the last token
    # before it, sooner or later (-3 to +4 ms measured), well within HANDOVER_US: np=1's
    # requests all lie on the one slot's one lane.
    by_slot: dict[tuple[int, int | None], list] = {}
    for r in sorted(measured, key=lambda r: r.t_first_token_ns):
        by_slot.setdefault((r.config_index, r.slot), []).append(r)
    for served in by_slot.values():
        for before, after in itertools.pairwise(served):
            metrics = request_metrics(after)
            began = after.t_submit_ns + metrics.queue_wait_s * NS
            assert before.t_last_token_ns - began < HANDOVER_US * 1000
    lanes = {
        names[e["tid"]]
        for r in measured
        if r.config_index == 0
        for e in of_request(doc, 0, r.index)
        if e["name"] in ("prefill", "decode")
    }
    assert lanes == {"slot 0"}
    for r in measured:
        (decode,) = [e for e in of_request(doc, r.config_index, r.index) if e["name"] == "decode"]
        assert names[decode["tid"]].split(" · ")[0] == f"slot {r.slot}"
        origin = session.meta["clock_origin_ns"]
        assert abs(decode["ts"] - (r.t_first_token_ns - origin) / 1000) <= 1
        assert abs(decode["ts"] + decode["dur"] - (r.t_last_token_ns - origin) / 1000) <= 1
    busy = [e for e in doc["traceEvents"] if e["name"] == "busy slots"]
    assert busy and max(e["args"]["busy"] for e in busy) >= 1


def test_a_session_older_than_the_remote_origin_is_named_by_its_machine(tmp_path):
    session = write_sweep(tmp_path / "sweep.session.sqlite")
    old = older_session(session, tmp_path, 9, "remote_origin")
    doc = exported([old], tmp_path / "out")
    (process,) = [e for e in doc["traceEvents"] if e["name"] == "process_name"]
    assert process["args"]["name"] == "made-host · sweep"
