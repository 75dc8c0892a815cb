"""The session reader (``store/reader.py``) fed a session file with any value in any column
of a table that has rows, and with a JSON column's document changed in a few places: every
part of it reads, or the reading is refused in one line naming the file, never a traceback.
A value in the startup facts or the hardware fingerprint (records kept as JSON, read
leniently) never stops the file opening."""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, event, given, reject
from hypothesis import strategies as st

from tests.engine.store.test_predictions_stored import sweep_prediction, with_prediction
from tests.fuzz.json_documents import JSON, NEAR, NESTED, dumped, mutated
from tests.made_sessions import write_sweep
from workbench.engine.base.errors import SessionError
from workbench.engine.store import open_session
from workbench.engine.store.rows import SAMPLES, TABLES


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A sweep of two configurations and its prediction: every table a run fills has rows."""
    folder = tmp_path_factory.mktemp("sessions")
    return with_prediction(write_sweep(folder / "made.session.sqlite"), sweep_prediction())


@functools.cache
def _filled(path: Path) -> list[tuple[str, str]]:
    """Every (table, column) that holds a value in the made session."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return [
            (t.name, column)
            for t in TABLES
            if conn.execute(f"SELECT count(*) FROM {t.name}").fetchone()[0]
            for column in t.columns
        ]


@functools.cache
def _made_json(path: Path) -> dict[str, Any]:
    """Each JSON column's first document in the made session, by (table, column)."""
    found = {}
    with contextlib.closing(sqlite3.connect(path)) as conn:
        for table in TABLES:
            for column in table.columns:
                if not column.endswith("_json"):
                    continue
                row = conn.execute(f"SELECT {column} FROM {table.name} LIMIT 1").fetchone()
                if row and row[0]:
                    found[table.name, column] = json.loads(row[0])
    return found


_VALUES = (
    NEAR
    | st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats()
    | st.text(max_size=30)
    | st.binary(max_size=12)
    | JSON.map(dumped)
    | NESTED
)
"""What a column may hold: any SQLite value (text, blobs, numbers, NULL), JSON text too."""


def changed(made: Path, tmp: Path, table: str, column: str, value: Any) -> Path:
    """A copy of the made session with ``column`` of every row of ``table`` set to ``value``
    (where SQLite takes it)."""
    path = tmp / "changed.session.sqlite"
    shutil.copyfile(made, path)
    if isinstance(value, list | dict):
        value = dumped(value)
    try:
        with contextlib.closing(sqlite3.connect(path)) as conn, conn:
            conn.execute(f"UPDATE {table} SET {column} = ?", (value,))
    except (sqlite3.IntegrityError, OverflowError):  # what SQLite cannot hold there
        reject()
    return path


def read(path: Path) -> bool:
    """Whether every part of the session read; where one did not, it was refused in one
    line naming the file."""
    try:
        with open_session(path) as session:
            for config in session.configs:
                session.records(config.index)
                session.observations(config.index)
                session.reported_figures(config.index)
                for table in SAMPLES:
                    session.samples(table, config.index)
            session.notices()
            session.import_source()
            session.remote_origin()
            session.predictions()
        return True
    except SessionError as exc:
        line = str(exc)
        assert len(line.splitlines()) == 1 and path.name in line, line
        return False


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("changed")


def test_the_made_session_reads(made):
    assert read(made)


@given(st.data(), _VALUES)
def test_any_value_in_any_column_is_read_or_refused_in_one_line(made, folder, data, value):
    table, column = data.draw(st.sampled_from(_filled(made)))
    event("read" if read(changed(made, folder, table, column, value)) else "refused")


@given(st.data())
def test_a_changed_json_document_is_read_or_refused_in_one_line(made, folder, data):
    documents = _made_json(made)
    (table, column) = data.draw(st.sampled_from(sorted(documents)))
    document = data.draw(mutated(documents[table, column]))
    path = changed(made, folder, table, column, dumped(document))
    event(f"{column}: " + ("read" if read(path) else "refused"))


@given(st.sampled_from(["facts_json", "hardware_json"]), st.data())
def test_any_facts_and_hardware_object_open(made, folder, column, data):
    """Inside the records kept as JSON a wrong value reads as unknown: any object opens."""
    table = "configs" if column == "facts_json" else "session"
    document = data.draw(mutated(_made_json(made)[table, column]))
    assume(isinstance(document, dict))
    with open_session(changed(made, folder, table, column, document)) as session:
        assert session.hardware is not None and session.configs
