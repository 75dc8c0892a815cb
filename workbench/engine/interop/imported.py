"""Another tool's result as a session: what every reader of a result file produces, and how
it is written into a session file through the real session writer.

A reader turns a file into an ``ImportedResult``: its runs (a load level each), each run's
requests with the times the file keeps, and the figures the file states. This module turns
that into the events a run would have published, so the Sessions tab, Compare, the Gantt,
the report and the SLO evaluation read an imported session exactly as a measured one. The
figures the workbench shows for it are its own, derived from those times by its catalogue;
the file's own figures are kept beside them, under the file's names.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from workbench.engine.base.errors import ExperimentError, ImportFileError, OutputDirError
from workbench.engine.base.records import Hardware, ImportSource, RequestRecord, TokenChunk
from workbench.engine.base.states import ConfigStatus, NoticeLevel, RunStatus
from workbench.engine.config.experiment import RunConfig, experiment_to_toml, parse_experiment
from workbench.engine.events import (
    ConfigFinished,
    ConfigStarted,
    EventBus,
    ExperimentFinished,
    ImportedFrom,
    Notice,
    ReportedFigures,
    RequestFinished,
)
from workbench.engine.interop.values import MAX_SECONDS
from workbench.engine.store import SessionWriter, create_session, open_session
from workbench.engine.store.writer import REFUSED

NS = 1_000_000_000

TEXT_NOTE = (
    "the file keeps each answer whole, not chunk by chunk: a replay shows it at one chunk "
    "(the last the file times)"
)
NO_START_NOTE = "the file gives some requests no start time: they are placed at 0 s"
GAP_TOLERANCE_S = 0.001  # chunk gaps a tool rounded may add up past the end by this much


def ns(seconds: float) -> int:
    return round(seconds * NS)


@dataclass(frozen=True)
class ImportedRequest:
    """One request as a result file keeps it; seconds, None where the file does not say."""

    start_s: float | None  # when it was sent, on the file's clock (any origin)
    ttft_s: float | None
    latency_s: float | None  # sent to last token
    chunk_gaps_s: tuple[float, ...] = ()  # between consecutive chunks after the first
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    text: str = ""
    error: str | None = None  # None: it succeeded

    @property
    def whole(self) -> bool:
        """A success without a first-token time: its answer came whole (not streamed)."""
        return self.error is None and self.ttft_s is None

    def record(self, config_index: int, index: int, origin_s: float) -> RequestRecord:
        """As a request record on the session's clock (its origin at ``origin_s``). Times
        are whole nanoseconds, added up gap by gap, so that times a file got from a session
        come back exactly."""
        submit = ns(self.start_s - origin_s) if self.start_s is not None else 0
        usage = {
            key: value
            for key, value in (
                ("prompt_tokens", self.prompt_tokens),
                ("completion_tokens", self.output_tokens),
            )
            if value is not None
        }
        sent = RequestRecord(
            config_index,
            0,
            index,
            prompt="",
            prompt_tokens=self.prompt_tokens,
            t_submit_ns=submit,
            usage=usage or None,
        )
        if self.error is not None or self.latency_s is None:
            done = submit + ns(self.latency_s) if self.latency_s else submit
            error = self.error or "the file gives no time for its end"
            return replace(sent, t_done_ns=done, error=error)
        where = f"request {index} of run {config_index + 1}"
        streamed = not self.whole
        ttft = self.ttft_s if streamed else self.latency_s  # a whole answer: at its end
        if ttft > self.latency_s:
            raise ImportFileError(
                f"{where}: its first token ({ttft:g} s) comes after its end ({self.latency_s:g} s)"
            )
        if sum(self.chunk_gaps_s) > self.latency_s - ttft + GAP_TOLERANCE_S:
            raise ImportFileError(
                f"{where}: its chunks ({sum(self.chunk_gaps_s):g} s after the first) run "
                f"past its end ({self.latency_s - ttft:g} s after the first)"
            )
        first = submit + ns(ttft)
        times = [first]
        for gap in self.chunk_gaps_s if streamed else ():
            times.append(times[-1] + ns(gap))
        last = submit + ns(self.latency_s)
        chunks = [TokenChunk(t, "") for t in times]
        chunks[-1] = TokenChunk(times[-1], self.text)
        return replace(
            sent,
            streamed=streamed,
            t_first_token_ns=first,
            t_last_token_ns=last,
            t_done_ns=last,
            ok=True,
            chunks=chunks,
        )


@dataclass(frozen=True)
class ImportedRun:
    """One load level of a result file (one vLLM file, one GuideLLM benchmark, ...)."""

    requests: tuple[ImportedRequest, ...]
    concurrency: int | None = None  # the client's limit on requests in flight; None: none
    rate: float | None = None  # requests per second; None: all at once
    arrival: str = "burst"  # as the workload's ``arrival`` field
    burstiness: float = 1.0
    endpoint: str = "chat"
    name: str = ""  # the file's own name for the run, said in a notice
    reported: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ImportedResult:
    source: ImportSource
    runs: tuple[ImportedRun, ...]
    model: str | None = None
    base_url: str | None = None
    notes: tuple[str, ...] = ()  # what the import could not take, or had to assume
    name: str = ""  # the session's name; the tool's when not given
    recorded_at: str | None = None  # when the file says it ran (ISO 8601); None: not said

    @property
    def session_name(self) -> str:
        return self.name or f"{self.source.tool} import"


def _workload(run: ImportedRun, model: str | None) -> dict[str, Any]:
    """The workload the file describes, in the experiment's own fields (so the session shows
    it as it would show one of its own runs)."""
    tokens = [r.output_tokens for r in run.requests if r.output_tokens]
    workload: dict[str, Any] = {
        "requests": len(run.requests),
        "concurrency": run.concurrency or 0,
        "arrival": run.arrival,
        "max_tokens": max(tokens, default=1),
        "endpoint": run.endpoint,
        "warmup": 0,
        "stream": not any(r.whole for r in run.requests),
    }
    if run.arrival != "burst":
        workload["rate"] = run.rate
    if run.arrival == "gamma":
        workload["burstiness"] = run.burstiness
    if model:
        workload["model_name"] = model
    return workload


def run_configs(result: ImportedResult) -> tuple[str, list[RunConfig]]:
    """The experiment file an import stands for, and its configurations: the fields that
    differ between the runs are its sweep axes, stepping together (``zip``), so each run is
    one configuration, labelled by what sets it apart."""
    if not result.runs:
        raise ImportFileError(f"{result.source.file_name}: the file holds no run")
    loads = [_workload(run, result.model) for run in result.runs]
    keys = list(dict.fromkeys(k for w in loads for k in w))
    workload: dict[str, Any] = {}
    axes = []
    for key in keys:
        values = [w.get(key) for w in loads]
        if len(result.runs) > 1 and len({repr(v) for v in values}) > 1:
            workload[key] = values
            axes.append(f"workload.{key}")
        elif values[0] is not None:
            workload[key] = values[0]
    toml = experiment_to_toml(
        result.session_name,
        result.source.describe(),
        {},
        workload,
        tuple(axes) if len(axes) > 1 else (),
    )
    try:
        configs = parse_experiment(toml, result.session_name).configs(external=True)
    except ExperimentError as exc:
        raise ImportFileError(
            f"{result.source.file_name}: its runs do not fit a workload ({exc})"
        ) from None
    if len(configs) != len(result.runs):
        raise ImportFileError(f"{result.source.file_name}: two of its runs cannot be told apart")
    return toml, _distinct_labels(configs, result.runs)


def _load(run: ImportedRun) -> str:
    """What sets one run's load: its limit on requests in flight and its rate."""
    parts = [f"concurrency={run.concurrency}"] if run.concurrency else []
    parts += [f"rate={run.rate:g}/s"] if run.rate else []
    return " ".join(parts) or "all at once"


def _distinct_labels(configs: list[RunConfig], runs: Sequence[ImportedRun]) -> list[RunConfig]:
    """A lone run is labelled by its load (an external server's one configuration would read
    "external"); runs of the same workload (two files of one setting) keep apart by the
    file's name for them."""
    if len(configs) == 1:
        return [replace(configs[0], label=_load(runs[0]))]
    seen = Counter(c.label for c in configs)
    return [
        replace(c, label=f"{c.label} {run.name or c.index}".strip()) if seen[c.label] > 1 else c
        for c, run in zip(configs, runs, strict=True)
    ]


def _events(result: ImportedResult, configs: list[RunConfig]) -> Iterator[Any]:
    yield ImportedFrom(result.source)
    yield Notice(NoticeLevel.INFO, f"This session was {result.source.describe()}.")
    for text in result.notes:
        yield Notice(NoticeLevel.WARNING, text)
    requests = [r for run in result.runs for r in run.requests]
    if any(r.text for r in requests):
        yield Notice(NoticeLevel.INFO, TEXT_NOTE)
    if any(r.start_s is None for r in requests):
        yield Notice(NoticeLevel.WARNING, NO_START_NOTE)
    starts = [r.start_s for r in requests if r.start_s is not None]
    origin = min(starts, default=0.0)
    if starts and max(starts) - origin > MAX_SECONDS:
        raise ImportFileError(
            f"{result.source.file_name}: its requests start {max(starts) - origin:g} s apart, "
            "not one benchmark"
        )
    for config, run in zip(configs, result.runs, strict=True):
        i = config.index
        yield ConfigStarted(config, len(run.requests))
        if run.name:
            yield Notice(NoticeLevel.INFO, f"{config.label} is the file's {run.name}", i)
        for index, request in enumerate(run.requests):
            try:
                record = request.record(i, index, origin)
            except ImportFileError as exc:
                raise ImportFileError(f"{result.source.file_name}: {exc}") from None
            yield RequestFinished(record)
        if run.reported:
            yield ReportedFigures(i, dict(run.reported))
        yield ConfigFinished(i, ConfigStatus.OK)
    yield ExperimentFinished(RunStatus.COMPLETE)


def import_events(result: ImportedResult) -> tuple[str, list[RunConfig], list[Any]]:
    """What importing ``result`` writes, every request checked: the experiment file its runs
    stand for, its configurations, and the events a run would have published."""
    toml, configs = run_configs(result)
    return toml, configs, list(_events(result, configs))


def write_imported_session(result: ImportedResult, path: Path) -> Path:
    """Write ``result`` as the session file ``path`` (which must not exist yet)."""
    if path.exists():
        raise ImportFileError(f"{path} exists already; the import writes a new session")
    toml, _, events = import_events(result)  # all checked before a file exists
    try:
        create_session(
            path,
            result.session_name,
            toml,
            None,
            "external",
            result.base_url,
            Hardware(),
            0,
            created_at=result.recorded_at,
        )
    except (OSError, sqlite3.Error) as exc:
        raise OutputDirError(f"cannot create {path}: {exc}") from None
    bus = EventBus()
    writer = SessionWriter(path, bus)
    writer.start()
    for event in events:
        bus.publish(event)
    writer.join()  # bounded: a file brings at most MAX_CHUNKS chunks
    problem = _unwritten(path, writer)
    if problem is not None:
        _remove(path)
        raise ImportFileError(f"{result.source.file_name}: {problem}; no session was kept")
    return path


def _unwritten(path: Path, writer: SessionWriter) -> str | None:
    """Why the session is not the whole file (None: it is): a failed write, or a request
    the store refused (the writer keeps going past one, with a notice, as a run must; an
    import must not)."""
    if writer.error is not None:
        return f"cannot write {path.name} ({writer.error})"
    with open_session(path) as session:
        refused = [n.text for n in session.notices() if (n.text or "").startswith(REFUSED)]
    return refused[0] if refused else None


def _remove(path: Path) -> None:
    for leftover in (path, *(path.with_name(path.name + end) for end in ("-wal", "-shm"))):
        leftover.unlink(missing_ok=True)
