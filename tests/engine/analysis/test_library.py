"""Listing sessions: complete, incomplete and unreadable files each get their line."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from workbench.cli.main import main
from workbench.engine.analysis.library import scan
from workbench.engine.store.session import SCHEMA_VERSION

pytestmark = pytest.mark.server


def test_sessions_are_listed_with_what_ran_where(recorded_session, tmp_path, capsys):
    folder = tmp_path / "lib"
    (folder / "other-machine").mkdir(parents=True)
    shutil.copy(recorded_session, folder / "a.session.sqlite")
    crashed = folder / "other-machine" / "b.session.sqlite"
    shutil.copy(recorded_session, crashed)
    with sqlite3.connect(crashed) as conn:
        conn.execute("UPDATE session SET status='running', created_at='2000-01-01T00:00:00'")
    future = folder / "c.session.sqlite"
    with sqlite3.connect(future) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    (folder / "notes.txt").write_text("not a session")

    infos = scan([folder, tmp_path / "missing"])
    assert len(infos) == 3
    by_name = {i.path.name: i for i in infos}
    good = by_name["a.session.sqlite"]
    assert (good.name, good.status, good.mode, good.configs) == (
        "recorded",
        "complete",
        "managed",
        ["np=1", "np=2"],
    )
    assert good.backend == "CPU" and "SmolLM2-135M" in good.model and good.hardware
    assert by_name["b.session.sqlite"].status == "incomplete"
    assert "newer workbench" in by_name["c.session.sqlite"].error

    assert main(["sessions", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "recorded" in out and "incomplete" in out and "unreadable" in out


def test_the_data_folder_follows_the_platform(tmp_path, monkeypatch):
    from workbench.engine.analysis.library import data_folder

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert data_folder() == tmp_path / "concurrency-workbench" / "sessions"


def test_memory_check_of_a_recorded_session(recorded_session, capsys):
    from workbench.engine.analysis.export import memory_checks
    from workbench.engine.store.session import open_session

    with open_session(recorded_session) as session:
        checks = memory_checks(session)
    assert [c.label for c in checks] == ["np=1", "np=2"]
    for check in checks:
        assert 40 < check.predicted_mib < 400  # weights 92 MiB + 45 MiB KV + compute
        assert check.peak_rss_mib and -0.2 < check.error < 0.6
    assert main(["show", str(recorded_session)]) == 0
    assert "measured RSS" in capsys.readouterr().out
