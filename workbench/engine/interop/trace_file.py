"""A recorded trace to replay (``arrival = "trace"``), read whole and checked before any server
starts, so nothing runs from a half-read file.

Two JSON Lines formats, told apart by the first row. Mooncake's: ``timestamp`` (ms since the
trace began), ``input_length`` and ``output_length`` (tokens) and ``hash_ids`` (one id per
block of ``block_size`` prompt tokens: rows that share an id share that block of prompt, so
the trace's prefix sharing can be reproduced). AIPerf's variant adds ``session_id``: a
session's turns are sent in file order, its first at its ``timestamp`` (or 0), each later one
``delay`` ms after the previous turn's reply ended. Every value is checked for its type and
range by the row's model, and each error names the file, the line and the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from workbench.engine.base.errors import ExperimentError
from workbench.engine.base.records import RequestRecord
from workbench.engine.base.validation import validated
from workbench.engine.config.experiment import RunConfig, WorkloadSettings, workload_file
from workbench.engine.config.settings import DAY_S
from workbench.engine.config.workloads import TraceWorkload
from workbench.engine.interop.files import bounded_lines, json_line
from workbench.engine.interop.values import MAX_MS

MAX_ROWS = 100_000  # as many as an experiment's ``requests`` may ask for
MAX_LINE_BYTES = 2**20
MAX_TOKENS = 10_000_000  # a row's length, as ``input_tokens`` is bounded
MAX_ROW_HASH_IDS = 20_000  # blocks of one row: 10 M tokens of 512-token blocks
MAX_FILE_HASH_IDS = 5_000_000  # in the whole file: each is kept in memory
MAX_SESSION_ID = 200  # characters

MOONCAKE = "Mooncake"
AIPERF = "AIPerf"

Ms = Annotated[float, Field(ge=0, le=MAX_MS, allow_inf_nan=False)]  # a time in the trace


def _number_as_text(value: Any) -> Any:
    return str(value) if type(value) is int else value


class MooncakeRow(BaseModel):
    """A row of a Mooncake trace: nothing but its fields, each of its type and range."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, defer_build=True)

    timestamp: Ms
    input_length: Annotated[int, Field(ge=0, le=MAX_TOKENS)]
    output_length: Annotated[int, Field(ge=1, le=MAX_TOKENS)] | None = None  # None: max_tokens
    hash_ids: Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=MAX_ROW_HASH_IDS)] = []


class AiperfRow(MooncakeRow):
    """A row of AIPerf's trace: a session's turn. Its first has a ``timestamp`` (or none:
    at 0), a later one a ``delay`` after the previous reply."""

    session_id: Annotated[
        Annotated[str, Field(min_length=1, max_length=MAX_SESSION_ID)],
        BeforeValidator(_number_as_text),  # a number names a session as its text does
    ]
    timestamp: Ms | None = None
    delay: Ms | None = None


_ROWS: dict[str, type[MooncakeRow]] = {MOONCAKE: MooncakeRow, AIPERF: AiperfRow}


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
    """A trace as one configuration replays it, per repeat: the rows of its window, from
    ``trace_start_s`` for ``trace_duration_s`` (at most ``max_requests``), with their times
    and lengths scaled."""

    name: str  # the file's
    rows: tuple[TraceRow, ...]
    offsets: list[float]  # seconds after t0 a row is due (a later turn's: unused, 0)
    follows: list[tuple[int, float] | None]  # a later turn: the turn before it, and the delay (s)
    input_tokens: list[int]  # each prompt's length
    output_tokens: list[int]  # each request's max_tokens
    block_tokens: int  # tokens of prompt per hash id
    soonest: list[float]  # seconds after t0 a row can go at the soonest (replies taking none)

    @property
    def span_s(self) -> float:
        """How long the rows take to send at the least: the last one's soonest time (a
        later turn's, as if every reply before it took no time)."""
        return max(self.soonest)

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
        where = f"{path.name}:{number}"
        found = json_line(line, where, ExperimentError)
        if checker is None:
            checker = _Rows(path.name, _format_of(found, where))
        row = validated(_ROWS[checker.format], found, where, ExperimentError)
        rows.append(checker.row(row, number))
    if checker is None:
        raise ExperimentError(f"{path.name}: no rows: not a trace")
    return Trace(path.name, checker.format, tuple(rows))


def _format_of(row: Any, where: str) -> str:
    """The format the first row says, by its fields (a row that is no table is read as
    Mooncake's, whose model then says what is wrong)."""
    if not isinstance(row, dict):
        return MOONCAKE
    if "session_id" in row:
        return AIPERF
    if "timestamp" in row:
        return MOONCAKE
    raise ExperimentError(
        f"{where}: neither 'timestamp' (a Mooncake trace) nor 'session_id' (AIPerf's): not a trace"
    )


class _Rows:
    """What holds across a file's rows, in order: timestamps that never go back, a session's
    turns, the file's hash ids."""

    def __init__(self, name: str, format: str) -> None:
        self.name, self.format = name, format
        self.hash_ids = 0
        self.last_time: tuple[float, int] | None = None  # the latest timestamp and its line
        self.sessions: set[str] = set()

    def row(self, found: MooncakeRow, number: int) -> TraceRow:
        where = f"{self.name}:{number}:"
        self.hash_ids += len(found.hash_ids)
        if self.hash_ids > MAX_FILE_HASH_IDS:
            raise ExperimentError(
                f"{where} hash_ids brings the file's hash ids over {MAX_FILE_HASH_IDS:,}, "
                "the most read"
            )
        timestamp, session, delay = found.timestamp, None, None
        if isinstance(found, AiperfRow):
            session, delay = found.session_id, found.delay
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
            if later and delay is None:
                delay = 0.0
        if timestamp is not None:
            if self.last_time is not None and timestamp < self.last_time[0]:
                raise ExperimentError(
                    f"{where} timestamp {timestamp:g} is before line {self.last_time[1]}'s "
                    f"{self.last_time[0]:g}: timestamps must not go backwards"
                )
            self.last_time = (timestamp, number)
        elif delay is None:
            timestamp = 0.0  # a session's first turn with no time: at the start
        return TraceRow(
            number,
            found.input_length,
            found.output_length,
            tuple(found.hash_ids),
            timestamp,
            session,
            delay,
        )


def plan_trace(trace: Trace, workload: WorkloadSettings) -> TracePlan:
    """The rows one configuration sends per repeat, as its trace settings say: those that
    arrive from ``trace_start_s`` for ``trace_duration_s`` (a session whose first turn
    arrives outside that window is left out whole; one whose first turn is inside keeps its
    later turns, which follow its replies), at most ``max_requests``, times divided by
    ``time_scale`` and lengths multiplied by ``length_scale`` (a prompt's blocks with them)."""
    start_ms = workload.trace_start_s * 1000
    end_ms = start_ms + workload.trace_duration_s * 1000 if workload.trace_duration_s else math.inf
    rows, skipped = [], set()
    for row in trace.rows:
        first = row.delay_ms is None
        if (
            first and row.timestamp_ms is not None and not start_ms <= row.timestamp_ms < end_ms
        ) or (not first and row.session_id in skipped):
            skipped.add(row.session_id)
            continue
        rows.append(row)
        if len(rows) == workload.max_requests:
            break
    if not rows:
        raise ExperimentError(f"{trace.name}: no rows {_window_words(trace, workload)}")
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
        earliest,
    )


def _window_words(trace: Trace, workload: WorkloadSettings) -> str:
    """The window a workload asks of a trace, and where the trace's rows arrive, for the
    error of a window that holds none."""
    start = workload.trace_start_s
    window = (
        f"from trace_start_s = {start:g} s for trace_duration_s = {workload.trace_duration_s:g} s"
        if workload.trace_duration_s
        else f"from trace_start_s = {start:g} s on"
    )
    times = [r.timestamp_ms / 1000 for r in trace.rows if r.timestamp_ms is not None]
    return f"{window}: its rows arrive from {min(times):g} s to {max(times):g} s"


def trace_plans(configs: Iterable[RunConfig], base_dir: Path | None) -> dict[int, TracePlan]:
    """Each trace configuration's plan, by its index: every file read once, whole."""
    read: dict[str, Trace] = {}
    plans = {}
    for config in configs:
        workload = config.workload
        if not isinstance(workload, TraceWorkload):
            continue
        if workload.trace not in read:
            read[workload.trace] = read_trace(workload_file("trace", workload.trace, base_dir))
        plans[config.index] = plan_trace(read[workload.trace], workload)
    return plans
