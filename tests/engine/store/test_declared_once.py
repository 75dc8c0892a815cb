"""An event or a record is declared once, and its table follows: a field added to the
request record is created, written and read back with no other change, an older file reads
it as its default, and every stored sample is checked against its event's declaration."""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass, fields, replace

import pytest

from tests.engine.store.known_run import EVENTS, FULL, RECORDS, write_known_run
from workbench.cli.main import main
from workbench.engine.base.columns import column
from workbench.engine.base.errors import SessionError
from workbench.engine.base.records import RequestRecord
from workbench.engine.events import GpuSample, MetricsSample, ProcessSample, SlotsSample
from workbench.engine.run.replay import load_session_events
from workbench.engine.store.rows import REQUESTS
from workbench.engine.store.schema import SCHEMA_VERSION

NEXT = SCHEMA_VERSION + 1


@dataclass
class TurnRecord(RequestRecord):
    """The request record of a version to come, with two more fields."""

    conversation_id: str | None = column(since=NEXT, default=None)
    turn: int | None = column(since=NEXT, default=None)


WIDER = replace(REQUESTS, row=TurnRecord)  # the requests table, declared by the wider record


def test_a_field_added_to_the_record_is_a_column_of_its_table():
    assert WIDER.columns == (*REQUESTS.columns, "conversation_id", "turn")
    sql = WIDER.create_sql()
    # Later columns take NULL: an older file's rows never had them.
    assert "    conversation_id TEXT,\n    turn INTEGER,\n" in sql
    assert WIDER.insert_sql().endswith(":conversation_id, :turn)")
    assert ", NULL AS conversation_id, NULL AS turn FROM" in WIDER.select_sql(SCHEMA_VERSION)


def test_a_field_added_to_the_record_is_written_and_read_back(tmp_path):
    record = TurnRecord(**{f.name: getattr(FULL, f.name) for f in fields(FULL)})
    record = replace(record, chunks=[], conversation_id="c-7", turn=3)
    with contextlib.closing(sqlite3.connect(tmp_path / "next.sqlite")) as conn:
        with conn:
            conn.execute(WIDER.create_sql())
            WIDER.insert(conn, [record])
        assert WIDER.select(conn, NEXT) == [record]
        assert conn.execute("SELECT conversation_id, turn FROM requests").fetchall() == [("c-7", 3)]


def test_a_file_of_this_version_reads_the_added_field_as_its_default(tmp_path):
    path = write_known_run(tmp_path / "now.session.sqlite")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        read = WIDER.select(conn, SCHEMA_VERSION, order_by=("index",))
        now = REQUESTS.select(conn, SCHEMA_VERSION, order_by=("index",))
    assert [(r.conversation_id, r.turn) for r in read] == [(None, None)] * len(RECORDS)
    for wider, record in zip(read, now, strict=True):
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
