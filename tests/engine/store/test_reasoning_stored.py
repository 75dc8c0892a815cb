"""A request's reasoning is kept apart from its answer in the session file (schema 7): each
chunk's flag and the first answer's time read back as written, replay publishes the chunks
with their flag, and a file of schema 6, which joined the two, reads with no reasoning and
no first answer time."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from tests.engine.store.known_run import load_dump
from tests.made_sessions import NS, Config, build_session, request
from workbench.engine.base.errors import SessionError
from workbench.engine.events import TokenChunkArrived
from workbench.engine.figures.per_request import request_metrics
from workbench.engine.run.replay import session_events
from workbench.engine.store import open_session

HAND_WRITTEN_V6 = Path(__file__).with_name("schema_v6.sql")
TOML = '[server]\nslots = 1\n[workload]\nrequests = 2\nmax_tokens = 12\nendpoint = "chat"\n'


def reasoned_session(folder: Path) -> Path:
    """Two requests: the first reasoned for 4 of its 12 chunks (0.1 s apart), the second
    answered at once."""
    return build_session(
        folder / "reasoned.session.sqlite",
        TOML,
        [Config(requests=[request(0, reasoning=4), request(1, submit_s=2.0, reasoning=0)])],
    )


def test_the_reasoning_flag_and_the_first_answer_read_back(tmp_path):
    with open_session(reasoned_session(tmp_path)) as session:
        reasoned, answered = session.records(0)
    assert [c.reasoning for c in reasoned.chunks] == [True] * 4 + [False] * 8
    assert reasoned.t_first_answer_ns == reasoned.chunks[4].t_ns
    assert reasoned.reasoning_tokens == (4, "chunks")
    m = request_metrics(reasoned)
    assert m is not None and m.ttft_s == pytest.approx(0.1)
    assert m.ttfo_s == pytest.approx(0.1 + 4 * 0.1)
    assert not any(c.reasoning for c in answered.chunks)
    assert answered.reasoning_tokens == (0, "chunks")
    m = request_metrics(answered)
    assert m is not None and m.ttfo_s == m.ttft_s  # no reasoning: the first token is answer


def test_replay_publishes_each_chunk_with_its_flag(tmp_path):
    with open_session(reasoned_session(tmp_path)) as session:
        events = [e for _, e in session_events(session) if isinstance(e, TokenChunkArrived)]
    first = [e.reasoning for e in events if e.index == 0]
    assert first == [True] * 4 + [False] * 8
    assert not any(e.reasoning for e in events if e.index == 1)


def version_6_file(folder: Path) -> Path:
    """A file of the hand-written schema 6 holding one request and its three chunks, as a
    version-6 workbench wrote them: reasoning and answer joined."""
    path = load_dump(HAND_WRITTEN_V6.read_text(), folder / "v6.session.sqlite")
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "INSERT INTO session VALUES (1, 'old', 'v6', NULL, ?, 'managed', NULL, '{}', "
            "'then', 'later', 'complete', NULL, 0, 1.5)",
            (TOML,),
        )
        conn.execute(
            "INSERT INTO configs (idx, label, server_json, workload_json, status) "
            "VALUES (0, 'np=1', '{}', '{}', 'ok')"
        )
        conn.execute(
            "INSERT INTO requests (config_idx, idx, repeat, warmup, prompt, t_submit_ns, "
            "t_first_token_ns, t_last_token_ns, t_done_ns, ok, usage_json) "
            "VALUES (0, 0, 0, 0, 'p', 0, ?, ?, ?, 1, '{\"completion_tokens\": 3}')",
            (NS // 10, 3 * NS // 10, 3 * NS // 10),
        )
        conn.executemany(
            "INSERT INTO chunks VALUES (0, 0, ?, ?, ?)",
            [(k, (k + 1) * NS // 10, f"t{k} ") for k in range(3)],
        )
        conn.execute("PRAGMA user_version = 6")
    return path


def test_a_version_6_file_reads_with_no_reasoning_and_no_first_answer(tmp_path):
    with open_session(version_6_file(tmp_path)) as session:
        assert session.schema_version == 6
        (record,) = session.records(0)
    assert [c.reasoning for c in record.chunks] == [False] * 3
    assert record.t_first_answer_ns is None
    # Its first token may have been reasoning: neither TTFO nor a reasoning count is known.
    assert record.reasoning_tokens == (None, "none")
    m = request_metrics(record)
    assert m is not None and m.ttft_s == pytest.approx(0.1)
    assert (m.ttfo_s, m.reasoning_tokens, m.reasoning_token_source) == (None, None, "none")


def test_a_damaged_reasoning_flag_is_damage(tmp_path):
    path = reasoned_session(tmp_path)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE chunks SET reasoning = 'yes' WHERE seq = 2")
    with (
        open_session(path) as session,
        pytest.raises(SessionError, match="chunks: reasoning must be true or false, got 'yes'"),
    ):
        session.records(0)


@pytest.mark.parametrize("shift_s", [-0.05, 5.0])
def test_a_first_answer_outside_the_tokens_times_gives_no_ttfo(tmp_path, shift_s):
    """A file's first answer time before the first token or after the last is damaged: the
    request keeps its other figures, and no TTFO."""
    path = reasoned_session(tmp_path)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "UPDATE requests SET t_first_answer_ns = t_first_token_ns + ? WHERE idx = 0",
            (round(shift_s * NS),),
        )
    with open_session(path) as session:
        reasoned, _ = session.records(0)
    m = request_metrics(reasoned)
    assert m is not None and m.ttft_s == pytest.approx(0.1) and m.ttfo_s is None
