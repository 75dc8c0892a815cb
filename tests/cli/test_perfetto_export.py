"""``workbench export SESSION [SESSION ...] --format perfetto [--out DIR]``: one trace of the
sessions, each a process, checked against the Trace Event Format's rules."""

from __future__ import annotations

import json

import pytest

from tests.engine.analysis.test_perfetto import problems
from tests.made_sessions import write_sweep
from workbench.cli.main import main


def test_export_writes_one_trace_of_one_or_several_sessions(tmp_path, capsys):
    first = write_sweep(tmp_path / "sweep.session.sqlite")
    second = write_sweep(tmp_path / "again.session.sqlite")
    out = tmp_path / "traces"
    assert main(["export", str(first), "--format", "perfetto", "--out", str(out)]) == 0
    assert f"wrote {out / 'sweep.perfetto.json'}" in capsys.readouterr().out.replace("\n", "")
    doc = json.loads((out / "sweep.perfetto.json").read_text(encoding="utf-8"))
    assert problems(doc) == []
    assert main(["export", str(first), str(second), "--format", "perfetto", "--out", str(out)]) == 0
    doc = json.loads((out / "sweep+1.perfetto.json").read_text(encoding="utf-8"))
    assert problems(doc) == []
    assert {e["pid"] for e in doc["traceEvents"] if e["name"] == "process_name"} == {1, 2}


def test_a_trace_goes_with_the_other_files_of_one_session(tmp_path, capsys):
    session = write_sweep(tmp_path / "sweep.session.sqlite")
    out = tmp_path / "out"
    args = ["export", str(session), "--format", "perfetto,vllm-json", "--out", str(out)]
    assert main([*args, "--csv", str(tmp_path / "c.csv")]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "sweep-0-np=1.json",
        "sweep-1-np=2.json",
        "sweep.perfetto.json",
    ]
    assert (tmp_path / "c.csv").is_file()


def test_several_sessions_only_make_a_trace(tmp_path, capsys):
    session = write_sweep(tmp_path / "sweep.session.sqlite")
    both = [str(session), str(session)]
    assert main(["export", *both, "--csv", str(tmp_path / "c.csv")]) == 1
    printed = capsys.readouterr()
    assert printed.err.count("\n") == 1 and "only with --format perfetto" in printed.err
    assert "Traceback" not in printed.err and not (tmp_path / "c.csv").exists()
    assert main(["export", *both, "--format", "perfetto,vllm-json"]) == 1
    assert main(["export", str(session), "--format", "perfetto,gif"]) == 1
    assert "--format takes png, svg, pdf, vllm-json and/or perfetto" in capsys.readouterr().err


def test_sessions_days_apart_are_aligned_at_their_starts_when_asked(tmp_path, capsys):
    """Two sessions recorded 94 hours apart lie 94 hours apart by the wall clock (the
    default); ``--align start`` puts each one's start at 0, and the trace says so."""
    import contextlib
    import sqlite3

    first = write_sweep(tmp_path / "sweep.session.sqlite")
    later = write_sweep(tmp_path / "later.session.sqlite")
    with contextlib.closing(sqlite3.connect(later)) as conn, conn:
        conn.execute("UPDATE session SET wall_origin = wall_origin + ?", (94 * 3600,))

    def starts(*flags: str) -> tuple[dict[int, int], dict]:
        out = tmp_path / "-".join(("t", *flags))
        args = ["export", str(first), str(later), "--format", "perfetto", "--out", str(out)]
        assert main([*args, *flags]) == 0
        doc = json.loads((out / "sweep+1.perfetto.json").read_text(encoding="utf-8"))
        assert problems(doc) == []
        begun = {e["pid"]: e["ts"] for e in doc["traceEvents"] if e["name"] == "start np=1"}
        return begun, doc["otherData"]

    by_wall, said = starts()
    assert by_wall[2] - by_wall[1] == pytest.approx(94 * 3600 * 1e6, abs=1e6)
    assert said["align"] == "wall"
    aligned, said = starts("--align", "start")
    assert aligned[1] == aligned[2] == by_wall[1]
    assert said["align"] == "start" and [p["starts_at_us"] for p in said["sessions"]] == [0, 0]
    capsys.readouterr()
    assert main(["export", str(first), "--csv", str(tmp_path / "c.csv"), "--align", "start"]) == 1
    assert "--align places the sessions of --format perfetto" in capsys.readouterr().err
