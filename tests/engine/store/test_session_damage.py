"""Valid SQLite with content no workbench wrote: one clear line, never a traceback, and the
rest of the library still listed."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3

import pytest

from tests.made_sessions import write_session
from workbench.cli.main import main
from workbench.engine.analysis.library import scan
from workbench.engine.base.errors import SessionError
from workbench.engine.base.states import ConfigStatus
from workbench.engine.run.replay import load_session
from workbench.engine.store import open_session

DAMAGE = {
    "bad-json-settings": "UPDATE configs SET server_json = '{bad'",
    "text-as-time": "UPDATE requests SET t_submit_ns = 'soon'",
    "missing-table": "DROP TABLE requests",
    "hardware-a-list": "UPDATE session SET hardware_json = '[1, 2]'",
    "usage-a-list": "UPDATE requests SET usage_json = '[]'",
    "chunk-a-blob": "UPDATE chunks SET text = X'00ff'",
    "command-an-object": "UPDATE configs SET command_json = '{\"a\": 1}'",
    "name-a-blob": "UPDATE session SET name = X'41'",
    "usage-nested-deep": f"UPDATE requests SET usage_json = '{'[' * 100_000}{']' * 100_000}'",
    "run-status-unknown": "UPDATE session SET status = 'paused'",
    "config-status-unknown": "UPDATE configs SET status = 'paused'",
}


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """Made once: the tests only read it (``show``, ``sessions`` and ``scan`` open sessions
    immutable and write nothing beside them)."""
    folder = tmp_path_factory.mktemp("library")
    good = write_session(folder / "good.session.sqlite")
    for name, statement in DAMAGE.items():
        copy = folder / f"{name}.session.sqlite"
        shutil.copy(good, copy)
        with contextlib.closing(sqlite3.connect(copy)) as conn, conn:
            conn.execute(statement)
    return folder


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_show_says_what_is_wrong_in_one_line(library, name, capsys):
    assert main(["show", str(library / f"{name}.session.sqlite")]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    err = "".join(captured.err.split())  # one message, however the console wrapped it
    assert err.startswith("error:") and err.count("error:") == 1
    assert f"{name}.session.sqlite" in err


def test_one_damaged_file_leaves_the_rest_of_the_library_listed(library, capsys):
    infos = scan([library])
    assert len(infos) == len(DAMAGE) + 1
    unreadable = {i.path.name for i in infos if i.error}
    assert "good.session.sqlite" not in unreadable
    # The listing reads headers and configurations; damage there gets its own line (damage
    # in the requests shows when they are read, as above).
    assert unreadable == {
        f"{name}.session.sqlite"
        for name in (
            "bad-json-settings",
            "hardware-a-list",
            "command-an-object",
            "name-a-blob",
            "run-status-unknown",
            "config-status-unknown",
        )
    }
    assert main(["sessions", str(library)]) == 0
    out = capsys.readouterr().out
    assert "made" in out and "unreadable" in out and "Traceback" not in out


def test_a_session_deleted_while_it_is_opened_does_not_come_back(tmp_path, monkeypatch):
    """A library scan found a file that Delete removed before the scan opened it: opening
    it created an empty file of that name (SQLite creates what it cannot find), which kept
    a deleted session listed (seen as a flaky window test)."""
    from pathlib import Path

    from workbench.engine.base.errors import SessionError
    from workbench.engine.store import open_session

    gone = tmp_path / "gone.session.sqlite"
    real = Path.is_file  # it was there when listed (and had no -wal beside it)
    monkeypatch.setattr(Path, "is_file", lambda self: self == gone or real(self))
    with pytest.raises(SessionError):
        open_session(gone)
    monkeypatch.undo()
    assert not gone.exists()


def test_a_state_no_view_knows_is_damage_and_a_notice_level_reads_as_unknown(tmp_path):
    """A state is read as one of its words (``base/states.py``): a view is never handed one it
    has no name or colour for. A notice's level only styles it: an unknown one is dropped."""
    path = write_session(tmp_path / "s.session.sqlite")
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("INSERT INTO notices VALUES (1, NULL, 'shout', 'kept')")
    with open_session(path) as session:
        (notice,) = [n for n in session.notices() if n.text == "kept"]
        assert notice.level is None
        assert session.configs[0].status is ConfigStatus.OK
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("INSERT INTO server_states VALUES (0, 1, 'paused', NULL)")
    with pytest.raises(SessionError, match=r"state must be 'idle', 'starting', .*got 'paused'"):
        load_session(path)


def test_a_number_too_large_for_a_float_reads_as_not_a_count(tmp_path, capsys):
    """JSON holds integers of any size; a session's counts and a server's numbers are 64-bit
    at most. A larger one is an infinity: no count (the next source counts instead), and a
    server's own sample keeps it as the infinity it stands for, without an OverflowError
    in the first float made of it."""
    path = write_session(tmp_path / "s.session.sqlite")
    huge = "1" + "0" * 400
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(f"UPDATE requests SET usage_json = '{{\"completion_tokens\": {huge}}}'")
        conn.execute(
            "INSERT INTO metrics_samples VALUES "
            f"(0, 5, '{{\"llamacpp:requests_processing\": {huge}}}')"
        )
    with open_session(path) as session:
        record = session.records(0)[0]
        assert record.output_tokens == (11, "timings")  # usage's count is no count
        (sample,) = session.samples("metrics_samples", 0)
        assert sample.values == {"llamacpp:requests_processing": float("inf")}
    assert main(["show", str(path)]) == 0
    load_session(path)


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("text-as-time", "requests: t_submit_ns must be a whole number, got 'soon'"),
        ("command-an-object", "configs: command must be a list, got {'a': 1}"),
        ("chunk-a-blob", "chunks: text must be text, got b'\\x00\\xff'"),
        ("usage-nested-deep", "requests: usage nested too deeply to read"),
    ],
)
def test_the_line_names_the_table_the_field_and_the_value(library, name, line):
    """Each value is validated against its field (pydantic, ``store/checks``): the one line
    says which table and field, what it must be, and the value cut short."""
    with pytest.raises(SessionError) as raised:
        load_session(library / f"{name}.session.sqlite")
    assert f"(ValueError: {line}" in str(raised.value)
