"""Each table is declared once, by its row: the INSERT, the SELECT and the UPDATE come from
that declaration, values pass by column name, and every row reads back as it was written."""

from __future__ import annotations

import contextlib
import enum
import re
import sqlite3
import types
import typing
from dataclasses import dataclass, fields, replace
from pathlib import Path

import pytest

from workbench.engine.base.columns import column, column_of, declared_fields
from workbench.engine.base.records import RequestRecord, StartupFacts, TokenChunk
from workbench.engine.base.states import ConfigStatus
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.workloads import ConversationsWorkload
from workbench.engine.events import GpuSample
from workbench.engine.store.rows import (
    CHUNKS,
    CONFIGS,
    GPU_SAMPLES,
    REQUESTS,
    TABLES,
    ConfigRow,
    StoredChunk,
)
from workbench.engine.store.schema import SCHEMA_VERSION, create_tables
from workbench.engine.store.table import Table

STORE = Path(__file__).parents[3] / "workbench" / "engine" / "store"


@pytest.fixture
def conn(tmp_path):
    with contextlib.closing(sqlite3.connect(tmp_path / "s.session.sqlite")) as conn:
        with conn:
            create_tables(conn)
        yield conn


def value_of(hint: typing.Any, name: str, k: int) -> typing.Any:
    """A value of ``hint``, made of ``k``: different for every column and seed."""
    kind = hint
    if typing.get_origin(hint) is types.UnionType:  # X | None
        (kind,) = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(kind)
    if origin is dict:
        return {f"{name} {k}": k + 0.5}
    if origin is list:
        (entry,) = typing.get_args(kind)
        return [f"{name} {k}"] if entry is str else [{"id": k}]
    if kind is StartupFacts:
        return StartupFacts(n_slots=k)
    if isinstance(kind, type) and issubclass(kind, enum.StrEnum):
        members = list(kind)
        return members[k % len(members)]
    if kind is bool:
        return k % 2 == 1
    if kind is str:
        return f"{name} {k}"
    return k + 0.25 if kind is float else k


def example(row_type: type, seed: int) -> typing.Any:
    """A row of ``row_type`` whose every stored field holds a value of its declared type,
    each different from every other (and from the next ``seed``'s); a field that is no
    column keeps its default."""
    values = {}
    for n, (f, hint) in enumerate(declared_fields(row_type)):
        if not column_of(f).stored:
            continue
        values[f.name] = 1 if f.name == "id" else value_of(hint, f.name, 1000 * seed + n)
    return row_type(**values)


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_every_row_reads_back_as_written(conn, table):
    seeds = (1,) if table.single_row else (1, 2)  # one-row tables
    written = [example(table.row, seed) for seed in seeds]
    with conn:
        table.insert(conn, written)
    first = next(iter(table.fields))
    read = table.select(conn, SCHEMA_VERSION, order_by=(first,))
    assert len(read) == len(written)
    for back, row in zip(read, written, strict=True):
        for f in fields(row):
            value = getattr(back, f.name)
            assert value == getattr(row, f.name) and type(value) is type(getattr(row, f.name)), (
                f"{table.name}.{f.name}"
            )


def stored_columns(table: Table) -> list[str]:
    """The columns its declaration's stored fields name."""
    return [column_of(f).name or f.name for f in fields(table.row) if column_of(f).stored]


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_every_statement_names_the_declared_columns(table):
    insert = re.fullmatch(r"INSERT INTO (\w+) \((.*)\) VALUES \((.*)\)", table.insert_sql())
    assert insert is not None and insert[1] == table.name
    assert insert[2].split(", ") == list(table.columns)
    assert insert[3].split(", ") == [f":{name}" for name in table.columns]
    assert set(stored_columns(table)) <= set(table.columns)
    select = re.fullmatch(r"SELECT (.*) FROM (\w+)", table.select_sql(SCHEMA_VERSION))
    assert select is not None and select[2] == table.name
    assert sorted(select[1].split(", ")) == sorted(stored_columns(table))


def test_a_request_is_stored_by_its_record_alone(conn):
    """The record is the requests table's declaration: every field but its chunks and slot
    (tables of their own) is a column, under its stored name; the text and token count are
    written beside them for SQL readers, and the record reads back whole."""
    stored = {f.name for f in fields(RequestRecord)} - {"chunks", "slot"}
    assert set(REQUESTS.fields) == stored
    assert REQUESTS.fields["config_index"].name == "config_idx"
    assert REQUESTS.fields["usage"].name == "usage_json"
    record = RequestRecord(
        0, 1, 2, "p", ok=True, usage={"completion_tokens": 2}, chunks=[TokenChunk(5, "ab")]
    )
    with conn:
        REQUESTS.insert(conn, [record])
    found = conn.execute(
        "SELECT config_idx, idx, repeat, ok, usage_json, output_tokens, token_source, text "
        "FROM requests"
    ).fetchall()
    assert found == [(0, 2, 1, 1, '{"completion_tokens": 2}', 2, "usage", "ab")]
    (back,) = REQUESTS.select(conn, SCHEMA_VERSION)
    assert back == replace(record, chunks=[])


@dataclass(frozen=True)
class WiderGpuSample(GpuSample):
    """The GPU sample of a version to come, with one more column."""

    temperature_c: float | None = column(since=SCHEMA_VERSION + 1, default=None)


def test_a_column_added_to_a_row_is_written_and_read(conn):
    wider = Table(GPU_SAMPLES.name, WiderGpuSample, since=GPU_SAMPLES.since)
    assert wider.columns == (*GPU_SAMPLES.columns, "temperature_c")
    assert wider.insert_sql().endswith(", temperature_c) VALUES (:config_idx, :t_ns, "
                                       ":gpu_bytes, :temperature_c)")  # fmt: skip
    newer = SCHEMA_VERSION + 1
    assert wider.select_sql(newer).startswith("SELECT config_idx, t_ns, gpu_bytes, temperature_c ")
    # A file of this version has no such column: it reads as not recorded.
    assert ", NULL AS temperature_c FROM" in wider.select_sql(SCHEMA_VERSION)
    GPU_SAMPLES.insert(conn, [GpuSample(0, 1, 2)])
    (old,) = wider.select(conn, SCHEMA_VERSION)
    assert old == WiderGpuSample(0, 1, 2, temperature_c=None)

    conn.execute("ALTER TABLE gpu_samples ADD COLUMN temperature_c REAL")
    written = WiderGpuSample(0, 3, 4, temperature_c=61.5)
    wider.insert(conn, [written])
    assert wider.select(conn, newer, {"t_ns": 3}) == [written]


def test_a_table_newer_than_the_file_has_no_rows(conn):
    GPU_SAMPLES.insert(conn, [GpuSample(0, 1, 2)])
    assert GPU_SAMPLES.select(conn, GPU_SAMPLES.since - 1) == []
    assert len(GPU_SAMPLES.select(conn, GPU_SAMPLES.since)) == 1


def test_a_row_is_built_by_name_only():
    with pytest.raises(TypeError):
        StoredChunk(0, 1, 2, 3, "x")
    chunk = StoredChunk(config_index=0, index=1, seq=2, t_ns=3, text="x")
    with pytest.raises(AttributeError):
        chunk.text = "y"


def test_names_that_are_no_column_are_refused(conn):
    with pytest.raises(ValueError, match="no column 'colour'"):
        CONFIGS.update(conn, {"index": 0}, colour="red")
    with pytest.raises(ValueError, match="no column 'idx'"):  # a field's name, not its column's
        CONFIGS.update(conn, {"idx": 0}, label="np=1")
    with pytest.raises(ValueError, match="no column 'colour'"):
        CONFIGS.select(conn, SCHEMA_VERSION, {"colour": "red"})
    with pytest.raises(ValueError, match="no column 'colour'"):
        CONFIGS.select(conn, SCHEMA_VERSION, order_by=("colour",))
    with pytest.raises(TypeError, match="holds StoredChunk"):
        CHUNKS.insert(conn, [GpuSample(0, 1, 2)])


def started(index: int, label: str) -> ConfigRow:
    return ConfigRow(index=index, label=label, server={}, workload={}, status=ConfigStatus.RUNNING)


def test_an_update_sets_only_what_it_names(conn):
    CONFIGS.insert(conn, [started(0, "np=1")])
    CONFIGS.insert(conn, [started(1, "np=2")])
    CONFIGS.update(conn, {"index": 1}, status=ConfigStatus.OK, log_tail="tail")
    first, second = CONFIGS.select(conn, SCHEMA_VERSION, order_by=("index",))
    assert first == started(0, "np=1")
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


def test_a_stored_configuration_reads_typed_whatever_version_wrote_it():
    """A configuration's settings are the JSON of the version that ran it: a field this
    version does not know is dropped, a wrong value takes its default, and the kind of
    workload is the one its fields say."""
    row = ConfigRow(
        index=2,
        label="np=2",
        server={"slots": 2, "model": "m.gguf", "gone_since": 1, "ctx": "big"},
        workload={"kind": "conversations", "users": 3, "retired": True},
        status=ConfigStatus.OK,
    )
    config = row.run_config
    assert (config.index, config.label) == (2, "np=2")
    assert (config.server.slots, config.server.model) == (2, "m.gguf")
    assert config.server.ctx == ServerSettings().ctx
    assert isinstance(config.workload, ConversationsWorkload) and config.workload.users == 3
