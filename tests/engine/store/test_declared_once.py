"""An event or a record is declared once, and its table follows: a field added to the
request record is created, written and read back with no other change, an older file reads
it as its default, and every stored sample is checked against its event's declaration."""

from __future__ import annotations

import contextlib
import math
import sqlite3
from dataclasses import dataclass, fields, replace
from pathlib import Path

import pytest

from tests.engine.store.known_run import EVENTS, FULL, RECORDS, load_dump, write_known_run
from workbench.cli.main import main
from workbench.engine.base.columns import column
from workbench.engine.base.errors import SessionError
from workbench.engine.base.records import RequestRecord
from workbench.engine.events import GpuSample, MetricsSample, ProcessSample, SlotsSample
from workbench.engine.run.replay import load_session_events
from workbench.engine.store import open_session
from workbench.engine.store.rows import REQUESTS
from workbench.engine.store.schema import SCHEMA_VERSION

NEXT = SCHEMA_VERSION + 1


@dataclass
class WiderRecord(RequestRecord):
    """The request record of a version to come, with two more fields (named so that no real
    field is likely to take their names)."""

    example_label: str | None = column(since=NEXT, default=None)
    example_count: int | None = column(since=NEXT, default=None)


WIDER = replace(REQUESTS, row=WiderRecord)  # the requests table, declared by the wider record


def test_a_field_added_to_the_record_is_a_column_of_its_table():
    assert WIDER.columns == (*REQUESTS.columns, "example_label", "example_count")
    sql = WIDER.create_sql()
    # Later columns take NULL: an older file's rows never had them.
    assert "    example_label TEXT,\n    example_count INTEGER,\n" in sql
    assert WIDER.insert_sql().endswith(":example_label, :example_count)")
    assert ", NULL AS example_label, NULL AS example_count FROM" in WIDER.select_sql(SCHEMA_VERSION)


def test_a_field_added_to_the_record_is_written_and_read_back(tmp_path):
    record = WiderRecord(**{f.name: getattr(FULL, f.name) for f in fields(FULL)})
    record = replace(record, chunks=[], example_label="c-7", example_count=3)
    with contextlib.closing(sqlite3.connect(tmp_path / "next.sqlite")) as conn:
        with conn:
            conn.execute(WIDER.create_sql())
            WIDER.insert(conn, [record])
        assert WIDER.select(conn, NEXT) == [record]
        assert conn.execute("SELECT example_label, example_count FROM requests").fetchall() == [
            ("c-7", 3)
        ]


OLDER = Path(__file__).with_name("known_run_before_split.sql")  # schema 4


@pytest.mark.parametrize("version", [SCHEMA_VERSION, 4])
def test_an_older_file_reads_the_added_field_as_its_default(version, tmp_path):
    path = tmp_path / f"v{version}.session.sqlite"
    if version == SCHEMA_VERSION:
        write_known_run(path)
    else:
        load_dump(OLDER.read_text(), path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        read = WIDER.select(conn, version, order_by=("index",))
        known = REQUESTS.select(conn, version, order_by=("index",))
    assert [(r.example_label, r.example_count) for r in read] == [(None, None)] * len(RECORDS)
    for wider, record in zip(read, known, strict=True):
        assert all(getattr(wider, f.name) == getattr(record, f.name) for f in fields(record))


DAMAGED_SAMPLES = {
    "rss-a-text": "UPDATE process_samples SET rss_bytes = 'lots'",
    "rss-null": "UPDATE process_samples SET rss_bytes = NULL",
    "metrics-not-json": "UPDATE metrics_samples SET values_json = '{bad'",
    "metrics-a-list": "UPDATE metrics_samples SET values_json = '[1]'",
    "slots-null": "UPDATE slots_samples SET slots_json = NULL",
}


@pytest.mark.parametrize("damage", sorted(DAMAGED_SAMPLES))
def test_a_damaged_sample_is_one_clear_error(damage, tmp_path, capsys):
    """A sample is read back as the event it was written from, each value checked against
    the event's declaration: damage is one ``SessionError`` naming the file, whether the
    session is replayed or exported (it used to reach the views, or a traceback)."""
    path = write_known_run(tmp_path / f"{damage}.session.sqlite")
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(DAMAGED_SAMPLES[damage])
    with pytest.raises(SessionError, match=f"{damage}.session.sqlite has damaged content"):
        load_session_events(path)
    assert main(["export", str(path), "--json", str(tmp_path / "out.json")]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert "".join(captured.err.split()).count("error:") == 1


def test_a_session_replays_its_samples_as_they_were_published(tmp_path):
    path = write_known_run(tmp_path / "known.session.sqlite")
    sampled = (ProcessSample, GpuSample, MetricsSample, SlotsSample)
    replayed = [e for _, e in load_session_events(path) if isinstance(e, sampled)]
    assert replayed == [e for e in EVENTS if isinstance(e, sampled)]


def test_a_servers_own_numbers_may_be_nan_or_infinite(tmp_path):
    """Prometheus allows NaN and the infinities, and the writer keeps them (JSON's NaN and
    Infinity): a metrics sample or a counter holding one reads back as it was, where a
    number the workbench measured must be finite."""
    path = write_known_run(tmp_path / "nan.session.sqlite")
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("""UPDATE metrics_samples SET values_json = '{"a": NaN, "b": -Infinity}'""")
        conn.execute("""UPDATE server_counters SET after_json = '{"c": Infinity}'""")
    with open_session(path) as session:
        (sample,) = session.samples("metrics_samples", 0)
        assert math.isnan(sample.values["a"]) and sample.values["b"] == -math.inf
        assert session.observations(0)[0].counters_after == {"c": math.inf}
