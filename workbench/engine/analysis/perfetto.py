"""Sessions as a Chrome/Perfetto trace (the Trace Event Format's JSON object: ``traceEvents``,
``displayTimeUnit``, ``otherData``), for ui.perfetto.dev and chrome://tracing.

One process per session, named by its host. Its threads: a lane per server slot holding each
request's prefill and decode, a lane per client worker holding each request's span from sent
to done (complete events, which cannot be left open); queue waits as async events (so they
never break a lane's nesting); counters for requests running and waiting, busy slots, RSS
and GPU memory; instants for each configuration's start and end and each failure. A stream's
generation stalls are slices inside its decode, each with a flow arrow from the prefill of
the request whose prompt caused it.

Perfetto and chrome://tracing need the complete events of one thread to nest, never to
overlap in part: a request whose slot another request still holds (two the log matched to
one slot at once, or a request with no known slot) goes on a further lane of its own, and
so does a worker's request sent while another is in flight. The client sees a last token a
few ms after the server handed its slot on (``HANDOVER_US``): the next request's prefill is
drawn from where the one before it ended, its arguments keeping the measured figures.

Times are whole microseconds (the format's unit) from the earliest session's clock origin:
each session is placed by its wall-clock origin (``ALIGN_WALL``), or every session's clock
origin at 0 (``ALIGN_START``: sessions recorded days apart side by side), and its times
within are its own clock's.
Events are written one at a time, one configuration's records read at a time, so a long
session exports in memory bounded by its largest configuration.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench import __version__
from workbench.engine.base.errors import OutputDirError, SessionError
from workbench.engine.base.records import RequestKey, RequestRecord, request_numbers
from workbench.engine.base.server_kinds import detect
from workbench.engine.base.states import NoticeLevel, ServerState
from workbench.engine.base.validation import as_text
from workbench.engine.figures.per_request import NS, RequestMetrics, request_metrics
from workbench.engine.figures.stalls import Stall, found_stalls
from workbench.engine.store import ConfigRow, Session

MIB = 2**20
# How long before its slot's lane is free a request may begin there, drawn from where the
# lane is free: the client sees a request's last token after the server has given its slot
# to the next (by up to 3 ms on the real server, tests/engine/analysis/test_perfetto.py).
HANDOVER_US = 50_000
EXTENSION = ".perfetto.json"
# What a slice, instant and counter is called: Perfetto colours slices by name.
PREFILL, DECODE, FAILED_DECODE = "prefill", "decode", "decode (failed)"
REQUEST, FAILED_REQUEST = "request", "failed request"
QUEUE_WAIT = "queue wait"
STALL, STALL_FLOW = "stalled", "prompt froze a stream"
SERVER_REQUESTS, CLIENT_REQUESTS = "requests (server /metrics)", "requests (from the records)"
BUSY_SLOTS, RSS, GPU_MEMORY = "busy slots", "RSS MiB", "GPU memory MiB"
ALIGN_WALL, ALIGN_START = "wall", "start"
ALIGNS = (ALIGN_WALL, ALIGN_START)
"""How sessions are placed against each other: by the wall clock each started at, or each
at its own start."""
PLACEMENT = {
    ALIGN_WALL: "each session (a process) is placed by its header's wall-clock origin "
    "(wall_origin), 0 being the earliest session's",
    ALIGN_START: "each session (a process) starts at 0, whenever it was recorded (aligned at "
    "their starts: their wall-clock origins are not compared)",
}
WITHIN = (
    "; within a session every time is its own clock's, from its clock origin (its "
    "configurations one after another on that axis); a remote session's clock_offset_ns "
    "only places it, every duration in it was measured on its own machine"
)
# Lanes' sort order within a process: slots first, then requests without a slot, workers.
_SLOT, _NO_SLOT, _WORKER = 0, 1, 2


@dataclass
class _Lanes:
    """A session's threads: for each kind of lane (a slot, no slot, a worker), the lanes so
    far and when each is free again. A slice goes on the first lane free when it starts:
    slices on one lane follow one another, so they can never overlap in part."""

    pid: int
    ids: Iterator[int]  # the async events' ids, unique in the trace
    free_at: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    tids: dict[tuple[int, int, int], int] = field(default_factory=dict)
    numbered: int = 0  # the session's requests numbered in the configurations so far

    def place(
        self, group: int, number: int, start: int, end: int, give: int = 0
    ) -> tuple[int, int, list[dict]]:
        """The lane (tid) of a span [start, end] µs: the first free by ``start``, or by
        up to ``give`` later, where the span then begins; and the metadata naming a new
        lane."""
        ends = self.free_at.setdefault((group, number), [])
        lane = next((k for k, free in enumerate(ends) if free <= start + give), len(ends))
        if lane == len(ends):
            ends.append(start)
        start = max(start, ends[lane])
        ends[lane] = max(end, start)
        key = (group, number, lane)
        if key in self.tids:
            return self.tids[key], start, []
        tid = self.tids[key] = len(self.tids) + 1
        name = {_SLOT: f"slot {number}", _NO_SLOT: "no slot", _WORKER: f"worker {number}"}[group]
        meta = {"ph": "M", "pid": self.pid, "tid": tid, "ts": 0}
        return (
            tid,
            start,
            [
                {**meta, "name": "thread_name", "args": {"name": _lane_name(name, lane)}},
                {**meta, "name": "thread_sort_index", "args": {"sort_index": _sort(*key)}},
            ],
        )


def _lane_name(name: str, lane: int) -> str:
    return name if lane == 0 else f"{name} · {lane + 1}"


def _sort(group: int, number: int, lane: int) -> int:
    """A lane's place in its process: by kind, then slot or worker, then lane."""
    return group * 10**9 + min(number, 10**5 - 1) * 10**4 + min(lane, 10**4 - 1)


@dataclass(frozen=True)
class _Placed:
    """A session on the trace's axis: its process id and where its clock origin lies."""

    session: Session
    pid: int
    zero_ns: int  # this session's clock reading at the trace's 0

    def us(self, t_ns: int) -> int:
        """A time of this session's clock in whole µs on the trace's axis (rounding keeps
        the order of times, so spans that follow one another still do)."""
        return (t_ns - self.zero_ns + 500) // 1000


def host_of(session: Session) -> str:
    """Where the session was measured: the agent's host, else the machine's hostname."""
    origin = session.remote_origin()
    host = origin.host if origin is not None else session.hardware.hostname
    return as_text(host or "unknown host")


def _placed(sessions: Sequence[Session], align: str = ALIGN_WALL) -> list[_Placed]:
    """Each session's process and place: by its wall-clock origin, the earliest at 0; or,
    aligned at their starts, each one's clock origin at 0."""
    if align not in ALIGNS:
        raise ValueError(f"align is one of {', '.join(ALIGNS)}, not {align!r}")
    by_wall = align == ALIGN_WALL and len(sessions) > 1
    walls = [float(s.meta["wall_origin"]) for s in sessions]
    for s, wall in zip(sessions, walls, strict=True):
        if by_wall and not math.isfinite(wall):
            raise SessionError(
                f"{s.path} has no wall-clock origin to place it beside others "
                f"(--align {ALIGN_START} sets each at its own start)"
            )
    earliest = min(walls) if by_wall else 0.0
    return [
        _Placed(s, pid, s.meta["clock_origin_ns"] - round((wall - earliest) * NS))
        if by_wall
        else _Placed(s, pid, s.meta["clock_origin_ns"])
        for pid, (s, wall) in enumerate(zip(sessions, walls, strict=True), start=1)
    ]


def other_data(sessions: Sequence[Session], align: str = ALIGN_WALL) -> dict[str, Any]:
    """What the trace's metadata says: who wrote it, how sessions were placed, each one."""
    described = []
    for placed in _placed(sessions, align):
        s = placed.session
        origin = s.remote_origin()
        described.append(
            {
                "pid": placed.pid,
                "session": as_text(s.meta["name"]),
                "file": as_text(s.path.name),
                "host": host_of(s),
                "wall_origin": wall if math.isfinite(wall := s.meta["wall_origin"]) else None,
                "starts_at_us": placed.us(s.meta["clock_origin_ns"]),
                "clock_offset_ns": origin.clock_offset_ns if origin is not None else None,
            }
        )
    return {
        "exported_by": f"workbench {__version__}",
        "time_unit": "µs from the earliest session's clock origin"
        if align == ALIGN_WALL
        else "µs from each session's own clock origin",
        "align": align,
        "placement": PLACEMENT[align] + WITHIN,
        "sessions": described,
    }


def trace_events(sessions: Sequence[Session], align: str = ALIGN_WALL) -> Iterator[dict[str, Any]]:
    """Every event of the trace, a session after another, a configuration at a time."""
    ids = itertools.count(1)
    for placed in _placed(sessions, align):
        s, pid = placed.session, placed.pid
        meta = {"ph": "M", "pid": pid, "tid": 0, "ts": 0}
        name = f"{host_of(s)} · {as_text(s.meta['name'])}"
        yield {**meta, "name": "process_name", "args": {"name": name}}
        yield {**meta, "name": "process_sort_index", "args": {"sort_index": pid}}
        lanes = _Lanes(pid, ids)
        for config in s.configs:
            yield from _config_events(placed, config, lanes)
        yield from _notices(placed, s)


def _config_events(placed: _Placed, config: ConfigRow, lanes: _Lanes) -> Iterator[dict]:
    s, pid, label = placed.session, placed.pid, as_text(config.label)
    records = s.records(config.index)
    states = s.samples("server_states", config.index)
    # A configuration's span as a replay gives it: its server's states and its requests.
    times = [st.t_ns for st in states] + [
        t for r in records for t in (r.t_submit_ns, r.t_done_ns) if t is not None
    ]
    if times:
        yield _instant(pid, placed.us(min(times)), f"start {label}", {"config": label})
    # Each request's number as every view gives it (``request_numbers``: over the sweep).
    numbers = {k: n + lanes.numbered for k, n in request_numbers(records).items()}
    lanes.numbered += len(numbers)
    spans = [
        span for r in records if (span := _span(placed, r, label, numbers.get(r.key))) is not None
    ]
    # Each lane takes its spans in the order they begin there: a worker's from when they
    # were sent, a slot's from when it had them.
    for span in sorted(spans, key=lambda span: span.start):
        yield from span.client_events(pid, lanes)
    on_lanes: dict[RequestKey, _OnLane] = {}
    for span in sorted(spans, key=lambda span: span.slot_from):
        yield from span.slot_events(pid, lanes, on_lanes)
    for stall in found_stalls(records):
        yield from _stall_events(placed, stall, on_lanes, numbers, lanes.ids)
    yield from _load_counters(placed, config, spans)
    yield from _sample_counters(placed, config)
    for st in states:
        if st.state == ServerState.CRASHED:
            args = {"config": label, "detail": as_text(st.detail or "")}
            yield _instant(pid, placed.us(st.t_ns), "server crashed", args)
    if times:
        args = {"config": label, "status": as_text(config.status)}
        if config.error:
            args["error"] = as_text(config.error)
        yield _instant(pid, placed.us(max(times)), f"end {label}", args)


@dataclass(frozen=True)
class _OnLane:
    """Where a request's prefill and decode slices went on the slots' lanes."""

    tid: int
    prefill: int  # when its prefill slice begins (its decode's start where it has none)
    decode: int


def _stall_events(
    placed: _Placed,
    stall: Stall,
    on_lanes: dict[RequestKey, _OnLane],
    numbers: dict[RequestKey, int],
    ids: Iterator[int],
) -> Iterator[dict]:
    """A stall as a slice inside its stream's decode, and a flow arrow to it from the
    prefill of the request whose prompt caused it (where that prefill has a slice)."""
    stream = on_lanes.get(stall.stream)
    if stream is None:
        return
    pid, start, end = placed.pid, placed.us(stall.start_ns), placed.us(stall.end_ns)
    cause = "unknown" if stall.unknown else "none"
    if stall.cause is not None:
        cause = numbers.get(stall.cause, "unknown")
    args = {"number": numbers.get(stall.stream), "froze_ms": round((end - start) / 1000, 3)}
    yield _complete(pid, stream.tid, STALL, start, end, {**args, "prompt_of": cause})
    prompt = on_lanes.get(stall.cause) if stall.cause is not None else None
    if prompt is None or prompt.prefill >= prompt.decode:
        return
    flow = {"cat": "stall", "name": STALL_FLOW, "pid": pid, "id": next(ids)}
    yield {
        **flow,
        "ph": "s",
        "tid": prompt.tid,
        "ts": min(max(start, prompt.prefill), prompt.decode - 1),
    }
    yield {**flow, "ph": "f", "bp": "e", "tid": stream.tid, "ts": (start + end) // 2}


@dataclass(frozen=True)
class _Span:
    """One request on the trace's axis (µs): sent, a slot has it (its queue wait over, when
    the server's timings tell it), its decode starts, its decode ends, done."""

    record: RequestRecord
    args: dict[str, Any]  # what each of its events says of it
    start: int
    served: int | None  # None: the queue wait is not known (no timings, or it failed)
    decode: int | None  # None: no token came
    decode_end: int
    done: int

    @property
    def slot_from(self) -> int:
        """When a slot had it, as far as the records tell: waiting until then."""
        return next(t for t in (self.served, self.decode, self.done) if t is not None)

    def client_events(self, pid: int, lanes: _Lanes) -> Iterator[dict]:
        """Its span on its worker's lane, its queue wait, a failure's mark."""
        r, args = self.record, self.args
        tid, _, named = lanes.place(_WORKER, r.worker or 0, self.start, self.done)
        yield from named
        yield _complete(pid, tid, REQUEST if r.ok else FAILED_REQUEST, self.start, self.done, args)
        if self.served is not None and self.served > self.start:
            wait = {"cat": "queue", "name": QUEUE_WAIT, "pid": pid, "tid": tid}
            wait["id"] = next(lanes.ids)
            yield {**wait, "ph": "b", "ts": self.start, "args": args}
            yield {**wait, "ph": "e", "ts": self.served}
        if not r.ok:
            yield _instant(pid, self.done, FAILED_REQUEST, args)

    def slot_events(
        self, pid: int, lanes: _Lanes, on_lanes: dict[RequestKey, _OnLane]
    ) -> Iterator[dict]:
        """Its prefill and decode on its slot's lane (a lane of requests with no slot where
        the server's log matched none), where it went kept in ``on_lanes`` for the stalls.
        The client sees a request's last token after the server gave its slot to the next:
        a span beginning less than ``HANDOVER_US`` before its slot's lane is free (and
        before its decode) is drawn from there."""
        if self.decode is None:
            return
        r, args = self.record, self.args
        group, number = (_SLOT, r.slot) if r.slot is not None else (_NO_SLOT, 0)
        give = min(HANDOVER_US, self.decode - self.slot_from)
        tid, begins, named = lanes.place(group, number, self.slot_from, self.decode_end, give)
        yield from named
        on_lanes[r.key] = _OnLane(tid, min(begins, self.decode), self.decode)
        if begins < self.decode:
            yield _complete(pid, tid, PREFILL, begins, self.decode, args)
        name = DECODE if r.ok else FAILED_DECODE
        yield _complete(pid, tid, name, self.decode, self.decode_end, args)


def _span(placed: _Placed, r: RequestRecord, label: str, number: int | None) -> _Span | None:
    """Where a request's parts lie, as the queue Gantt splits them: its queue wait as the
    catalogue defines it (TTFT less the server's prompt time), then its prefill for as long
    as the server's timings say, then its decode to its last token (a failed one's to its
    end). A whole answer's decoding, which the client could not watch, ends at its first
    (and only) text. Times a file got out of order are clamped into order."""
    if r.t_submit_ns is None:
        return None
    start = placed.us(r.t_submit_ns)
    ends = [t for t in (r.t_done_ns, r.t_last_token_ns, r.t_first_token_ns) if t is not None]
    done = max([start, *(placed.us(t) for t in ends)])
    metrics = request_metrics(r)
    decode = served = None
    if r.t_first_token_ns is not None:
        decode = min(max(placed.us(r.t_first_token_ns), start), done)
    if metrics is not None and metrics.queue_wait_s is not None and decode is not None:
        served = min(placed.us(r.t_submit_ns + round(metrics.queue_wait_s * NS)), decode)
        served = max(served, start)
        if metrics.prefill_s is not None:
            prefill_end = r.t_submit_ns + round((metrics.queue_wait_s + metrics.prefill_s) * NS)
            decode = max(served, min(placed.us(prefill_end), decode))
    last = r.t_last_token_ns if r.ok else r.t_done_ns
    decode_end = done if last is None else placed.us(last)
    decode_end = min(max(decode_end, start if decode is None else decode), done)
    return _Span(r, _args(r, metrics, label, number), start, served, decode, decode_end, done)


def _args(
    r: RequestRecord, metrics: RequestMetrics | None, label: str, number: int | None
) -> dict[str, Any]:
    """A request's key, its configuration and figures (ms, the catalogue's), its slot and
    worker; its number (as requests.csv and every view give it; ``request`` is the key's
    prompt index) and, in a trace replay, the trace's line it replays."""

    def ms(seconds: float | None) -> float | None:
        return None if seconds is None else round(seconds * 1000, 3)

    args: dict[str, Any] = {
        "config": label,
        "config_index": r.config_index,
        "repeat": r.repeat,
        "request": r.index,
        "ttft_ms": None if metrics is None else ms(metrics.ttft_s),
        "e2e_ms": None if metrics is None else ms(metrics.e2e_s),
        "queue_wait_ms": None if metrics is None else ms(metrics.queue_wait_s),
        "slot": r.slot,
        "worker": r.worker or 0,
    }
    if number is not None:
        args["number"] = number
    if r.trace_line is not None:
        args["trace_line"] = r.trace_line
    if r.warmup:
        args["warmup"] = True
    if r.error:
        args["error"] = as_text(r.error)
    return args


def _load_counters(placed: _Placed, config: ConfigRow, spans: list[_Span]) -> Iterator[dict]:
    """Requests running and waiting: the server's own counts where its /metrics gave them,
    else counted from the records (waiting through the queue wait, running to done)."""
    s, pid = placed.session, placed.pid
    from_server = []
    kind = None
    for sample in s.samples("metrics_samples", config.index):
        values = sample.values or {}
        kind = kind or detect(values)
        if kind is None:
            continue
        load = kind.load(values)
        counts = {
            k: v
            for k, v in (("running", load.running), ("waiting", load.waiting))
            if v is not None and math.isfinite(v)
        }
        if counts:
            from_server.append(_counter(pid, placed.us(sample.t_ns), SERVER_REQUESTS, counts))
    if from_server:
        yield from from_server
        return
    changes: list[tuple[int, int, int]] = []  # (µs, change in waiting, change in running)
    for span in spans:
        changes += [(span.start, 1, 0), (span.slot_from, -1, 1), (span.done, 0, -1)]
    changes.sort()
    waiting = running = 0
    for k, (t, dw, dr) in enumerate(changes):
        waiting, running = waiting + dw, running + dr
        if k + 1 == len(changes) or changes[k + 1][0] != t:
            counts = {"running": running, "waiting": waiting}
            yield _counter(pid, t, CLIENT_REQUESTS, counts)


def _sample_counters(placed: _Placed, config: ConfigRow) -> Iterator[dict]:
    s, pid = placed.session, placed.pid
    for sample in s.samples("slots_samples", config.index):
        busy = sum(1 for slot in sample.slots or () if slot.get("is_processing") is True)
        yield _counter(pid, placed.us(sample.t_ns), BUSY_SLOTS, {"busy": busy})
    for table, name, attribute in (
        ("process_samples", RSS, "rss_bytes"),
        ("gpu_samples", GPU_MEMORY, "gpu_bytes"),
    ):
        for sample in s.samples(table, config.index):
            value = getattr(sample, attribute)
            if isinstance(value, int) and not isinstance(value, bool):
                yield _counter(pid, placed.us(sample.t_ns), name, {"MiB": value / MIB})


def _notices(placed: _Placed, s: Session) -> Iterator[dict]:
    """Errors the run noticed (a crashed server, a configuration that failed), as instants."""
    labels = {c.index: as_text(c.label) for c in s.configs}
    for notice in s.notices():
        if notice.level is NoticeLevel.ERROR:
            args = {"text": as_text(notice.text or "")}
            if notice.config_index in labels:
                args["config"] = labels[notice.config_index]
            yield _instant(placed.pid, placed.us(notice.t_ns), "error", args)


def _complete(pid: int, tid: int, name: str, start: int, end: int, args: dict) -> dict:
    return {
        "ph": "X",
        "name": name,
        "cat": "request",
        "pid": pid,
        "tid": tid,
        "ts": start,
        "dur": end - start,
        "args": args,
    }


def _instant(pid: int, ts: int, name: str, args: dict) -> dict:
    return {"ph": "i", "s": "p", "name": name, "pid": pid, "tid": 0, "ts": ts, "args": args}


def _counter(pid: int, ts: int, name: str, values: dict[str, float]) -> dict:
    return {"ph": "C", "name": name, "pid": pid, "tid": 0, "ts": ts, "args": values}


def trace_name(sessions: Sequence[Session]) -> str:
    """The trace's file name: the session's own (``sweep.perfetto.json``), or the first's
    with how many more were exported with it."""
    stem = sessions[0].path.name.removesuffix(".sqlite").removesuffix(".session")
    more = f"+{len(sessions) - 1}" if len(sessions) > 1 else ""
    return f"{stem}{more}{EXTENSION}"


def write_trace(
    sessions: Sequence[Session], folder: Path, align: str = ALIGN_WALL
) -> tuple[Path, int]:
    """The sessions' trace in ``folder``, placed as ``align`` says; returns its path and
    how many events it holds."""
    path = folder / trace_name(sessions)
    return path, write_events(path, trace_events(sessions, align), other_data(sessions, align))


def write_events(path: Path, events: Iterable[dict[str, Any]], other: dict[str, Any]) -> int:
    """A Chrome/Perfetto trace of ``events`` at ``path`` (written beside, then moved into
    place, so a failed export leaves no half a file); returns how many events it holds."""
    partial = path.with_name(path.name + ".partial")
    count = 0
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with partial.open("w", encoding="utf-8") as out:
            out.write('{"traceEvents": [\n')
            for event in events:
                out.write(",\n" if count else "")
                out.write(json.dumps(event, ensure_ascii=False, allow_nan=False))
                count += 1
            out.write('\n],\n"displayTimeUnit": "ms",\n"otherData": ')
            out.write(json.dumps(other, ensure_ascii=False, allow_nan=False))
            out.write("}\n")
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise OutputDirError(f"cannot write {path}: {exc.strerror or exc}") from None
    return count
