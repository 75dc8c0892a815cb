"""The rows of a session file: one frozen dataclass per table, its fields the table's columns.

Each ``Stored...`` row is what one row of its table holds, as SQLite holds it (JSON as
text, booleans as 0/1); its ``Table`` (below) derives the INSERT and the SELECT from it.
Where a row stands for something the engine uses (a request record, a configuration, the
client's load), the row says both ways how: ``of`` builds the row to write, ``read`` gives
the thing back with every value it uses checked (``checks.py``), since a file can come from
anyone. Rows are built by keyword only: no value is ever placed by position.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from workbench.engine.base.records import (
    Hardware,
    ImportSource,
    RequestRecord,
    StartupFacts,
    TokenChunk,
)
from workbench.engine.figures.client_limits import ClientLoad
from workbench.engine.store.checks import (
    INT_OR_NONE,
    TEXT_OR_NONE,
    checked_values,
    counters,
    fingerprint,
    json_dict,
    json_strings,
    startup_facts,
    typed,
)
from workbench.engine.store.table import Table, added_in


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


@dataclass(frozen=True, kw_only=True)
class StoredSession:
    """The header: one row, what ran, where, and how it ended."""

    id: int  # always 1
    app_version: str
    name: str
    experiment_path: str | None
    experiment_toml: str
    mode: str
    base_url: str | None
    hardware_json: str
    created_at: str
    finished_at: str | None
    status: str
    error: str | None
    clock_origin_ns: int
    wall_origin: float

    def meta(self) -> dict[str, Any]:
        """The header by column name, every value checked: views show it, and every stored
        time is taken from its clock origin."""
        return checked_values(self)

    def hardware(self) -> Hardware:
        return fingerprint(json_dict(self.hardware_json, "hardware", optional=False) or {})


@dataclass(frozen=True, kw_only=True)
class ConfigRow:
    """One configuration of a session as read back: its settings, how its server started
    and how it ended."""

    index: int
    label: str
    server: dict[str, Any]
    workload: dict[str, Any]
    status: str
    error: str | None
    base_url: str | None
    pid: int | None
    command: list[str] | None
    log_path: str | None
    log_tail: str | None
    facts: StartupFacts | None  # None: its server never got ready
    slots: int | None


@dataclass(frozen=True, kw_only=True)
class StoredConfig:
    """A configuration: written when it starts, its server's facts added when the server is
    ready (``ServerReady``), its outcome when it ends (``ConfigFinished``)."""

    idx: int
    label: str
    server_json: str
    workload_json: str
    status: str
    error: str | None
    base_url: str | None
    pid: int | None
    command_json: str | None
    log_path: str | None
    log_tail: str | None
    facts_json: str | None
    slots: int | None

    @classmethod
    def started(
        cls, index: int, label: str, server: dict[str, Any], workload: dict[str, Any]
    ) -> StoredConfig:
        """A configuration that has just started: nothing known yet of its server."""
        return cls(
            idx=index,
            label=label,
            server_json=json.dumps(server),
            workload_json=json.dumps(workload),
            status="running",
            error=None,
            base_url=None,
            pid=None,
            command_json=None,
            log_path=None,
            log_tail=None,
            facts_json=None,
            slots=None,
        )

    def facts(self) -> StartupFacts | None:
        """None where nothing was stored: its server never got ready."""
        stored = json_dict(self.facts_json or None, "startup facts")
        return None if stored is None else startup_facts(stored)

    def read(self) -> ConfigRow:
        return ConfigRow(
            index=typed(self.idx, int, "a configuration index"),
            label=typed(self.label, str, "a configuration label"),
            server=json_dict(self.server_json, "server settings", optional=False) or {},
            workload=json_dict(self.workload_json, "workload settings", optional=False) or {},
            status=typed(self.status, str, "a configuration status"),
            error=typed(self.error, TEXT_OR_NONE, "a configuration error"),
            base_url=typed(self.base_url, TEXT_OR_NONE, "a base URL"),
            pid=typed(self.pid, INT_OR_NONE, "a pid"),
            command=json_strings(self.command_json, "a configuration's command"),
            log_path=typed(self.log_path, TEXT_OR_NONE, "a log path"),
            log_tail=typed(self.log_tail, TEXT_OR_NONE, "a log tail"),
            facts=self.facts(),
            slots=typed(self.slots, INT_OR_NONE, "slots"),
        )


@dataclass(frozen=True, kw_only=True)
class StoredRequest:
    """A finished request: its timestamps and what the server said. Its text and token
    count are stored too, for whoever reads the file with SQL; a record reads them back
    from its chunks, ``usage`` and ``timings``."""

    config_idx: int
    idx: int
    repeat: int
    warmup: int
    prompt: str
    t_scheduled_ns: int | None
    t_submit_ns: int | None
    t_first_token_ns: int | None
    t_last_token_ns: int | None
    t_done_ns: int | None
    http_status: int | None
    ok: int
    error: str | None
    finish_reason: str | None
    usage_json: str | None
    timings_json: str | None
    output_tokens: int | None
    token_source: str
    text: str
    t_intended_ns: int | None = added_in(4)
    t_ready_ns: int | None = added_in(4)
    connect_ns: int | None = added_in(4)
    t_connected_ns: int | None = added_in(4)
    prompt_tokens: int | None = added_in(5)
    streamed: int | None = added_in(5)

    TIMES = (
        "t_intended_ns",
        "t_scheduled_ns",
        "t_ready_ns",
        "connect_ns",
        "t_connected_ns",
        "t_submit_ns",
        "t_first_token_ns",
        "t_last_token_ns",
        "t_done_ns",
    )

    @classmethod
    def of(cls, r: RequestRecord) -> StoredRequest:
        tokens, source = r.output_tokens
        return cls(
            config_idx=r.config_index,
            idx=r.index,
            repeat=r.repeat,
            warmup=int(r.warmup),
            prompt=r.prompt,
            prompt_tokens=r.prompt_tokens,
            streamed=int(r.streamed),
            t_intended_ns=r.t_intended_ns,
            t_scheduled_ns=r.t_scheduled_ns,
            t_ready_ns=r.t_ready_ns,
            connect_ns=r.connect_ns,
            t_connected_ns=r.t_connected_ns,
            t_submit_ns=r.t_submit_ns,
            t_first_token_ns=r.t_first_token_ns,
            t_last_token_ns=r.t_last_token_ns,
            t_done_ns=r.t_done_ns,
            http_status=r.http_status,
            ok=int(r.ok),
            error=r.error,
            finish_reason=r.finish_reason,
            usage_json=_json(r.usage),
            timings_json=_json(r.timings),
            output_tokens=tokens,
            token_source=source,
            text=r.text,
        )

    def read(self, chunks: list[TokenChunk], slot: int | None) -> RequestRecord:
        """The record, with its chunks and its slot (each stored in a table of its own)."""
        for name in self.TIMES:
            typed(getattr(self, name), INT_OR_NONE, "a request time")
        return RequestRecord(
            config_index=self.config_idx,
            repeat=typed(self.repeat, int, "a repeat"),
            index=typed(self.idx, int, "a request index"),
            prompt=typed(self.prompt, str, "a prompt"),
            warmup=bool(self.warmup),
            prompt_tokens=typed(self.prompt_tokens, INT_OR_NONE, "a prompt's token count"),
            # NULL: written before a request could come whole
            streamed=typed(self.streamed, INT_OR_NONE, "a request's streamed flag") != 0,
            t_intended_ns=self.t_intended_ns,
            t_scheduled_ns=self.t_scheduled_ns,
            t_ready_ns=self.t_ready_ns,
            connect_ns=self.connect_ns,
            t_connected_ns=self.t_connected_ns,
            t_submit_ns=self.t_submit_ns,
            t_first_token_ns=self.t_first_token_ns,
            t_last_token_ns=self.t_last_token_ns,
            t_done_ns=self.t_done_ns,
            http_status=typed(self.http_status, INT_OR_NONE, "an HTTP status"),
            ok=bool(self.ok),
            error=typed(self.error, TEXT_OR_NONE, "a request error"),
            finish_reason=typed(self.finish_reason, TEXT_OR_NONE, "a finish reason"),
            usage=json_dict(self.usage_json or None, "usage"),
            timings=json_dict(self.timings_json or None, "timings"),
            chunks=chunks,
            slot=slot,
        )


@dataclass(frozen=True, kw_only=True)
class StoredChunk:
    """One chunk of a request's stream, ``seq`` its place in the stream."""

    config_idx: int
    request_idx: int
    seq: int
    t_ns: int
    text: str

    @classmethod
    def of(cls, r: RequestRecord) -> list[StoredChunk]:
        """Every chunk of a record."""
        return [
            cls(config_idx=r.config_index, request_idx=r.index, seq=i, t_ns=c.t_ns, text=c.text)
            for i, c in enumerate(r.chunks)
        ]

    @staticmethod
    def read(found: sqlite3.Row) -> TokenChunk:
        """The chunk in a row of this table (read by name, see ``Table.found``). A row per
        token: the usual case is checked by exact type first (a bool is no int either way),
        and only a wrong value goes the long way, to its error."""
        t_ns, text = found["t_ns"], found["text"]
        if type(t_ns) is int and type(text) is str:
            return TokenChunk(t_ns=t_ns, text=text)
        return TokenChunk(t_ns=typed(t_ns, int, "a chunk's time"), text=typed(text, str, "a chunk"))


@dataclass(frozen=True, kw_only=True)
class StoredRequestSlot:
    """The server slot that served a request, matched from the server's log."""

    config_idx: int
    idx: int
    slot: int


@dataclass(frozen=True, kw_only=True)
class StoredClientLoad:
    """How busy the measuring client was during one repeat."""

    config_idx: int
    repeat: int
    wall_s: float
    loop_cpu_s: float
    process_cpu_s: float

    @classmethod
    def of(cls, config_index: int, repeat: int, load: ClientLoad) -> StoredClientLoad:
        return cls(
            config_idx=config_index,
            repeat=repeat,
            wall_s=load.wall_s,
            loop_cpu_s=load.loop_cpu_s,
            process_cpu_s=load.process_cpu_s,
        )

    def read(self) -> ClientLoad:
        return ClientLoad(
            wall_s=self.wall_s, loop_cpu_s=self.loop_cpu_s, process_cpu_s=self.process_cpu_s
        )


@dataclass(frozen=True, kw_only=True)
class StoredCounters:
    """The server's /metrics counters just before and just after one repeat."""

    config_idx: int
    repeat: int
    before_json: str | None
    after_json: str | None

    @classmethod
    def of(
        cls,
        config_index: int,
        repeat: int,
        before: dict[str, float] | None,
        after: dict[str, float] | None,
    ) -> StoredCounters:
        return cls(
            config_idx=config_index,
            repeat=repeat,
            before_json=_json(before),
            after_json=_json(after),
        )

    def before(self) -> dict[str, float] | None:
        return counters(self.before_json)

    def after(self) -> dict[str, float] | None:
        return counters(self.after_json)


# Samples taken while a configuration ran, and the notices of the run: read back as they
# were written (``Session.samples``, ``Session.notices``).


@dataclass(frozen=True, kw_only=True)
class StoredProcessSample:
    config_idx: int
    t_ns: int
    rss_bytes: int | None
    cpu_percent: float | None


@dataclass(frozen=True, kw_only=True)
class StoredGpuSample:
    config_idx: int
    t_ns: int
    gpu_bytes: int | None


@dataclass(frozen=True, kw_only=True)
class StoredMetricsSample:
    config_idx: int
    t_ns: int
    values_json: str | None


@dataclass(frozen=True, kw_only=True)
class StoredSlotsSample:
    config_idx: int
    t_ns: int
    slots_json: str | None


@dataclass(frozen=True, kw_only=True)
class StoredServerState:
    config_idx: int
    t_ns: int
    state: str
    detail: str | None


@dataclass(frozen=True, kw_only=True)
class StoredNotice:
    t_ns: int
    config_idx: int | None
    level: str | None
    text: str | None


@dataclass(frozen=True, kw_only=True)
class StoredImportSource:
    """The one row of an imported session: which tool's file it came from."""

    id: int  # always 1
    tool: str
    version: str | None
    file_name: str

    @classmethod
    def of(cls, source: ImportSource) -> StoredImportSource:
        return cls(id=1, tool=source.tool, version=source.version, file_name=source.file_name)

    def read(self) -> ImportSource:
        return ImportSource(
            tool=typed(self.tool, str, "the importing tool"),
            version=typed(self.version, TEXT_OR_NONE, "the tool's version"),
            file_name=typed(self.file_name, str, "the imported file's name"),
        )


@dataclass(frozen=True, kw_only=True)
class StoredReportedFigure:
    """One figure an imported file stated for a configuration, under the file's name."""

    config_idx: int
    name: str
    value: float


SESSION = Table("session", StoredSession)
CONFIGS = Table("configs", StoredConfig)
REQUESTS = Table("requests", StoredRequest)
CHUNKS = Table("chunks", StoredChunk)
PROCESS_SAMPLES = Table("process_samples", StoredProcessSample)
GPU_SAMPLES = Table("gpu_samples", StoredGpuSample, since=2)
REQUEST_SLOTS = Table("request_slots", StoredRequestSlot, since=3)
CLIENT_LOAD = Table("client_load", StoredClientLoad, since=4)
SERVER_COUNTERS = Table("server_counters", StoredCounters, since=4)
METRICS_SAMPLES = Table("metrics_samples", StoredMetricsSample)
SLOTS_SAMPLES = Table("slots_samples", StoredSlotsSample)
SERVER_STATES = Table("server_states", StoredServerState)
NOTICES = Table("notices", StoredNotice)
IMPORT_SOURCE = Table("import_source", StoredImportSource, since=6)
REPORTED_FIGURES = Table("reported_figures", StoredReportedFigure, since=6)

TABLES: tuple[Table[Any], ...] = (
    SESSION,
    CONFIGS,
    REQUESTS,
    CHUNKS,
    PROCESS_SAMPLES,
    GPU_SAMPLES,
    REQUEST_SLOTS,
    CLIENT_LOAD,
    SERVER_COUNTERS,
    METRICS_SAMPLES,
    SLOTS_SAMPLES,
    SERVER_STATES,
    NOTICES,
    IMPORT_SOURCE,
    REPORTED_FIGURES,
)
# What ``Session.samples`` reads, by table name.
SAMPLES: dict[str, Table[Any]] = {
    t.name: t for t in (PROCESS_SAMPLES, GPU_SAMPLES, METRICS_SAMPLES, SLOTS_SAMPLES, SERVER_STATES)
}
