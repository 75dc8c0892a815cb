"""The file on disk is the one sessions always had: what is written now is what was written
before the store was split into modules, and files written then (or by older versions) open
with every value in its place.

``known_run_before_split.sql`` is a session written by the session module as it stood before
the split (commit 7cbae2e) from ``known_run.EVENTS`` (the startup facts and the hardware
fingerprint given as the dicts that code took, ``to_dict()`` of the records), dumped with
``steady_dump``: the tables as created, every row as SQL."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from dataclasses import fields, replace
from pathlib import Path

import pytest

from tests.engine.store.known_run import (
    COMMAND,
    COUNTERS,
    FACTS,
    FULL,
    HARDWARE,
    LOAD,
    RECORDS,
    SLOT,
    load_dump,
    steady_dump,
    write_known_run,
)
from workbench.engine.events import GpuSample, MetricsSample, ProcessSample, SlotsSample
from workbench.engine.figures.per_run import RunObservations
from workbench.engine.store import SCHEMA_VERSION, ConfigRow, open_session
from workbench.engine.store.rows import TABLES
from workbench.engine.store.schema import create_tables

BEFORE = Path(__file__).with_name("known_run_before_split.sql")
HAND_WRITTEN = Path(__file__).with_name("schema_v11.sql")
PROCESS_ROW = ProcessSample(0, 1000, 123_456_789, 12.5)


def written_before(folder: Path) -> Path:
    return load_dump(BEFORE.read_text(), folder / "before.session.sqlite")


def written_now(folder: Path) -> Path:
    return write_known_run(folder / "now.session.sqlite")


def test_a_run_is_written_as_before_the_split(tmp_path):
    """Same tables, same columns, the same value in every column, once what came after the
    split (schema 5: a request's ``prompt_tokens`` and ``streamed``; schema 6: the tables of
    an imported session, empty in a measured one; schema 7: a request's first answer time
    and a chunk's reasoning flag, none of them reasoning here; schema 8: a request's
    conversation and turn, none here; schema 9: the tables of a run's prediction, empty here;
    schema 10: a request's worker, none here, and the remote origin, empty here; schema 11:
    a request's trace line, none here) is taken out."""
    now = written_now(tmp_path)
    with contextlib.closing(sqlite3.connect(now)) as conn, conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (11,)
        assert conn.execute("SELECT DISTINCT trace_line FROM requests").fetchall() == [(None,)]
        conn.execute("ALTER TABLE requests DROP COLUMN trace_line")
        assert conn.execute("SELECT DISTINCT worker FROM requests").fetchall() == [(None,)]
        conn.execute("ALTER TABLE requests DROP COLUMN worker")
        assert conn.execute("SELECT count(*) FROM remote_origin").fetchone() == (0,)
        conn.execute("DROP TABLE remote_origin")
        for table in ("predictions", "predicted_requests", "prediction_left_out"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
            conn.execute(f"DROP TABLE {table}")
        assert conn.execute("SELECT DISTINCT conversation_id, turn FROM requests").fetchall() == [
            (None, None)
        ]
        conn.execute("ALTER TABLE requests DROP COLUMN conversation_id")
        conn.execute("ALTER TABLE requests DROP COLUMN turn")
        assert conn.execute("SELECT DISTINCT t_first_answer_ns FROM requests").fetchall() == [
            (None,)
        ]
        assert conn.execute("SELECT DISTINCT reasoning FROM chunks").fetchall() == [(0,)]
        conn.execute("ALTER TABLE requests DROP COLUMN t_first_answer_ns")
        conn.execute("ALTER TABLE chunks DROP COLUMN reasoning")
        for table in ("import_source", "reported_figures"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
            conn.execute(f"DROP TABLE {table}")
        assert conn.execute("SELECT idx, prompt_tokens, streamed FROM requests").fetchall() == [
            (0, None, 1),
            (1, 7, 1),
            (2, None, 1),
        ]
        conn.execute("ALTER TABLE requests DROP COLUMN prompt_tokens")
        conn.execute("ALTER TABLE requests DROP COLUMN streamed")
        conn.execute("PRAGMA user_version = 4")
    # Every row, value by value and column by column (its tables: the test below).
    assert steady_dump(now, tables=False) == steady_dump(written_before(tmp_path), tables=False)


def tables_of(path: Path) -> dict[str, tuple]:
    """Each table as SQLite describes it: its columns (place, name, type, NOT NULL,
    default, place in the key), its other properties (WITHOUT ROWID, ...), and its
    statement with the white space taken out (which holds what PRAGMAs do not say, such
    as a CHECK)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        found = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
        return {
            name: (
                conn.execute(f"PRAGMA table_info({name})").fetchall(),
                conn.execute(f"PRAGMA table_list({name})").fetchall(),
                "".join(sql.split()),
            )
            for name, sql in found.fetchall()
        }


def test_a_new_file_has_the_tables_the_schema_was_written_by_hand_with(tmp_path):
    """Each table's SQL is derived from its declaration: a new file holds the tables,
    columns, types, constraints and keys that the hand-written schema 6 made, and the
    columns schemas 7 and 8 added, the tables 9 added, 10's column and table, and 11's
    column."""
    assert SCHEMA_VERSION == 11  # a later version: compare with its own file
    by_hand = load_dump(HAND_WRITTEN.read_text(), tmp_path / "by-hand.sqlite")
    with contextlib.closing(sqlite3.connect(tmp_path / "derived.sqlite")) as conn, conn:
        create_tables(conn)
    derived, written = tables_of(tmp_path / "derived.sqlite"), tables_of(by_hand)
    assert list(derived) == [t.name for t in TABLES]
    assert sorted(derived) == sorted(written)
    for name in written:
        assert derived[name] == written[name], name
    for table in TABLES:
        info = derived[table.name][0]
        assert tuple(name for _, name, *_ in info) == table.columns, table.name


def assert_same_fields(read, written) -> None:
    for f in fields(written):
        assert getattr(read, f.name) == getattr(written, f.name), f.name
    assert read == written


@pytest.mark.parametrize("write", [written_before, written_now])
def test_every_value_reads_back_in_its_place(write, tmp_path):
    with open_session(write(tmp_path)) as session:
        assert session.schema_version == (4 if write is written_before else SCHEMA_VERSION)
        assert SCHEMA_VERSION == 11
        assert session.status == "complete"
        meta = dict(session.meta)
        assert meta.pop("created_at") and meta.pop("finished_at") and meta.pop("app_version")
        assert meta.pop("wall_origin") > 0
        assert meta == {
            "id": 1,
            "name": "known",
            "experiment_path": "exp.toml",
            "experiment_toml": "[server]\n",
            "mode": "managed",
            "base_url": None,
            "hardware_json": json.dumps(HARDWARE.to_dict()),
            "status": "complete",
            "error": None,
            "clock_origin_ns": 10,
        }
        assert_same_fields(session.hardware, HARDWARE)

        first, second = session.configs
        assert_same_fields(
            first,
            ConfigRow(
                index=0,
                label="np=2",
                server={"slots": 2, "ctx": 2048},
                workload={"requests": 3, "max_tokens": 4},
                status="ok",
                error=None,
                base_url="http://127.0.0.1:8080/v1",
                pid=4242,
                command=COMMAND,
                log_path="/tmp/server.log",
                log_tail="last lines of the log",
                facts=FACTS,
                slots=2,
            ),
        )
        assert (second.status, second.error, second.log_tail) == (
            "failed",
            "the server crashed",
            "its tail",
        )
        assert (second.base_url, second.pid, second.command, second.facts) == (
            None,
            None,
            None,
            None,
        )

        expected = [replace(r, slot=SLOT.slot if r is FULL else None) for r in RECORDS]
        if write is written_before:  # schema 4 did not know a prompt's token count
            expected = [replace(r, prompt_tokens=None) for r in expected]
        for read, written in zip(session.records(0), expected, strict=True):
            assert_same_fields(read, written)
        assert session.records(1) == []

        assert session.client_load(0) == {0: LOAD.load}
        assert session.observations(0) == {
            0: RunObservations(LOAD.load, COUNTERS.before, COUNTERS.after, slots_from_log=True)
        }
        assert session.samples("process_samples", 0) == [PROCESS_ROW]
        # Each sample reads back as the event it was written from.
        assert session.samples("gpu_samples", 0) == [GpuSample(0, 1000, 5_000_000)]
        assert session.samples("metrics_samples", 0) == [
            MetricsSample(0, 1000, {"llamacpp:requests_processing": 2.0})
        ]
        assert session.samples("slots_samples", 0) == [
            SlotsSample(0, 1000, [{"id": 0, "is_processing": True}])
        ]
        states = session.samples("server_states", 0) + session.samples("server_states", 1)
        assert [(s.config_index, s.state, s.detail) for s in states] == [
            (0, "starting", ""),
            (0, "healthy", "200 OK"),
            (1, "crashed", "exit code 1"),
        ]
        assert [(n.config_index, n.level, n.text) for n in session.notices()] == [
            (0, "warning", "the first notice"),
            (None, "info", "a notice of no configuration"),
        ]
        (summary, _) = session.summaries()
        assert summary.value("ok") == 1


def older(dump: Path, folder: Path, version: int, *statements: str) -> Path:
    path = load_dump(dump.read_text(), folder / f"v{version}.session.sqlite")
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        for statement in statements:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
    return path


def test_a_version_3_file_has_no_later_columns_nor_tables(tmp_path):
    """Schema 3 had neither the four later times of a request nor the client's load and
    the server's counters: such a file reads them as not recorded."""
    path = older(
        BEFORE,
        tmp_path,
        3,
        *(
            f"ALTER TABLE requests DROP COLUMN {c}"
            for c in ("t_intended_ns", "t_ready_ns", "connect_ns", "t_connected_ns")
        ),
        "DROP TABLE client_load",
        "DROP TABLE server_counters",
    )
    with open_session(path) as session:
        read = session.records(0)
        assert [r.slot for r in read] == [None, 1, None]  # request_slots came with schema 3
        later = replace(
            FULL, t_intended_ns=None, t_ready_ns=None, connect_ns=None, prompt_tokens=None
        )
        assert_same_fields(read[1], replace(later, t_connected_ns=None, slot=1))
        assert session.client_load(0) == {} and session.observations(0) == {}
        assert len(session.summaries()) == 2


def test_a_version_1_file_has_no_gpu_samples_nor_slots(tmp_path):
    path = older(BEFORE, tmp_path, 1, "DROP TABLE gpu_samples", "DROP TABLE request_slots")
    with open_session(path) as session:
        assert session.samples("gpu_samples", 0) == []
        assert [r.slot for r in session.records(0)] == [None, None, None]
        assert session.samples("process_samples", 0) == [PROCESS_ROW]
