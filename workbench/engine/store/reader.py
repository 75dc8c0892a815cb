"""Reading a session: ``open_session`` checks the header and the configurations at once;
the requests, samples and notices of a configuration are read when asked for.

Reading never writes to the file, and a file from elsewhere may be valid SQLite with
damaged content: whatever is wrong becomes one ``SessionError`` naming the file.
"""

from __future__ import annotations

import functools
import json
import math
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from workbench.engine.base.errors import SessionError
from workbench.engine.base.records import (
    Hardware,
    ImportSource,
    RequestRecord,
    StartupFacts,
    TokenChunk,
)
from workbench.engine.base.states import RunStatus
from workbench.engine.base.validation import validated
from workbench.engine.figures.client_limits import ClientLoad
from workbench.engine.figures.per_run import RunObservations, nested
from workbench.engine.figures.predicted import ConfigPrediction, PredictedRequest, RunPrediction
from workbench.engine.figures.summaries import ConfigSummary, summarize
from workbench.engine.store.rows import (
    CHUNKS,
    CLIENT_LOAD,
    CONFIGS,
    IMPORT_SOURCE,
    MACHINE_LOAD,
    NOTICES,
    PREDICTED_REQUESTS,
    PREDICTION_LEFT_OUT,
    PREDICTIONS,
    REMOTE_ORIGIN,
    REPORTED_FIGURES,
    REQUEST_SLOTS,
    REQUESTS,
    SAMPLES,
    SERVER_COUNTERS,
    SESSION,
    ConfigRow,
    RemoteOrigin,
    StoredChunk,
    StoredNotice,
)
from workbench.engine.store.schema import SCHEMA_VERSION

# What a valid SQLite file with content no workbench wrote raises on reading: a value that
# fails its validation (``checks``) raises ValueError.
_DAMAGE = (sqlite3.DatabaseError, KeyError, AttributeError, TypeError, ValueError)
# A prediction's bounds: a file can come from anyone. A run of a million requests would be
# a long one; a configuration's summary is a few kB for each repeat.
MAX_PREDICTED_CONFIGS = 10_000
MAX_PREDICTED_REQUESTS = 1_000_000
MAX_PREDICTION_BYTES = 64 * 2**20  # its summaries and lines, together


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


@dataclass
class Session:
    """A session file opened for reading."""

    path: Path
    schema_version: int
    meta: dict[str, Any]  # the header by column name
    hardware: Hardware
    configs: list[ConfigRow]
    _conn: sqlite3.Connection = field(repr=False)
    _copy_dir: Path | None = field(default=None, repr=False)
    _summaries: list[ConfigSummary] | None = field(default=None, repr=False)

    @property
    def status(self) -> str:
        """Running in the file means the writer never reached the end: incomplete."""
        status = self.meta["status"]
        return RunStatus.INCOMPLETE if status == RunStatus.RUNNING else status

    @property
    def managed(self) -> bool:
        """The workbench started this session's servers: their settings are facts. An
        external server's, or an imported file's, are only what the server said."""
        return self.meta.get("mode") == "managed"

    @_reads_content
    def records(self, config_index: int) -> list[RequestRecord]:
        version, where = self.schema_version, {"config_index": config_index}
        chunks: dict[int, list[TokenChunk]] = {}
        request_of = CHUNKS.fields["index"].name
        for found in CHUNKS.found(self._conn, version, where, ("index", "seq")):
            chunks.setdefault(found[request_of], []).append(StoredChunk.read(found))
        slots = {s.index: s.slot for s in REQUEST_SLOTS.select(self._conn, version, where)}
        return [
            replace(r, chunks=chunks.get(r.index, []), slot=slots.get(r.index))
            for r in REQUESTS.select(self._conn, version, where, ("index",))
        ]

    @_reads_content
    def observations(self, config_index: int) -> dict[int, RunObservations]:
        """Per repeat, what was measured besides the requests (none before schema 4)."""
        loads = self.client_load(config_index)
        machines = {
            m.repeat: m.read()
            for m in MACHINE_LOAD.select(
                self._conn, self.schema_version, {"config_index": config_index}
            )
        }
        counters = {
            c.repeat: c
            for c in SERVER_COUNTERS.select(
                self._conn, self.schema_version, {"config_index": config_index}
            )
        }
        # Each request's slot was matched from the server's log (a managed server, recorded
        # by a version that kept slots).
        from_log = self.managed and self.schema_version >= REQUEST_SLOTS.since
        observed = {}
        for repeat in set(loads) | set(counters) | set(machines):
            measured = counters.get(repeat)
            observed[repeat] = RunObservations(
                load=loads.get(repeat),
                counters_before=measured.before if measured else None,
                counters_after=measured.after if measured else None,
                slots_from_log=from_log,
                machine=machines.get(repeat),
            )
        return observed

    @_reads_content
    def client_load(self, config_index: int) -> dict[int, ClientLoad]:
        """Per repeat, how busy the measuring client was (none before schema 4)."""
        return {
            load.repeat: load.read()
            for load in CLIENT_LOAD.select(
                self._conn, self.schema_version, {"config_index": config_index}
            )
        }

    @_reads_content
    def samples(self, table: str, config_index: int) -> list[Any]:
        """The rows of one of the sample tables (``rows.SAMPLES``), oldest first: each a
        sample event as it was published (server states: as stored, with their time)."""
        if table not in SAMPLES:
            raise ValueError(table)
        return SAMPLES[table].select(
            self._conn, self.schema_version, {"config_index": config_index}, ("t_ns",)
        )

    @_reads_content
    def notices(self) -> list[StoredNotice]:
        """The run's notices, oldest first."""
        return NOTICES.select(self._conn, self.schema_version, order_by=("t_ns",))

    @_reads_content
    def import_source(self) -> ImportSource | None:
        """Where an imported session came from; None for one the workbench measured."""
        rows = IMPORT_SOURCE.select(self._conn, self.schema_version)
        return rows[0] if rows else None

    @_reads_content
    def remote_origin(self) -> RemoteOrigin | None:
        """Where a session recorded through ``workbench agent`` was measured; None for one
        measured here (or a file older than schema 10)."""
        rows = REMOTE_ORIGIN.select(self._conn, self.schema_version)
        return rows[0] if rows else None

    @_reads_content
    def reported_figures(self, config_index: int) -> dict[str, float]:
        """The figures an imported file stated for a configuration, under its own names (none
        for a measured session); a value that is not a finite number is left out."""
        found = REPORTED_FIGURES.found(
            self._conn, self.schema_version, {"config_index": config_index}, ("name",)
        )
        named = [(f["name"], f["value"]) for f in found]
        return {
            name: float(value)
            for name, value in named
            if isinstance(name, str)
            and isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
        }

    @_reads_content
    def predictions(self) -> RunPrediction | None:
        """What the run predicted before its first configuration, each configuration's
        summary checked whole; None for a run that made none (or a file older than 9)."""
        version, spent = self.schema_version, 0

        def text_of(found: sqlite3.Row, column: str) -> None:
            """Counts a row's text against the prediction's bytes."""
            nonlocal spent
            text = found[column]
            spent += len(text) if isinstance(text, str) else 0
            if spent > MAX_PREDICTION_BYTES:
                raise ValueError(f"a prediction of over {MAX_PREDICTION_BYTES:,} bytes")

        left_out, rows = [], []
        found_left = PREDICTION_LEFT_OUT.found(self._conn, version, order_by=("place",))
        for found in _bounded(found_left, MAX_PREDICTED_CONFIGS, "configurations left out"):
            text_of(found, "text")
            left_out.append(PREDICTION_LEFT_OUT.read(found))
        found_rows = PREDICTIONS.found(self._conn, version, order_by=("config_index",))
        for found in _bounded(found_rows, MAX_PREDICTED_CONFIGS, "predicted configurations"):
            text_of(found, "summary_json")
            rows.append(PREDICTIONS.read(found))
        if not rows and not left_out:
            return None
        placed: dict[int, list[PredictedRequest]] = {}
        order = ("config_index", "repeat", "index")
        found_requests = PREDICTED_REQUESTS.found(self._conn, version, order_by=order)
        for found in _bounded(found_requests, MAX_PREDICTED_REQUESTS, "predicted requests"):
            stored = PREDICTED_REQUESTS.read(found)
            placed.setdefault(stored.config_index, []).append(stored.read())
        configs = tuple(
            ConfigPrediction(
                row.config_index,
                row.label,
                _predicted_summary(row.summary),
                tuple(placed.get(row.config_index, ())),
                row.requests_s,
                row.calibration,
            )
            for row in rows
        )
        return RunPrediction(configs, tuple(row.text for row in left_out))

    @_reads_content
    def summaries(self) -> list[ConfigSummary]:
        """Each configuration's figures, computed once per opened file: it is read-only, and
        the comparison's table and charts both need them (each reads every record)."""
        if self._summaries is None:
            self._summaries = [
                summarize_config_records(
                    c, self.records(c.index), self.observations(c.index), self.managed
                )
                for c in self.configs
            ]
        return list(self._summaries)

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
    managed: bool = True,
) -> ConfigSummary:
    """Analysis of one configuration's records, one run per repeat. ``managed``: the
    session started its servers (``Session.managed``), so their settings are facts."""
    return summarize(
        config.index,
        config.label,
        config.run_config.server,
        config.run_config.workload,
        config.facts or StartupFacts(),
        records,
        observed,
        status=config.status,
        error=config.error,
        slots=config.slots,
        managed=managed,
    )


def _bounded(rows: Iterable[sqlite3.Row], limit: int, what: str) -> Iterator[sqlite3.Row]:
    """``rows``, refused past ``limit`` of them."""
    for n, row in enumerate(rows):
        if n == limit:
            raise ValueError(f"over {limit:,} {what}")
        yield row


def _predicted_summary(stored: dict[str, Any]) -> ConfigSummary:
    """A prediction's summary as ``ConfigSummary.to_dict()`` wrote it, every value of the
    type its field declares, nested ones too (no NaN, no infinity: none is a prediction); a
    field it lacks takes its default (one added since it was written), a key no field has is
    dropped (one taken out since). Validated as the JSON it was kept as; each repeat's
    figures nested into their sub-records first, where an older file kept them flat."""
    if isinstance(runs := stored.get("runs"), list):
        stored = {**stored, "runs": [nested(r) if isinstance(r, dict) else r for r in runs]}
    text = json.dumps(stored, allow_nan=False)
    return validated(ConfigSummary, text, "a predicted summary", ValueError, json=True)


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
    # mode=ro: a file deleted since it was listed must not come back as an empty one.
    return sqlite3.connect(p.resolve().as_uri() + "?mode=ro&immutable=1", uri=True), None


def _remove(folder: Path | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def open_session(path: str | Path) -> Session:
    p = Path(path)
    if p.is_dir():
        raise SessionError(f"{p} is a folder, not a session file (*.session.sqlite)")
    if not p.is_file():
        raise SessionError(f"session file not found: {p}")
    tmp: Path | None = None
    try:
        conn, tmp = _connect_for_reading(p)
        conn.row_factory = sqlite3.Row
        version = conn.execute("PRAGMA user_version").fetchone()["user_version"]
    except sqlite3.DatabaseError as exc:
        raise SessionError(f"{p} is not a workbench session (SQLite says: {exc})") from None
    except OSError as exc:  # gone (or unreadable) since it was found
        raise SessionError(f"cannot read {p}: {exc.strerror or exc}") from None
    if version > SCHEMA_VERSION:
        conn.close()
        _remove(tmp)
        raise SessionError(
            f"{p} was written by a newer workbench (session schema {version}; this version "
            f"reads up to {SCHEMA_VERSION}). Upgrade the workbench to open it; "
            "the file is untouched."
        )
    try:
        header = next(iter(SESSION.select(conn, version, {"id": 1})), None)
        if version < 1 or header is None:
            raise sqlite3.DatabaseError("no session header")
        meta = header.meta()
        hardware = header.hardware()
        configs = CONFIGS.select(conn, version, order_by=("index",))
    except _DAMAGE as exc:
        conn.close()
        _remove(tmp)
        raise SessionError(
            f"{p} is not a readable workbench session ({type(exc).__name__}: {exc})"
        ) from None
    return Session(p, version, meta, hardware, configs, conn, tmp)
