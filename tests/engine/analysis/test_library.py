"""Listing sessions: complete, incomplete and unreadable files each get their line."""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import replace

import pytest

from tests.made_sessions import HARDWARE, Config, build_session, request
from workbench.cli.main import main
from workbench.engine.analysis.library import configurations_line, scan
from workbench.engine.base.records import Gpu, StartupFacts
from workbench.engine.store import SCHEMA_VERSION
from workbench.engine.tune.server_measure import Run, zipped_experiment


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


def test_a_tune_s_rate_session_is_listed_by_setting_not_over_precise(tmp_path, capsys):
    """Once "requests=29 rate=3.743, requests=15 rate=1.8715, ...": where one configuration
    ended and the next began could not be told, and the rates had five digits."""
    rates = [(3.743, 29), (1.8715, 15), (2.6467, 21), (2.2256, 18)]
    runs = [
        Run({"slots": 4}, {"arrival": "poisson", "rate": r, "requests": n}, ("workload.rate",))
        for r, n in rates
    ]
    experiment = zipped_experiment("tune-rate", runs)
    assert [c.label for c in experiment.configs()][:2] == [
        "requests=29 rate=3.743",
        "requests=15 rate=1.8715",
    ]
    build_session(
        tmp_path / "rate.session.sqlite",
        experiment.to_toml(),
        [Config([request(i)]) for i in range(len(rates))],
    )
    assert main(["sessions", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "4 configurations: requests 29, 15, 21, 18; rate 3.74, 1.87, 2.65, 2.23" in out


@pytest.mark.parametrize(
    ("labels", "line"),
    [
        (["np=1"], "np=1"),
        (["rate=0.93575"], "rate=0.936"),
        (
            ["np=1 ctx=4096", "np=1 ctx=8192", "np=2 ctx=4096"],
            "3 configurations: np 1, 2; ctx 4096, 8192",
        ),
        (["rate=1234.5678", "rate=0.05"], "2 configurations: rate 1235, 0.05"),
        (
            ["model=Smol-1.5B.gguf", "model=default"],
            "2 configurations: model Smol-1.5B.gguf, default",
        ),
        (["args=--ctx 8", "args=--foo"], "args=--ctx 8; args=--foo"),  # a value with a space
    ],
)
def test_configurations_line(labels, line):
    assert configurations_line(labels) == line
