"""Sessions: one self-describing SQLite file per experiment run, written as the run goes.

The writer runs on its own thread, fed by the event bus, and commits after every batch of
events, so a crash or a SIGKILL mid-run keeps every finished request. A session whose run never
reached its end is reported as incomplete when opened.
"""

from __future__ import annotations

import functools
import json
import queue
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workbench import __version__
from workbench.engine.base.errors import SessionError
from workbench.engine.base.records import RequestRecord, TokenChunk
from workbench.engine.events import (
    ClientLoadMeasured,
    ConfigFinished,
    ConfigStarted,
    EventBus,
    ExperimentFinished,
    GpuSample,
    MetricsSample,
    Notice,
    ProcessSample,
    RequestFinished,
    ServerCounters,
    ServerReady,
    ServerStateChanged,
    SlotMatched,
    SlotsSample,
)
from workbench.engine.figures.summaries import (
    ClientLoad,
    ConfigSummary,
    RunObservations,
    summarize_config,
    summarize_run,
)

# 2: gpu_samples (a version-1 file reads as having none)
# 3: request_slots (older files read as requests with no slot known)
# 4: requests' intended/ready times and connect time, client_load, server_counters
#    (older: not recorded)
SCHEMA_VERSION = 4

SCHEMA = """
CREATE TABLE session (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    app_version TEXT NOT NULL,
    name TEXT NOT NULL,
    experiment_path TEXT,
    experiment_toml TEXT NOT NULL,
    mode TEXT NOT NULL,
    base_url TEXT,
    hardware_json TEXT NOT NULL,
    created_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL,
    error TEXT,
    clock_origin_ns INTEGER NOT NULL,
    wall_origin REAL NOT NULL
);
CREATE TABLE configs (
    idx INTEGER PRIMARY KEY,
    label TEXT NOT NULL,
    server_json TEXT NOT NULL,
    workload_json TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'running',
    error TEXT,
    base_url TEXT,
    pid INTEGER,
    command_json TEXT,
    log_path TEXT,
    log_tail TEXT,
    facts_json TEXT,
    slots INTEGER
);
CREATE TABLE requests (
    config_idx INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    repeat INTEGER NOT NULL,
    warmup INTEGER NOT NULL,
    prompt TEXT NOT NULL,
    t_scheduled_ns INTEGER,
    t_submit_ns INTEGER,
    t_first_token_ns INTEGER,
    t_last_token_ns INTEGER,
    t_done_ns INTEGER,
    http_status INTEGER,
    ok INTEGER NOT NULL,
    error TEXT,
    finish_reason TEXT,
    usage_json TEXT,
    timings_json TEXT,
    output_tokens INTEGER,
    token_source TEXT,
    text TEXT,
    t_intended_ns INTEGER,
    t_ready_ns INTEGER,
    connect_ns INTEGER,
    t_connected_ns INTEGER,
    PRIMARY KEY (config_idx, idx)
);
CREATE TABLE chunks (
    config_idx INTEGER NOT NULL,
    request_idx INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    t_ns INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (config_idx, request_idx, seq)
) WITHOUT ROWID;
CREATE TABLE process_samples (
    config_idx INTEGER NOT NULL, t_ns INTEGER NOT NULL, rss_bytes INTEGER, cpu_percent REAL
);
CREATE TABLE gpu_samples (config_idx INTEGER NOT NULL, t_ns INTEGER NOT NULL, gpu_bytes INTEGER);
CREATE TABLE request_slots (
    config_idx INTEGER NOT NULL, idx INTEGER NOT NULL, slot INTEGER NOT NULL,
    PRIMARY KEY (config_idx, idx)
);
CREATE TABLE client_load (
    config_idx INTEGER NOT NULL, repeat INTEGER NOT NULL,
    wall_s REAL NOT NULL, loop_cpu_s REAL NOT NULL, process_cpu_s REAL NOT NULL,
    PRIMARY KEY (config_idx, repeat)
);
CREATE TABLE server_counters (
    config_idx INTEGER NOT NULL, repeat INTEGER NOT NULL, before_json TEXT, after_json TEXT,
    PRIMARY KEY (config_idx, repeat)
);
CREATE TABLE metrics_samples (config_idx INTEGER NOT NULL, t_ns INTEGER NOT NULL, values_json TEXT);
CREATE TABLE slots_samples (config_idx INTEGER NOT NULL, t_ns INTEGER NOT NULL, slots_json TEXT);
CREATE TABLE server_states (
    config_idx INTEGER NOT NULL, t_ns INTEGER NOT NULL, state TEXT NOT NULL, detail TEXT
);
CREATE TABLE notices (t_ns INTEGER NOT NULL, config_idx INTEGER, level TEXT, text TEXT);
"""

# Events the writer records; per-token events are not needed (a finished request carries them).
RECORDED_EVENTS = (
    ConfigStarted,
    ServerStateChanged,
    ServerReady,
    RequestFinished,
    ProcessSample,
    GpuSample,
    MetricsSample,
    SlotsSample,
    SlotMatched,
    ClientLoadMeasured,
    ServerCounters,
    ConfigFinished,
    Notice,
    ExperimentFinished,
)


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=10.0)
    conn.execute("PRAGMA journal_mode=WAL")
    # FULL: a commit survives a power cut, not only a crash. The writer has its own thread,
    # so the fsync never delays a measurement.
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def create_session(
    path: Path,
    name: str,
    experiment_toml: str,
    experiment_path: str | None,
    mode: str,
    base_url: str | None,
    hardware: dict[str, Any],
    clock_origin_ns: int,
) -> None:
    """Create the file and its header row; raises at once if the folder is not writable."""
    conn = _connect(path)
    try:
        with conn:
            conn.executescript(SCHEMA)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute(
                "INSERT INTO session VALUES (1,?,?,?,?,?,?,?,?,NULL,'running',NULL,?,?)",
                (
                    __version__,
                    name,
                    experiment_path,
                    experiment_toml,
                    mode,
                    base_url,
                    json.dumps(hardware),
                    _now(),
                    clock_origin_ns,
                    time.time(),
                ),
            )
    finally:
        conn.close()


def _counters(text: str | None) -> dict[str, float] | None:
    """Stored /metrics, kept only if it is what was written: names to numbers."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return {
        str(k): float(v)
        for k, v in value.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


REQUEST_COLUMNS = (
    "config_idx",
    "idx",
    "repeat",
    "warmup",
    "prompt",
    "t_scheduled_ns",
    "t_submit_ns",
    "t_first_token_ns",
    "t_last_token_ns",
    "t_done_ns",
    "http_status",
    "ok",
    "error",
    "finish_reason",
    "usage_json",
    "timings_json",
    "output_tokens",
    "token_source",
    "text",
    "t_intended_ns",
    "t_ready_ns",
    "connect_ns",
    "t_connected_ns",
)


class SessionWriter:
    """Drains its subscription on a thread and writes each event to the session file."""

    def __init__(
        self, path: Path, bus: EventBus, on_failure: Callable[[], None] | None = None
    ) -> None:
        self.path = path
        self._sub = bus.subscribe(*RECORDED_EVENTS)
        self._bus = bus
        self._on_failure = on_failure
        self._thread = threading.Thread(target=self._run, name="session-writer", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        conn = _connect(self.path)
        try:
            finished = False
            while not finished:
                try:
                    batch = [self._sub.queue.get(timeout=0.5)]
                except queue.Empty:
                    continue
                batch += self._sub.drain()
                with conn:
                    # One transaction per batch (one fsync); each event a savepoint in it.
                    conn.execute("BEGIN")
                    for event in batch:
                        self._write_one(conn, event)
                        finished = finished or isinstance(event, ExperimentFinished)
                if any(isinstance(e, ConfigFinished | ExperimentFinished) for e in batch):
                    # Fold the WAL back into the file, so that copying the .session.sqlite
                    # alone carries every finished configuration.
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except Exception as exc:
            # Nothing more can be recorded: say so now and stop the run, keeping the file.
            self.error = exc
            self._bus.publish(
                Notice("error", f"the session file cannot be written ({exc}); stopping the run")
            )
            if self._on_failure is not None:
                self._on_failure()
        finally:
            self._bus.unsubscribe(self._sub)
            conn.close()

    def _write_one(self, conn: sqlite3.Connection, event: Any) -> None:
        """Write one event; if it cannot be stored (a value SQLite refuses), undo just that
        event, keep a notice saying what was lost, and go on: one bad row must never cost
        the others. A file that cannot be written at all still stops the run."""
        conn.execute("SAVEPOINT event")
        try:
            self._write(conn, event)
        except (
            sqlite3.InterfaceError,
            sqlite3.ProgrammingError,
            sqlite3.IntegrityError,
            sqlite3.DataError,
            OverflowError,
            TypeError,
        ) as exc:
            conn.execute("ROLLBACK TO event")
            conn.execute(
                "INSERT INTO notices VALUES (?,?,?,?)",
                (
                    time.perf_counter_ns(),
                    getattr(event, "config_index", None),
                    "error",
                    f"could not store a {type(event).__name__}: {exc}",
                ),
            )
        conn.execute("RELEASE event")

    def _write(self, conn: sqlite3.Connection, event: Any) -> None:
        t_ns = time.perf_counter_ns()
        match event:
            case RequestFinished(record=r):
                tokens, source = r.output_tokens
                conn.execute(
                    f"INSERT OR REPLACE INTO requests ({', '.join(REQUEST_COLUMNS)}) "
                    f"VALUES ({', '.join('?' * len(REQUEST_COLUMNS))})",
                    (
                        r.config_index,
                        r.index,
                        r.repeat,
                        int(r.warmup),
                        r.prompt,
                        r.t_scheduled_ns,
                        r.t_submit_ns,
                        r.t_first_token_ns,
                        r.t_last_token_ns,
                        r.t_done_ns,
                        r.http_status,
                        int(r.ok),
                        r.error,
                        r.finish_reason,
                        _json(r.usage),
                        _json(r.timings),
                        tokens,
                        source,
                        r.text,
                        r.t_intended_ns,
                        r.t_ready_ns,
                        r.connect_ns,
                        r.t_connected_ns,
                    ),
                )
                conn.executemany(
                    "INSERT OR REPLACE INTO chunks VALUES (?,?,?,?,?)",
                    [(r.config_index, r.index, i, c.t_ns, c.text) for i, c in enumerate(r.chunks)],
                )
            case ClientLoadMeasured(load=load):
                conn.execute(
                    "INSERT OR REPLACE INTO client_load VALUES (?,?,?,?,?)",
                    (
                        event.config_index,
                        event.repeat,
                        load.wall_s,
                        load.loop_cpu_s,
                        load.process_cpu_s,
                    ),
                )
            case ServerCounters():
                conn.execute(
                    "INSERT OR REPLACE INTO server_counters VALUES (?,?,?,?)",
                    (
                        event.config_index,
                        event.repeat,
                        _json(event.before),
                        _json(event.after),
                    ),
                )
            case ProcessSample():
                conn.execute(
                    "INSERT INTO process_samples VALUES (?,?,?,?)",
                    (event.config_index, event.t_ns, event.rss_bytes, event.cpu_percent),
                )
            case GpuSample():
                conn.execute(
                    "INSERT INTO gpu_samples VALUES (?,?,?)",
                    (event.config_index, event.t_ns, event.gpu_bytes),
                )
            case MetricsSample():
                conn.execute(
                    "INSERT INTO metrics_samples VALUES (?,?,?)",
                    (event.config_index, event.t_ns, json.dumps(event.values)),
                )
            case SlotMatched():
                conn.execute(
                    "INSERT OR REPLACE INTO request_slots VALUES (?,?,?)",
                    (event.config_index, event.index, event.slot),
                )
            case SlotsSample():
                conn.execute(
                    "INSERT INTO slots_samples VALUES (?,?,?)",
                    (event.config_index, event.t_ns, json.dumps(event.slots)),
                )
            case ConfigStarted(config=config):
                d = config.to_dict()
                conn.execute(
                    "INSERT OR REPLACE INTO configs (idx, label, server_json, workload_json) "
                    "VALUES (?,?,?,?)",
                    (
                        config.index,
                        config.label,
                        json.dumps(d["server"]),
                        json.dumps(d["workload"]),
                    ),
                )
            case ServerStateChanged():
                conn.execute(
                    "INSERT INTO server_states VALUES (?,?,?,?)",
                    (event.config_index, t_ns, event.state, event.detail),
                )
            case ServerReady():
                conn.execute(
                    "UPDATE configs SET base_url=?, pid=?, command_json=?, log_path=?, "
                    "facts_json=?, slots=? WHERE idx=?",
                    (
                        event.base_url,
                        event.pid,
                        json.dumps(event.command),
                        event.log_path,
                        json.dumps(event.facts),
                        event.slots,
                        event.config_index,
                    ),
                )
            case ConfigFinished():
                conn.execute(
                    "UPDATE configs SET status=?, error=?, log_tail=? WHERE idx=?",
                    (event.status, event.error, event.log_tail, event.config_index),
                )
            case Notice():
                conn.execute(
                    "INSERT INTO notices VALUES (?,?,?,?)",
                    (t_ns, event.config_index, event.level, event.text),
                )
            case ExperimentFinished():
                conn.execute(
                    "UPDATE session SET status=?, error=?, finished_at=? WHERE id=1",
                    (event.status, event.error, _now()),
                )


# What a valid SQLite file with content no workbench wrote raises on reading.
_DAMAGE = (sqlite3.DatabaseError, ValueError, TypeError, KeyError, AttributeError)


def _reads_content(method: Callable[..., Any]) -> Callable[..., Any]:
    """A session from elsewhere may be valid SQLite with damaged content (bad JSON, wrong
    types, a missing table): reading it raises one SessionError naming the file, never a
    traceback, so a view can say so in one line and go on."""

    @functools.wraps(method)
    def reading(self: Session, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except _DAMAGE as exc:
            raise SessionError(
                f"{self.path} has damaged content ({type(exc).__name__}: {exc})"
            ) from None

    return reading


def _typed(value: Any, kinds: type | tuple[type, ...], what: str) -> Any:
    """``value`` if it has one of ``kinds`` (None passes where ``kinds`` has NoneType; a
    bool is no int here)."""
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise TypeError(f"{what} is a {type(value).__name__}")
    return value


def _json_dict(text: Any, what: str, optional: bool = True) -> dict[str, Any] | None:
    if text is None and optional:
        return None
    value = json.loads(_typed(text, str, what))
    return _typed(value, dict, what)


_INT = (int, type(None))


@dataclass
class ConfigRow:
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
    facts: dict[str, Any]
    slots: int | None


@dataclass
class Session:
    """A session file opened for reading."""

    path: Path
    schema_version: int
    meta: dict[str, Any]
    hardware: dict[str, Any]
    configs: list[ConfigRow]
    _conn: sqlite3.Connection = field(repr=False)
    _copy_dir: Path | None = field(default=None, repr=False)

    @property
    def status(self) -> str:
        """'running' in the file means the writer never reached the end: incomplete."""
        status = self.meta["status"]
        return "incomplete" if status == "running" else status

    @_reads_content
    def records(self, config_index: int) -> list[RequestRecord]:
        chunks: dict[int, list[TokenChunk]] = {}
        for request_idx, t_ns, text in self._conn.execute(
            "SELECT request_idx, t_ns, text FROM chunks WHERE config_idx=? "
            "ORDER BY request_idx, seq",
            (config_index,),
        ):
            chunks.setdefault(request_idx, []).append(
                TokenChunk(_typed(t_ns, int, "a chunk's time"), _typed(text, str, "a chunk"))
            )
        slots: dict[int, int] = {}
        if self.schema_version >= 3:
            slots = dict(
                self._conn.execute(
                    "SELECT idx, slot FROM request_slots WHERE config_idx=?", (config_index,)
                ).fetchall()
            )
        later = (
            "t_intended_ns, t_ready_ns, connect_ns, t_connected_ns"
            if self.schema_version >= 4
            else "NULL, NULL, NULL, NULL"  # recorded before these were measured
        )
        out = []
        for row in self._conn.execute(
            "SELECT idx, repeat, warmup, prompt, t_scheduled_ns, t_submit_ns, t_first_token_ns, "
            "t_last_token_ns, t_done_ns, http_status, ok, error, finish_reason, usage_json, "
            f"timings_json, {later} FROM requests WHERE config_idx=? ORDER BY idx",
            (config_index,),
        ):
            (
                idx,
                repeat,
                warmup,
                prompt,
                t_sched,
                t_sub,
                t_first,
                t_last,
                t_done,
                status,
                ok,
                error,
                finish,
                usage,
                timings,
                t_intended,
                t_ready,
                connect,
                t_connected,
            ) = row
            for value in (
                t_sched,
                t_sub,
                t_first,
                t_last,
                t_done,
                t_intended,
                t_ready,
                connect,
                t_connected,
            ):
                _typed(value, _INT, "a request time")
            _typed(status, _INT, "an HTTP status")
            _typed(error, (str, type(None)), "a request error")
            _typed(finish, (str, type(None)), "a finish reason")
            out.append(
                RequestRecord(
                    config_index,
                    _typed(repeat, int, "a repeat"),
                    _typed(idx, int, "a request index"),
                    _typed(prompt, str, "a prompt"),
                    warmup=bool(warmup),
                    t_intended_ns=t_intended,
                    t_scheduled_ns=t_sched,
                    t_ready_ns=t_ready,
                    connect_ns=connect,
                    t_connected_ns=t_connected,
                    t_submit_ns=t_sub,
                    t_first_token_ns=t_first,
                    t_last_token_ns=t_last,
                    t_done_ns=t_done,
                    http_status=status,
                    ok=bool(ok),
                    error=error,
                    finish_reason=finish,
                    usage=_json_dict(usage or None, "usage"),
                    timings=_json_dict(timings or None, "timings"),
                    chunks=chunks.get(idx, []),
                    slot=slots.get(idx),
                )
            )
        return out

    @_reads_content
    def observations(self, config_index: int) -> dict[int, RunObservations]:
        """Per repeat, what was measured besides the requests (none before schema 4)."""
        loads = self.client_load(config_index)
        counters: dict[int, tuple[Any, Any]] = {}
        if self.schema_version >= 4:
            for repeat, before, after in self._conn.execute(
                "SELECT repeat, before_json, after_json FROM server_counters WHERE config_idx=?",
                (config_index,),
            ):
                counters[repeat] = (_counters(before), _counters(after))
        from_log = self.meta.get("mode") == "managed" and self.schema_version >= 3
        return {
            repeat: RunObservations(
                loads.get(repeat), *counters.get(repeat, (None, None)), slots_from_log=from_log
            )
            for repeat in set(loads) | set(counters)
        }

    @_reads_content
    def client_load(self, config_index: int) -> dict[int, ClientLoad]:
        """Per repeat, how busy the measuring client was (none before schema 4)."""
        if self.schema_version < 4:
            return {}
        return {
            repeat: ClientLoad(wall, loop_cpu, process_cpu)
            for repeat, wall, loop_cpu, process_cpu in self._conn.execute(
                "SELECT repeat, wall_s, loop_cpu_s, process_cpu_s FROM client_load "
                "WHERE config_idx=?",
                (config_index,),
            )
        }

    @_reads_content
    def samples(self, table: str, config_index: int) -> list[tuple[Any, ...]]:
        if table not in (
            "process_samples",
            "gpu_samples",
            "metrics_samples",
            "slots_samples",
            "server_states",
        ):
            raise ValueError(table)
        if table == "gpu_samples" and self.schema_version < 2:
            return []  # recorded before GPU memory was sampled
        return list(
            self._conn.execute(
                f"SELECT * FROM {table} WHERE config_idx=? ORDER BY t_ns", (config_index,)
            )
        )

    @_reads_content
    def notices(self) -> list[tuple[Any, ...]]:
        return list(self._conn.execute("SELECT config_idx, level, text FROM notices ORDER BY t_ns"))

    @_reads_content
    def summaries(self) -> list[ConfigSummary]:
        return [
            summarize_config_records(c, self.records(c.index), self.observations(c.index))
            for c in self.configs
        ]

    def close(self) -> None:
        self._conn.close()
        _remove(self._copy_dir)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def summarize_config_records(
    config: ConfigRow,
    records: list[RequestRecord],
    observed: dict[int, RunObservations] | None = None,
) -> ConfigSummary:
    """Analysis of one configuration's records, one run per repeat."""
    repeats = sorted({r.repeat for r in records if not r.warmup})
    observed = observed or {}
    runs = [
        summarize_run([r for r in records if r.repeat == k and not r.warmup], observed.get(k))
        for k in repeats
    ]
    return summarize_config(
        config.index,
        config.label,
        config.server,
        config.workload,
        config.facts,
        runs,
        config.status,
        config.error,
        slots_override=config.slots,
    )


def _connect_for_reading(p: Path) -> tuple[sqlite3.Connection, Path | None]:
    """Reading a session never writes to it. A crashed run can leave finished requests in
    the ``-wal`` beside the file; SQLite would fold them into the file on open, so such a
    session is read from a private copy instead."""
    wal = p.with_name(p.name + "-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        tmp = Path(tempfile.mkdtemp(prefix="workbench-session-"))
        copy = tmp / p.name
        shutil.copyfile(p, copy)
        shutil.copyfile(wal, tmp / wal.name)
        return sqlite3.connect(copy, timeout=10.0), tmp
    return sqlite3.connect(p.resolve().as_uri() + "?immutable=1", uri=True), None


def _remove(folder: Path | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def open_session(path: str | Path) -> Session:
    p = Path(path)
    if not p.is_file():
        raise SessionError(f"session file not found: {p}")
    tmp: Path | None = None
    try:
        conn, tmp = _connect_for_reading(p)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise SessionError(f"{p} is not a workbench session (SQLite says: {exc})") from None
    if version > SCHEMA_VERSION:
        conn.close()
        _remove(tmp)
        raise SessionError(
            f"{p} was written by a newer workbench (session schema {version}; this version "
            f"reads up to {SCHEMA_VERSION}). Upgrade the workbench to open it; "
            "the file is untouched."
        )
    try:
        conn.row_factory = sqlite3.Row
        row = conn.execute("SELECT * FROM session WHERE id=1").fetchone()
        if version < 1 or row is None:
            raise sqlite3.DatabaseError("no session header")
        meta = dict(row)
        for key in ("name", "created_at", "mode", "status"):
            _typed(meta[key], str, key)
        hardware = _hardware(_json_dict(meta["hardware_json"], "hardware", optional=False))
        configs = [_config_row(c) for c in conn.execute("SELECT * FROM configs ORDER BY idx")]
        conn.row_factory = None
    except _DAMAGE as exc:
        conn.close()
        _remove(tmp)
        raise SessionError(
            f"{p} is not a readable workbench session ({type(exc).__name__}: {exc})"
        ) from None
    return Session(p, version, meta, hardware, configs, conn, tmp)


def _config_row(c: sqlite3.Row) -> ConfigRow:
    command = json.loads(c["command_json"]) if c["command_json"] else None
    if command is not None and not (
        isinstance(command, list) and all(isinstance(a, str) for a in command)
    ):
        raise TypeError("a configuration's command is not a list of strings")
    return ConfigRow(
        _typed(c["idx"], int, "a configuration index"),
        _typed(c["label"], str, "a configuration label"),
        _json_dict(c["server_json"], "server settings", optional=False) or {},
        _json_dict(c["workload_json"], "workload settings", optional=False) or {},
        _typed(c["status"], str, "a configuration status"),
        _typed(c["error"], (str, type(None)), "a configuration error"),
        _typed(c["base_url"], (str, type(None)), "a base URL"),
        _typed(c["pid"], _INT, "a pid"),
        command,
        _typed(c["log_path"], (str, type(None)), "a log path"),
        _typed(c["log_tail"], (str, type(None)), "a log tail"),
        _json_dict(c["facts_json"] or None, "startup facts") or {},
        _typed(c["slots"], _INT, "slots"),
    )


def _hardware(hw: dict[str, Any] | None) -> dict[str, Any]:
    """The fingerprint, with only GPU entries that are objects (views read their names)."""
    hw = dict(hw or {})
    gpus = hw.get("gpus")
    hw["gpus"] = [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []
    return hw
