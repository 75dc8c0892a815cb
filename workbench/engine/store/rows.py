"""The tables of a session file, each declared once by the type its rows stand for.

Where a table holds what the engine already has a record or an event for (a request, a
sample, the server's counters, an import's source), that type is the declaration (its
fields say how they are stored, ``base/columns.py``): the writer writes it as it is and the
reader gives it back. The other tables declare a row of their own: the header, a
configuration (``ConfigRow``: written at its start, its server's readiness and its end), a
request's chunks and slot, the client's load and the machine's per repeat (their events hold
a ``ClientLoad`` and a ``MachineLoad``),
the notices and server states (with the time they were stored), an imported file's
figures and a run's prediction (each configuration's predicted summary, kept whole as JSON,
its placed requests, and the configurations left out). Every table's SQL, INSERT, SELECT
and the checked reading of its rows come from its declaration (``table.py``).
"""

from __future__ import annotations

import functools
import sqlite3
from dataclasses import asdict, dataclass, fields
from typing import Any

from workbench.engine.base.columns import column
from workbench.engine.base.records import (
    Hardware,
    ImportSource,
    RequestRecord,
    StartupFacts,
    TokenChunk,
)
from workbench.engine.base.states import ConfigStatus, NoticeLevel, RunStatus, ServerState
from workbench.engine.config.experiment import RunConfig, WorkloadSettings
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.settings import from_stored
from workbench.engine.events import (
    GpuSample,
    MetricsSample,
    ProcessSample,
    ServerCounters,
    SlotsSample,
)
from workbench.engine.figures.client_limits import ClientLoad
from workbench.engine.figures.machine_load import MachineLoad
from workbench.engine.figures.predicted import ConfigPrediction, PredictedRequest
from workbench.engine.store.checks import read_json
from workbench.engine.store.table import Table, Written


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
    status: RunStatus
    error: str | None
    clock_origin_ns: int
    wall_origin: float

    def meta(self) -> dict[str, Any]:
        """The header by column name (every value checked when read): views show it, and
        every stored time is taken from its clock origin."""
        return dict(vars(self))

    def hardware(self) -> Hardware:
        return read_json(Hardware, self.hardware_json, "hardware_json")


@dataclass(frozen=True, kw_only=True)
class ConfigRow:
    """One configuration of a session: written when it starts, its server's facts added
    when the server is ready (``ServerReady``), its outcome when it ends (``ConfigFinished``)."""

    index: int = column("idx")
    label: str
    server: dict[str, Any] = column("server_json", json=True)
    workload: dict[str, Any] = column("workload_json", json=True)
    status: ConfigStatus = column(sql_default=ConfigStatus.RUNNING)
    error: str | None = None
    base_url: str | None = None
    pid: int | None = None
    command: list[str] | None = column("command_json", json=True, default=None)
    log_path: str | None = None
    log_tail: str | None = None
    facts: StartupFacts | None = column("facts_json", json=True, default=None)  # None: never ready
    slots: int | None = None

    @functools.cached_property
    def run_config(self) -> RunConfig:
        """Its settings as the run had them, typed once: the file keeps them as JSON of
        whichever version wrote it, so a field this version does not know is dropped and a
        missing or invalid one takes its default (``from_stored``)."""
        return RunConfig(
            self.index,
            self.label,
            from_stored(ServerSettings, self.server),
            from_stored(WorkloadSettings, self.workload),
        )


@dataclass(frozen=True, kw_only=True)
class StoredChunk:
    """One chunk of a request's stream, ``seq`` its place in the stream; ``reasoning``
    since schema 7 (an older file's chunks read as answer: it joined the two)."""

    config_index: int = column("config_idx")
    index: int = column("request_idx")
    seq: int
    t_ns: int
    text: str
    reasoning: bool = column(since=7, default=False)

    @classmethod
    def of(cls, r: RequestRecord) -> list[StoredChunk]:
        """Every chunk of a record."""
        return [
            cls(
                config_index=r.config_index,
                index=r.index,
                seq=i,
                t_ns=c.t_ns,
                text=c.text,
                reasoning=c.reasoning,
            )
            for i, c in enumerate(r.chunks)
        ]

    @staticmethod
    def read(found: sqlite3.Row) -> TokenChunk:
        """The chunk in a row of this table (read by name, see ``Table.found``). A row per
        token: the usual case (what the table declares, by exact type) is taken as it is,
        and anything else is validated as any row is (``Table.read``): it reads the same, or
        raises naming what is wrong."""
        t_ns, text, flag = found["t_ns"], found["text"], found["reasoning"]
        # The flag is a bool column's 0 or 1, NULL in a file older than schema 7.
        if type(t_ns) is int and type(text) is str and (flag is None or type(flag) is int):
            return TokenChunk(t_ns, text, bool(flag))
        chunk = CHUNKS.read(found)
        return TokenChunk(chunk.t_ns, chunk.text, chunk.reasoning)


@dataclass(frozen=True, kw_only=True)
class StoredRequestSlot:
    """The server slot that served a request, matched from the server's log."""

    config_index: int = column("config_idx")
    index: int = column("idx")
    slot: int


@dataclass(frozen=True, kw_only=True)
class StoredClientLoad:
    """How busy the measuring client was during one repeat."""

    config_index: int = column("config_idx")
    repeat: int
    wall_s: float
    loop_cpu_s: float
    process_cpu_s: float

    @classmethod
    def of(cls, config_index: int, repeat: int, load: ClientLoad) -> StoredClientLoad:
        return cls(
            config_index=config_index,
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
class StoredMachineLoad(MachineLoad):
    """What else used the machine during one repeat (``MachineLoad``'s fields, keyed)."""

    config_index: int = column("config_idx")
    repeat: int

    @classmethod
    def of(cls, config_index: int, repeat: int, load: MachineLoad) -> StoredMachineLoad:
        return cls(config_index=config_index, repeat=repeat, **asdict(load))

    def read(self) -> MachineLoad:
        return MachineLoad(**{f.name: getattr(self, f.name) for f in fields(MachineLoad)})


# A server state and a notice as stored: the event and the time the writer stored it.


@dataclass(frozen=True, kw_only=True)
class StoredServerState:
    config_index: int = column("config_idx")
    t_ns: int
    state: ServerState
    detail: str | None


@dataclass(frozen=True, kw_only=True)
class StoredNotice:
    t_ns: int
    config_index: int | None = column("config_idx")
    level: NoticeLevel | None = column(lenient=True)
    text: str | None


@dataclass(frozen=True, kw_only=True)
class StoredReportedFigure:
    """One figure an imported file stated for a configuration, under the file's name."""

    config_index: int = column("config_idx")
    name: str
    value: float


@dataclass(frozen=True, kw_only=True)
class StoredPrediction:
    """One configuration of the run's prediction (``figures/predicted.ConfigPrediction``):
    its predicted summary as ``ConfigSummary.to_dict()`` gives it, read back checked
    (``reader.Session.predictions``; a field added to ``ConfigSummary`` or ``RunSummary``
    takes a default, which an older file's summary reads)."""

    config_index: int = column("config_idx")
    label: str
    summary: dict[str, Any] = column("summary_json", json=True)
    requests_s: float
    calibration: str

    @classmethod
    def of(cls, predicted: ConfigPrediction) -> StoredPrediction:
        return cls(
            config_index=predicted.config_index,
            label=predicted.label,
            summary=predicted.summary.to_dict(),
            requests_s=predicted.requests_s,
            calibration=predicted.calibration,
        )


@dataclass(frozen=True, kw_only=True)
class StoredPredictedRequest:
    """One request as the prediction placed it (``figures/predicted.PredictedRequest``)."""

    config_index: int = column("config_idx")
    repeat: int
    index: int = column("idx")
    slot: int | None
    sent_s: float
    first_token_s: float | None
    end_s: float

    @classmethod
    def of(cls, config_index: int, r: PredictedRequest) -> StoredPredictedRequest:
        return cls(config_index=config_index, **vars(r))

    def read(self) -> PredictedRequest:
        return PredictedRequest(
            self.index, self.repeat, self.slot, self.sent_s, self.first_token_s, self.end_s
        )


@dataclass(frozen=True, kw_only=True)
class StoredLeftOut:
    """A configuration the prediction left out, and why, in one line; ``place`` its order."""

    place: int
    text: str


@dataclass(frozen=True, kw_only=True)
class RemoteOrigin:
    """Where a session recorded through ``workbench agent`` on another machine was measured:
    the host as the user named it, the agent's run (by id, never by a path: the far side finds
    its own copy from it), what the agent was, the far clock's offset from this one (far
    minus near, from round trips over the channel: it only places bars on a shared time
    axis, every duration is measured on the far machine) and whether this copy holds
    everything the far side recorded (False until the run's end arrived or ``workbench
    fetch`` brought the far copy home)."""

    host: str
    run_id: str
    agent_version: str
    protocol: int
    clock_offset_ns: int | None
    rtt_ns: int | None
    received_all: bool


SESSION = Table("session", StoredSession, single_row=True)
CONFIGS = Table("configs", ConfigRow, key=("index",))
REQUESTS = Table(
    "requests",
    RequestRecord,
    key=("config_index", "index"),
    order=("config_index", "index", "repeat", "warmup", "prompt"),
    written=(
        Written("output_tokens", int | None, lambda r: r.output_tokens[0]),
        Written("token_source", str | None, lambda r: r.output_tokens[1]),
        Written("text", str | None, lambda r: r.text),
    ),
)
CHUNKS = Table("chunks", StoredChunk, key=("config_index", "index", "seq"), without_rowid=True)
PROCESS_SAMPLES = Table("process_samples", ProcessSample)
GPU_SAMPLES = Table("gpu_samples", GpuSample, since=2)
REQUEST_SLOTS = Table("request_slots", StoredRequestSlot, since=3, key=("config_index", "index"))
CLIENT_LOAD = Table("client_load", StoredClientLoad, since=4, key=("config_index", "repeat"))
MACHINE_LOAD = Table("machine_load", StoredMachineLoad, since=11, key=("config_index", "repeat"))
SERVER_COUNTERS = Table("server_counters", ServerCounters, since=4, key=("config_index", "repeat"))
METRICS_SAMPLES = Table("metrics_samples", MetricsSample)
SLOTS_SAMPLES = Table("slots_samples", SlotsSample)
SERVER_STATES = Table("server_states", StoredServerState)
NOTICES = Table("notices", StoredNotice)
IMPORT_SOURCE = Table("import_source", ImportSource, since=6, single_row=True)
REPORTED_FIGURES = Table(
    "reported_figures", StoredReportedFigure, since=6, key=("config_index", "name")
)
PREDICTIONS = Table("predictions", StoredPrediction, since=9, key=("config_index",))
PREDICTED_REQUESTS = Table(
    "predicted_requests",
    StoredPredictedRequest,
    since=9,
    key=("config_index", "repeat", "index"),
    without_rowid=True,
)
PREDICTION_LEFT_OUT = Table("prediction_left_out", StoredLeftOut, since=9, key=("place",))
REMOTE_ORIGIN = Table("remote_origin", RemoteOrigin, since=10, single_row=True)

TABLES: tuple[Table[Any], ...] = (
    SESSION,
    CONFIGS,
    REQUESTS,
    CHUNKS,
    PROCESS_SAMPLES,
    GPU_SAMPLES,
    REQUEST_SLOTS,
    CLIENT_LOAD,
    MACHINE_LOAD,
    SERVER_COUNTERS,
    METRICS_SAMPLES,
    SLOTS_SAMPLES,
    SERVER_STATES,
    NOTICES,
    IMPORT_SOURCE,
    REPORTED_FIGURES,
    PREDICTIONS,
    PREDICTED_REQUESTS,
    PREDICTION_LEFT_OUT,
    REMOTE_ORIGIN,
)
# The prediction made before a run's first configuration: a resumed run keeps it whole.
PREDICTION: tuple[Table[Any], ...] = (PREDICTIONS, PREDICTED_REQUESTS, PREDICTION_LEFT_OUT)
# The samples whose rows are the events that were published: written and replayed as they are.
SAMPLED: tuple[Table[Any], ...] = (PROCESS_SAMPLES, GPU_SAMPLES, METRICS_SAMPLES, SLOTS_SAMPLES)
# What ``Session.samples`` reads, by table name.
SAMPLES: dict[str, Table[Any]] = {t.name: t for t in (*SAMPLED, SERVER_STATES)}
