"""A recorded trace to replay (``arrival = "trace"``), read whole and checked before any server
starts, so nothing runs from a half-read file.

Two JSON Lines formats, told apart by the first row. Mooncake's: ``timestamp`` (ms since the
trace began), ``input_length`` and ``output_length`` (tokens) and ``hash_ids`` (one id per
block of ``block_size`` prompt tokens: rows that share an id share that block of prompt, so
the trace's prefix sharing can be reproduced). AIPerf's variant adds ``session_id``: a
session's turns are sent in file order, its first at its ``timestamp`` (or 0), each later one
``delay`` ms after the previous turn's reply ended. Every value is checked for its type and
range, and each error names the file, the line and the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.engine.base.errors import ExperimentError
from workbench.engine.base.records import RequestRecord
from workbench.engine.config.experiment import RunConfig, WorkloadSettings, workload_file
from workbench.engine.config.settings import DAY_S
from workbench.engine.interop.checked import MAX_PROBLEM, MAX_SECONDS
from workbench.engine.interop.files import bounded_lines

MAX_ROWS = 100_000  # as many as an experiment's ``requests`` may ask for
MAX_LINE_BYTES = 2**20
MAX_TOKENS = 10_000_000  # a row's length, as ``input_tokens`` is bounded
MAX_ROW_HASH_IDS = 20_000  # blocks of one row: 10 M tokens of 512-token blocks
MAX_FILE_HASH_IDS = 5_000_000  # in the whole file: each is kept in memory
MAX_MS = MAX_SECONDS * 1000  # a time in the trace (115 days): beyond it, damage
MAX_SESSION_ID = 200  # characters

MOONCAKE = "Mooncake"
AIPERF = "AIPerf"
_FIELDS = {
    MOONCAKE: ("timestamp", "input_length", "output_length", "hash_ids"),
    AIPERF: ("session_id", "timestamp", "delay", "input_length", "output_length", "hash_ids"),
}


@dataclass(frozen=True)
class TraceRow:
    """One request of the trace, as the file says it (unscaled)."""

    line: int
    input_length: int
    output_length: int | None  # None: not given, the workload's max_tokens is asked
    hash_ids: tuple[int, ...] = ()
    timestamp_ms: float | None = None  # a Mooncake row's, or a session's first turn's
    session_id: str | None = None  # AIPerf's
    delay_ms: float | None = None  # a later turn's wait after the previous reply


@dataclass(frozen=True)
class Trace:
    name: str
    format: str  # MOONCAKE or AIPERF
    rows: tuple[TraceRow, ...]


@dataclass(frozen=True)
class TracePlan:
    """A trace as one configuration replays it, per repeat: the rows from ``trace_start_s``
    (at most ``max_requests``), with their times and lengths scaled."""

    name: str  # the file's
    rows: tuple[TraceRow, ...]
    offsets: list[float]  # seconds after t0 a row is due (a later turn's: unused, 0)
    follows: list[tuple[int, float] | None]  # a later turn: the turn before it, and the delay (s)
    input_tokens: list[int]  # each prompt's length
    output_tokens: list[int]  # each request's max_tokens
    block_tokens: int  # tokens of prompt per hash id

    def name_lines(self, records: Sequence[RequestRecord]) -> None:
        """Each of a repeat's records (one per row, in the rows' order) named with the line
        of the file it replays: rows due at one moment go out, and are numbered, in the
        order they happen to be sent, so a request's number does not say its row."""
        for record, row in zip(records, self.rows, strict=True):
            record.trace_line = row.line

    @property
    def longest_request(self) -> int:
        """The most tokens one request needs in a slot: its prompt and its answer."""
        return max(i + o for i, o in zip(self.input_tokens, self.output_tokens, strict=True))


def read_trace(path: Path) -> Trace:
    """Every row of the trace at ``path``, checked, or one ``ExperimentError`` naming the file,
    the line and the field."""
    rows: list[TraceRow] = []
    checker: _Rows | None = None
    for number, line in enumerate(
        bounded_lines(path, ExperimentError, max_lines=MAX_ROWS, max_line_bytes=MAX_LINE_BYTES),
        1,
    ):
        if not line.strip():
            continue
        where = f"{path.name}:{number}:"
        try:
            found = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise ExperimentError(f"{where} not valid JSON ({_short(str(exc))})") from None
        if not isinstance(found, dict):
            raise ExperimentError(f"{where} a row should be a JSON object, not {_kind(found)}")
        if checker is None:
            checker = _Rows(path.name, _format_of(found, where))
        rows.append(checker.row(found, number))
    if checker is None:
        raise ExperimentError(f"{path.name}: no rows: not a trace")
    return Trace(path.name, checker.format, tuple(rows))


def _format_of(row: dict[str, Any], where: str) -> str:
    if "session_id" in row:
        return AIPERF
    if "timestamp" in row:
        return MOONCAKE
    raise ExperimentError(
        f"{where} neither 'timestamp' (a Mooncake trace) nor 'session_id' (AIPerf's): not a trace"
    )


class _Rows:
    """Checks a file's rows in order: their fields, and what holds across rows (timestamps
    that never go back, a session's turns, the file's hash ids)."""

    def __init__(self, name: str, format: str) -> None:
        self.name, self.format = name, format
        self.hash_ids = 0
        self.last_time: tuple[float, int] | None = None  # the latest timestamp and its line
        self.sessions: set[str] = set()

    def row(self, found: dict[str, Any], number: int) -> TraceRow:
        where = f"{self.name}:{number}:"
        known = _FIELDS[self.format]
        for key in found:
            if key not in known:
                raise ExperimentError(
                    f"{where} unknown field {_short(repr(key))} for a {self.format} trace "
                    f"(its rows have {', '.join(known)})"
                )
        if "input_length" not in found:
            raise ExperimentError(f"{where} input_length is missing")
        input_length = _count(found["input_length"], f"{where} input_length", 0)
        output = found.get("output_length")
        output_length = None if output is None else _count(output, f"{where} output_length", 1)
        hash_ids = self._hash_ids(found.get("hash_ids", []), f"{where} hash_ids")
        timestamp = found.get("timestamp")
        if self.format == MOONCAKE and timestamp is None:
            raise ExperimentError(f"{where} timestamp is missing")
        session, delay = None, None
        if self.format == AIPERF:
            session = _session(found.get("session_id"), where)
            delay = found.get("delay")
            later = session in self.sessions
            self.sessions.add(session)
            if later and timestamp is not None:
                raise ExperimentError(
                    f"{where} timestamp on a later turn of session {session!r}: it is sent "
                    "'delay' ms after the previous reply; give delay"
                )
            if not later and delay is not None:
                raise ExperimentError(
                    f"{where} delay on the first turn of session {session!r}: there is no reply "
                    "before it; give timestamp"
                )
            delay = None if delay is None else _ms(delay, f"{where} delay")
            if later and delay is None:
                delay = 0.0
        moment = None if timestamp is None else _ms(timestamp, f"{where} timestamp")
        if moment is not None:
            if self.last_time is not None and moment < self.last_time[0]:
                raise ExperimentError(
                    f"{where} timestamp {moment:g} is before line {self.last_time[1]}'s "
                    f"{self.last_time[0]:g}: timestamps must not go backwards"
                )
            self.last_time = (moment, number)
        elif delay is None:
            moment = 0.0  # a session's first turn with no time: at the start
        return TraceRow(number, input_length, output_length, hash_ids, moment, session, delay)

    def _hash_ids(self, value: Any, where: str) -> tuple[int, ...]:
        if not isinstance(value, list):
            raise ExperimentError(f"{where} should be a list, not {_kind(value)}")
        if len(value) > MAX_ROW_HASH_IDS:
            raise ExperimentError(f"{where} has {len(value):,}, over {MAX_ROW_HASH_IDS:,} a row")
        self.hash_ids += len(value)
        if self.hash_ids > MAX_FILE_HASH_IDS:
            raise ExperimentError(
                f"{where} brings the file's hash ids over {MAX_FILE_HASH_IDS:,}, the most read"
            )
        for k, h in enumerate(value):
            if type(h) is not int or h < 0:
                raise ExperimentError(
                    f"{where}[{k}] is {_short(repr(h))}, not a hash id (an int ≥ 0)"
                )
        return tuple(value)


def _count(value: Any, where: str, least: int) -> int:
    """A token count: a whole number (not a bool), from ``least`` to ``MAX_TOKENS``."""
    if type(value) is not int:
        raise ExperimentError(f"{where} should be a whole number, not {_short(repr(value))}")
    if not least <= value <= MAX_TOKENS:
        raise ExperimentError(
            f"{where} is {value}, not a count of tokens from {least} to {MAX_TOKENS:,}"
        )
    return value


def _ms(value: Any, where: str) -> float:
    """A time in the trace, in ms: a finite number (not a bool), from 0 to ``MAX_MS``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ExperimentError(f"{where} should be a number of ms, not {_short(repr(value))}")
    try:
        ms = float(value)
    except OverflowError:
        raise ExperimentError(f"{where} is too large a number") from None
    if not (math.isfinite(ms) and 0 <= ms <= MAX_MS):
        raise ExperimentError(
            f"{where} is {_short(repr(value))}, not a time from 0 to {MAX_MS:g} ms"
        )
    return ms


def _session(value: Any, where: str) -> str:
    if value is None:
        raise ExperimentError(f"{where} session_id is missing (an AIPerf trace's rows have one)")
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ExperimentError(f"{where} session_id should be text, not {_short(repr(value))}")
    text = str(value)
    if not text or len(text) > MAX_SESSION_ID:
        raise ExperimentError(
            f"{where} session_id should be 1 to {MAX_SESSION_ID} characters, not {len(text)}"
        )
    return text


def _kind(value: Any) -> str:
    return {list: "a list", str: "text", type(None): "null"}.get(type(value), type(value).__name__)


def _short(text: str) -> str:
    return text if len(text) <= MAX_PROBLEM else text[:MAX_PROBLEM] + "…"


def plan_trace(trace: Trace, workload: WorkloadSettings) -> TracePlan:
    """The rows one configuration sends per repeat, as its trace settings say: from
    ``trace_start_s`` (a session that began before it is left out whole), at most
    ``max_requests``, times divided by ``time_scale`` and lengths multiplied by
    ``length_scale`` (a prompt's blocks with them)."""
    start_ms = workload.trace_start_s * 1000
    rows, skipped = [], set()
    for row in trace.rows:
        first = row.delay_ms is None
        if (first and row.timestamp_ms is not None and row.timestamp_ms < start_ms) or (
            not first and row.session_id in skipped
        ):
            skipped.add(row.session_id)
            continue
        rows.append(row)
        if len(rows) == workload.max_requests:
            break
    if not rows:
        raise ExperimentError(
            f"{trace.name}: no rows from trace_start_s = {workload.trace_start_s:g} s on"
        )
    scale = workload.length_scale
    last_turn: dict[str | None, int] = {}
    offsets: list[float] = []
    follows: list[tuple[int, float] | None] = []
    earliest: list[float] = []  # when a row can go at the soonest (a turn: replies take no time)
    for k, row in enumerate(rows):
        if row.delay_ms is None:
            assert row.timestamp_ms is not None
            offsets.append((row.timestamp_ms - start_ms) / 1000 / workload.time_scale)
            follows.append(None)
            earliest.append(offsets[-1])
        else:
            before, delay = last_turn[row.session_id], row.delay_ms / 1000 / workload.time_scale
            offsets.append(0.0)
            follows.append((before, delay))
            earliest.append(earliest[before] + delay)
        last_turn[row.session_id] = k
    if max(earliest) > DAY_S:
        raise ExperimentError(
            f"{trace.name}: its rows take over a day to send at time_scale = "
            f"{workload.time_scale:g} (a run is bounded to a day): raise time_scale or set "
            "max_requests"
        )
    return TracePlan(
        trace.name,
        tuple(rows),
        offsets,
        follows,
        [round(r.input_length * scale) for r in rows],
        [
            workload.max_tokens
            if r.output_length is None
            else max(1, round(r.output_length * scale))
            for r in rows
        ],
        max(1, round(workload.block_size * scale)),
    )


def trace_plans(configs: Iterable[RunConfig], base_dir: Path | None) -> dict[int, TracePlan]:
    """Each trace configuration's plan, by its index: every file read once, whole."""
    read: dict[str, Trace] = {}
    plans = {}
    for config in configs:
        workload = config.workload
        if workload.arrival != "trace":
            continue
        if workload.trace not in read:
            read[workload.trace] = read_trace(workload_file("trace", workload.trace, base_dir))
        plans[config.index] = plan_trace(read[workload.trace], workload)
    return plans
