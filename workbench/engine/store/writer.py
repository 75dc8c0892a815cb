"""Writing a session: the file and its header (``create_session``), then every event of the
run as it comes (``SessionWriter``).

The writer runs on its own thread, fed by the event bus, and commits after every batch of
events, so a crash or a SIGKILL mid-run keeps every finished request. A session whose run
never reached its end is reported as incomplete when opened.
"""

from __future__ import annotations

import json
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workbench import __version__
from workbench.engine.base.errors import SessionError
from workbench.engine.base.records import Hardware
from workbench.engine.base.states import ConfigStatus, NoticeLevel, RunStatus
from workbench.engine.events import (
    ClientLoadMeasured,
    ConfigFinished,
    ConfigStarted,
    EventBus,
    ExperimentFinished,
    GpuSample,
    ImportedFrom,
    MachineLoadMeasured,
    MetricsSample,
    Notice,
    PredictionMade,
    ProcessSample,
    ReportedFigures,
    RequestFinished,
    ServerCounters,
    ServerReady,
    ServerStateChanged,
    SlotMatched,
    SlotsSample,
)
from workbench.engine.store.rows import (
    CHUNKS,
    CLIENT_LOAD,
    CONFIGS,
    IMPORT_SOURCE,
    MACHINE_LOAD,
    NOTICES,
    PREDICTED_REQUESTS,
    PREDICTION,
    PREDICTION_LEFT_OUT,
    PREDICTIONS,
    REMOTE_ORIGIN,
    REPORTED_FIGURES,
    REQUEST_SLOTS,
    REQUESTS,
    SAMPLED,
    SERVER_COUNTERS,
    SERVER_STATES,
    SESSION,
    TABLES,
    ConfigRow,
    RemoteOrigin,
    StoredChunk,
    StoredClientLoad,
    StoredLeftOut,
    StoredMachineLoad,
    StoredNotice,
    StoredPredictedRequest,
    StoredPrediction,
    StoredReportedFigure,
    StoredRequestSlot,
    StoredServerState,
    StoredSession,
)
from workbench.engine.store.schema import SCHEMA_VERSION, create_tables

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
    MachineLoadMeasured,
    ServerCounters,
    ConfigFinished,
    Notice,
    ImportedFrom,
    ReportedFigures,
    PredictionMade,
    ExperimentFinished,
)


REFUSED = "could not store a"  # how the notice of an event the file refused begins


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=10.0)
    conn.execute("PRAGMA journal_mode=WAL")
    # FULL: a commit survives a power cut, not only a crash. The writer has its own thread,
    # so the fsync never delays a measurement.
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def create_session(
    path: Path,
    name: str,
    experiment_toml: str,
    experiment_path: str | None,
    mode: str,
    base_url: str | None,
    hardware: Hardware,
    clock_origin_ns: int,
    created_at: str | None = None,
    wall_origin: float | None = None,
) -> None:
    """Create the file and its header row; raises at once if the folder is not writable.
    ``created_at``: when what it records happened, if not now (an imported file's date).
    ``wall_origin``: the wall-clock time at ``clock_origin_ns``, if not now (a far clock's
    origin, which this machine learns later)."""
    header = StoredSession(
        id=1,
        app_version=__version__,
        name=name,
        experiment_path=experiment_path,
        experiment_toml=experiment_toml,
        mode=mode,
        base_url=base_url,
        hardware_json=json.dumps(hardware.to_dict()),
        created_at=created_at or _now(),
        finished_at=None,
        status=RunStatus.RUNNING,
        error=None,
        clock_origin_ns=clock_origin_ns,
        wall_origin=time.time() if wall_origin is None else wall_origin,
    )
    conn = _connect(path)
    try:
        with conn:
            create_tables(conn)
            SESSION.insert(conn, [header])
    finally:
        conn.close()


def write_remote_origin(path: Path, origin: RemoteOrigin) -> None:
    """Say (or say again) where a session recorded through ``workbench agent`` was
    measured: its one ``remote_origin`` row, replaced."""
    conn = _connect(path)
    try:
        with conn:
            REMOTE_ORIGIN.insert(conn, [origin], replace=True)
    finally:
        conn.close()


def reopen_session(path: Path, rerun: list[int]) -> int:
    """Make a session whose run did not finish ready to go on in the same file: every row of
    the configurations to run again is deleted (a configuration is measured whole or not at
    all, so a half-run one starts over), and the session is running again. Returns the next
    request index. The prediction made before the run's first configuration is kept: it
    was made for the whole run. Only a file of this schema version can take this
    version's rows."""
    conn = _connect(path)
    conn.row_factory = sqlite3.Row
    try:
        version = conn.execute("PRAGMA user_version").fetchone()["user_version"]
        if version != SCHEMA_VERSION:
            raise SessionError(
                f"{path} was written with session schema {version}, this workbench writes "
                f"{SCHEMA_VERSION}: resume it with the version that wrote it, or run anew"
            )
        with conn:
            for index in rerun:
                for table in (t for t in TABLES if t not in PREDICTION):
                    key = "index" if table is CONFIGS else "config_index"
                    if key in table.fields:
                        table.delete(conn, {key: index})
            SESSION.update(conn, {"id": 1}, status=RunStatus.RUNNING, error=None, finished_at=None)
        highest = conn.execute("SELECT MAX(idx) AS highest FROM requests").fetchone()["highest"]
        return 0 if highest is None else int(highest) + 1
    finally:
        conn.close()


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

    def failure(self, timeout: float = 30.0) -> str | None:
        """Once the writer has written the run's end (waiting up to ``timeout``): why the
        session could not be written, as the run's error, or None."""
        self.join(timeout)
        return None if self.error is None else f"writing the session failed: {self.error}"

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
                Notice(
                    NoticeLevel.ERROR,
                    f"the session file cannot be written ({exc}); stopping the run",
                )
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
            lost = StoredNotice(
                t_ns=time.perf_counter_ns(),
                config_index=getattr(event, "config_index", None),
                level=NoticeLevel.ERROR,
                text=f"{REFUSED} {type(event).__name__}: {exc}",
            )
            NOTICES.insert(conn, [lost])
        conn.execute("RELEASE event")

    def _write(self, conn: sqlite3.Connection, event: Any) -> None:
        t_ns = time.perf_counter_ns()
        match event:
            case RequestFinished(record=r):
                REQUESTS.insert(conn, [r], replace=True)
                CHUNKS.insert(conn, StoredChunk.of(r), replace=True)
            case ProcessSample() | GpuSample() | MetricsSample() | SlotsSample():
                SAMPLE_TABLES[type(event)].insert(conn, [event])
            case ServerCounters():
                SERVER_COUNTERS.insert(conn, [event], replace=True)
            case ClientLoadMeasured(load=load):
                row = StoredClientLoad.of(event.config_index, event.repeat, load)
                CLIENT_LOAD.insert(conn, [row], replace=True)
            case MachineLoadMeasured(load=load):
                machine = StoredMachineLoad.of(event.config_index, event.repeat, load)
                MACHINE_LOAD.insert(conn, [machine], replace=True)
            case SlotMatched():
                slot = StoredRequestSlot(
                    config_index=event.config_index, index=event.index, slot=event.slot
                )
                REQUEST_SLOTS.insert(conn, [slot], replace=True)
            case ConfigStarted(config=config):
                d = config.to_dict()
                started = ConfigRow(
                    index=config.index,
                    label=config.label,
                    server=d["server"],
                    workload=d["workload"],
                    status=ConfigStatus.RUNNING,
                )
                CONFIGS.insert(conn, [started], replace=True)
            case ServerStateChanged():
                state = StoredServerState(
                    config_index=event.config_index,
                    t_ns=t_ns,
                    state=event.state,
                    detail=event.detail,
                )
                SERVER_STATES.insert(conn, [state])
            case ServerReady():
                CONFIGS.update(
                    conn,
                    {"index": event.config_index},
                    base_url=event.base_url,
                    pid=event.pid,
                    command=event.command,
                    log_path=event.log_path,
                    facts=event.facts,
                    slots=event.slots,
                )
            case ConfigFinished():
                CONFIGS.update(
                    conn,
                    {"index": event.config_index},
                    status=event.status,
                    error=event.error,
                    log_tail=event.log_tail,
                )
            case Notice():
                notice = StoredNotice(
                    t_ns=t_ns, config_index=event.config_index, level=event.level, text=event.text
                )
                NOTICES.insert(conn, [notice])
            case ImportedFrom(source=source):
                IMPORT_SOURCE.insert(conn, [source], replace=True)
            case ReportedFigures():
                reported = [
                    StoredReportedFigure(config_index=event.config_index, name=name, value=value)
                    for name, value in event.figures.items()
                ]
                REPORTED_FIGURES.insert(conn, reported, replace=True)
            case PredictionMade(prediction=prediction):
                PREDICTIONS.insert(conn, [StoredPrediction.of(c) for c in prediction.configs])
                PREDICTED_REQUESTS.insert(
                    conn,
                    [
                        StoredPredictedRequest.of(c.config_index, r)
                        for c in prediction.configs
                        for r in c.requests
                    ],
                )
                left_out = enumerate(prediction.left_out)
                PREDICTION_LEFT_OUT.insert(
                    conn, [StoredLeftOut(place=n, text=text) for n, text in left_out]
                )
            case ExperimentFinished():
                SESSION.update(
                    conn, {"id": 1}, status=event.status, error=event.error, finished_at=_now()
                )


# The samples, each written as it came: its event is its table's row.
SAMPLE_TABLES = {t.row: t for t in SAMPLED}
