"""Listing sessions: complete, incomplete and unreadable files each get their line."""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import replace

import pytest

from tests.made_sessions import HARDWARE, Config, build_session, request
from workbench.cli.main import main
from workbench.engine.analysis.library import scan
from workbench.engine.base.records import Gpu, StartupFacts
from workbench.engine.store import SCHEMA_VERSION


def test_sessions_are_listed_with_what_ran_where(sweep_session, tmp_path, capsys):
    folder = tmp_path / "lib"
    (folder / "other-machine").mkdir(parents=True)
    shutil.copy(sweep_session, folder / "a.session.sqlite")
    gpu = replace(HARDWARE, apple_chip="Apple M4", gpus=(Gpu(name="H200", memory_bytes=1),))
    build_session(
        folder / "other-machine" / "g.session.sqlite",
        '[server]\nmodel = "/models/qwen.gguf"\n[workload]\nrequests = 1\n',
        [Config([request(0)], StartupFacts(backend="Metal"))],
        hardware=gpu,
    )
    crashed = folder / "other-machine" / "b.session.sqlite"
    shutil.copy(sweep_session, crashed)
    with sqlite3.connect(crashed) as conn:  # a run killed before its end
        conn.execute("UPDATE session SET status='running', created_at='2000-01-01T00:00:00'")
    future = folder / "c.session.sqlite"
    with sqlite3.connect(future) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    (folder / "notes.txt").write_text("not a session")

    infos = scan([folder, tmp_path / "missing"])
    assert len(infos) == 4
    by_name = {i.path.name: i for i in infos}
    good = by_name["a.session.sqlite"]
    assert (good.name, good.status, good.mode, good.configs) == (
        "sweep",
        "complete",
        "managed",
        ["np=1", "np=2"],
    )
    assert (good.hardware, good.backend, good.model) == (
        "Made CPU 8-Core",
        "CPU",
        "SmolLM2-135M-Instruct.Q4_1 (default)",
    )
    other = by_name["g.session.sqlite"]
    assert (other.hardware, other.backend, other.model) == ("Apple M4 + H200", "Metal", "qwen.gguf")
    assert by_name["b.session.sqlite"].status == "incomplete"
    assert "newer workbench" in by_name["c.session.sqlite"].error
    # Newest first: the crashed run is from 2000, the unreadable file has no date.
    assert [i.path.name for i in infos[2:]] == ["b.session.sqlite", "c.session.sqlite"]

    assert main(["sessions", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "sweep" in out and "incomplete" in out and "unreadable" in out


def test_the_data_folder_follows_the_platform(tmp_path, monkeypatch):
    from workbench.engine.analysis.library import data_folder

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert data_folder() == tmp_path / "concurrency-workbench" / "sessions"


def test_memory_check_of_a_session(sweep_session, capsys):
    from workbench.engine.analysis.export import memory_checks
    from workbench.engine.store import open_session

    with open_session(sweep_session) as session:
        checks = memory_checks(session)
    # The server's buffers: weights 92.1 MiB + 45 MiB KV + 62.9 MiB compute; RSS peaks
    # at 250 and 260 MiB.
    assert [(c.label, c.predicted_mib, c.peak_rss_mib) for c in checks] == [
        ("np=1", pytest.approx(200.0), 250.0),
        ("np=2", pytest.approx(200.0), 260.0),
    ]
    assert [c.error for c in checks] == pytest.approx([50 / 250, 60 / 260])
    assert main(["show", str(sweep_session)]) == 0
    out = capsys.readouterr().out
    assert "measured RSS" in out
    assert "│ np=1   │                      200 │          250 │         20% │" in out
