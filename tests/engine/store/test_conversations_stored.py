"""A conversations run's requests keep their conversation and turn in the session file
(schema 8) and in ``requests.csv``'s last two columns; a file of schema 7, which had
neither, reads every request as an independent one."""

from __future__ import annotations

import contextlib
import csv
import sqlite3
from dataclasses import replace
from pathlib import Path

from tests.engine.store.known_run import load_dump
from tests.made_sessions import Config, build_session, request
from workbench.engine.analysis.export import REQUEST_COLUMNS, write_requests_csv
from workbench.engine.store import open_session

HAND_WRITTEN_V7 = Path(__file__).with_name("schema_v7.sql")
TOML = (
    '[server]\nslots = 2\n[workload]\nkind = "conversations"\nusers = 2\nturns = 2\n'
    "max_tokens = 12\n"
)


def conversed(folder: Path) -> Path:
    """Two conversations of two turns, sent turn by turn."""
    turns = [
        replace(request(k, submit_s=k * 2.0), conversation_id=f"r1u{k % 2 + 1}", turn=k // 2 + 1)
        for k in range(4)
    ]
    return build_session(folder / "conversed.session.sqlite", TOML, [Config(requests=turns)])


def test_conversation_and_turn_read_back_and_are_exported_last(tmp_path):
    path = conversed(tmp_path)
    with open_session(path) as session:
        read = session.records(0)
        assert [(r.conversation_id, r.turn) for r in read] == [
            ("r1u1", 1),
            ("r1u2", 1),
            ("r1u1", 2),
            ("r1u2", 2),
        ]
        write_requests_csv(tmp_path / "requests.csv", session)
    after = REQUEST_COLUMNS.index("reasoning_token_source")  # the last before conversations
    assert REQUEST_COLUMNS[after : after + 3] == ["reasoning_token_source", "conversation", "turn"]
    with (tmp_path / "requests.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(row["conversation"], row["turn"]) for row in rows] == [
        ("r1u1", "1"),
        ("r1u2", "1"),
        ("r1u1", "2"),
        ("r1u2", "2"),
    ]


def test_a_version_7_file_reads_every_request_as_independent(tmp_path):
    path = load_dump(HAND_WRITTEN_V7.read_text(), tmp_path / "v7.session.sqlite")
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "INSERT INTO session VALUES (1, 'old', 'v7', NULL, ?, 'managed', NULL, '{}', "
            "'then', 'later', 'complete', NULL, 0, 1.5)",
            (TOML,),
        )
        conn.execute(
            "INSERT INTO configs (idx, label, server_json, workload_json, status) "
            "VALUES (0, 'np=2', '{}', '{}', 'ok')"
        )
        conn.execute(
            "INSERT INTO requests (config_idx, idx, repeat, warmup, prompt, ok) "
            "VALUES (0, 0, 0, 0, 'p', 1)"
        )
        conn.execute("PRAGMA user_version = 7")
    with open_session(path) as session:
        assert session.schema_version == 7
        (record,) = session.records(0)
    assert (record.conversation_id, record.turn) == (None, None)
