"""Each table is declared once, by its row: the INSERT, the SELECT and the UPDATE come from
that declaration, values pass by column name, and every row reads back as it was written."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import typing
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

from workbench.engine.store.rows import (
    CHUNKS,
    CONFIGS,
    GPU_SAMPLES,
    IMPORT_SOURCE,
    SESSION,
    TABLES,
    StoredChunk,
    StoredConfig,
    StoredGpuSample,
)
from workbench.engine.store.schema import SCHEMA_VERSION, create_tables
from workbench.engine.store.table import Table, added_in

STORE = Path(__file__).parents[3] / "workbench" / "engine" / "store"


@pytest.fixture
def conn(tmp_path):
    with contextlib.closing(sqlite3.connect(tmp_path / "s.session.sqlite")) as conn:
        with conn:
            create_tables(conn)
        yield conn


def example(row_type: type, seed: int) -> typing.Any:
    """A row of ``row_type`` whose every column holds a value of its declared type, each
    different from every other (and from the next ``seed``'s)."""
    hints = typing.get_type_hints(row_type)
    values = {}
    for n, f in enumerate(fields(row_type)):
        kinds = typing.get_args(hints[f.name]) or (hints[f.name],)
        k = 1000 * seed + n
        if f.name == "id":  # the header's one row
            values[f.name] = 1
        elif str in kinds:
            values[f.name] = f"{f.name} {k}"
        elif float in kinds:
            values[f.name] = k + 0.25
        else:
            values[f.name] = k
    return row_type(**values)


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_every_row_reads_back_as_written(conn, table):
    seeds = (1,) if table in (SESSION, IMPORT_SOURCE) else (1, 2)  # one-row tables
    written = [example(table.row, seed) for seed in seeds]
    with conn:
        table.insert(conn, written)
    read = table.select(conn, SCHEMA_VERSION, order_by=table.columns[:1])
    assert len(read) == len(written)
    for back, row in zip(read, written, strict=True):
        for f in fields(row):
            value = getattr(back, f.name)
            assert value == getattr(row, f.name) and type(value) is type(getattr(row, f.name)), (
                f"{table.name}.{f.name}"
            )


def declared(table: Table) -> list[str]:
    return [f.name for f in fields(table.row)]


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_every_statement_names_the_declared_columns(table):
    insert = re.fullmatch(r"INSERT INTO (\w+) \((.*)\) VALUES \((.*)\)", table.insert_sql())
    assert insert is not None and insert[1] == table.name
    assert insert[2].split(", ") == declared(table)
    assert insert[3].split(", ") == [f":{name}" for name in declared(table)]
    select = re.fullmatch(r"SELECT (.*) FROM (\w+)", table.select_sql(SCHEMA_VERSION))
    assert select is not None and select[2] == table.name
    assert select[1].split(", ") == declared(table)


@dataclass(frozen=True, kw_only=True)
class WiderGpuSample(StoredGpuSample):
    """The GPU sample of a version to come, with one more column."""

    temperature_c: float | None = added_in(SCHEMA_VERSION + 1)


def test_a_column_added_to_a_row_is_written_and_read(conn):
    wider = Table(GPU_SAMPLES.name, WiderGpuSample, since=GPU_SAMPLES.since)
    assert wider.columns == (*GPU_SAMPLES.columns, "temperature_c")
    assert wider.insert_sql().endswith(", temperature_c) VALUES (:config_idx, :t_ns, "
                                       ":gpu_bytes, :temperature_c)")  # fmt: skip
    newer = SCHEMA_VERSION + 1
    assert wider.select_sql(newer).startswith("SELECT config_idx, t_ns, gpu_bytes, temperature_c ")
    # A file of this version has no such column: it reads as not recorded.
    assert ", NULL AS temperature_c FROM" in wider.select_sql(SCHEMA_VERSION)
    GPU_SAMPLES.insert(conn, [StoredGpuSample(config_idx=0, t_ns=1, gpu_bytes=2)])
    (old,) = wider.select(conn, SCHEMA_VERSION)
    assert old == WiderGpuSample(config_idx=0, t_ns=1, gpu_bytes=2, temperature_c=None)

    conn.execute("ALTER TABLE gpu_samples ADD COLUMN temperature_c REAL")
    written = WiderGpuSample(config_idx=0, t_ns=3, gpu_bytes=4, temperature_c=61.5)
    wider.insert(conn, [written])
    assert wider.select(conn, newer, {"t_ns": 3}) == [written]


def test_a_table_newer_than_the_file_has_no_rows(conn):
    GPU_SAMPLES.insert(conn, [StoredGpuSample(config_idx=0, t_ns=1, gpu_bytes=2)])
    assert GPU_SAMPLES.select(conn, GPU_SAMPLES.since - 1) == []
    assert len(GPU_SAMPLES.select(conn, GPU_SAMPLES.since)) == 1


def test_a_row_is_built_by_name_only():
    with pytest.raises(TypeError):
        StoredChunk(0, 1, 2, 3, "x")
    chunk = StoredChunk(config_idx=0, request_idx=1, seq=2, t_ns=3, text="x")
    with pytest.raises(AttributeError):
        chunk.text = "y"


def test_names_that_are_no_column_are_refused(conn):
    with pytest.raises(ValueError, match="no column 'colour'"):
        CONFIGS.update(conn, {"idx": 0}, colour="red")
    with pytest.raises(ValueError, match="no column 'colour'"):
        CONFIGS.select(conn, SCHEMA_VERSION, {"colour": "red"})
    with pytest.raises(ValueError, match="no column 'colour'"):
        CONFIGS.select(conn, SCHEMA_VERSION, order_by=("colour",))
    with pytest.raises(TypeError, match="holds StoredChunk"):
        CHUNKS.insert(conn, [StoredGpuSample(config_idx=0, t_ns=1, gpu_bytes=2)])


def test_an_update_sets_only_what_it_names(conn):
    CONFIGS.insert(conn, [StoredConfig.started(0, "np=1", {}, {})])
    CONFIGS.insert(conn, [StoredConfig.started(1, "np=2", {}, {})])
    CONFIGS.update(conn, {"idx": 1}, status="ok", log_tail="tail")
    first, second = CONFIGS.select(conn, SCHEMA_VERSION, order_by=("idx",))
    assert first == StoredConfig.started(0, "np=1", {}, {})
    assert (second.status, second.log_tail, second.error, second.label) == (
        "ok",
        "tail",
        None,
        "np=2",
    )


def test_the_store_maps_no_column_by_position():
    """Every statement in the store comes from a declaration: no ``?`` placeholder, no
    ``SELECT *``, no fetched row taken apart by position."""
    positional = re.compile(r"\(\?|\?,|SELECT \*|row\[\d|fetch\w*\(\)\[\d| in \S*execute\(")
    for source in STORE.glob("*.py"):
        for line in source.read_text().splitlines():
            assert not positional.search(line), (source.name, line)


def test_a_new_file_gets_every_table_or_none(tmp_path):
    """The tables, the schema version and the caller's first rows are one transaction: a
    session file never holds half a schema, nor tables without their header row."""
    with contextlib.closing(sqlite3.connect(tmp_path / "s.session.sqlite")) as conn:
        create_tables(conn)
        assert conn.in_transaction
        conn.rollback()
        assert conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone() == (0,)
        assert conn.execute("PRAGMA user_version").fetchone() == (0,)
        with conn:
            create_tables(conn)
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert names == {table.name for table in TABLES}
