"""``workbench import FILE...`` and ``workbench export SESSION --format vllm-json``: other
tools' results in, ours out in vLLM's shape, each file its own read-only session."""

from __future__ import annotations

import json
from pathlib import Path

from tests.made_sessions import write_sweep
from workbench.cli.main import main

DATA = Path(__file__).parents[1] / "data" / "imports"
(VLLM_FILE,) = (DATA / "vllm").glob("*.json")


def said(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())  # the console wraps long lines


def test_import_writes_a_session_per_file_and_goes_on_past_a_bad_one(tmp_path, capsys):
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": 1}')
    out = tmp_path / "sessions"
    assert main(["import", str(bad), str(VLLM_FILE), str(VLLM_FILE), "--out", str(out)]) == 1
    printed = capsys.readouterr()
    text = " ".join(printed.out.split())
    assert "error: notes.json: not a result file this version reads" in printed.err
    assert "error:" not in text  # a script reading the results gets the results
    assert "imported from vllm bench serve (version not recorded in the file)" in text
    stem = VLLM_FILE.stem
    assert sorted(p.name for p in out.iterdir()) == [
        f"{stem}-2.session.sqlite",  # the second import of one file never overwrites the first
        f"{stem}.session.sqlite",
    ]
    session = out / f"{stem}.session.sqlite"
    assert main(["show", str(session)]) == 0
    text = said(capsys)
    assert "machine: not recorded" in text
    assert "reported them" in text and "median_ttft_ms │ 100 │" in text
    assert main(["run", "--resume", str(session), "--quiet"]) == 1
    assert "it is read-only" in " ".join(capsys.readouterr().err.split())


def test_export_in_vllms_shape_one_file_per_configuration(tmp_path, capsys):
    session = write_sweep(tmp_path / "sweep.session.sqlite")
    out = tmp_path / "vllm"
    assert main(["export", str(session), "--format", "vllm-json", "--out", str(out)]) == 0
    assert "wrote 2 vllm bench serve results" in said(capsys)
    document = json.loads((out / "sweep-1-np=2.json").read_text())
    assert document["completed"] == 3 and document["backend"] == "openai-chat"
    assert document["median_ttft_ms"] == 100.0  # TTFTs 0.1, 0.1 and 1.575 s
    assert main(["export", str(session), "--format", "vllm-json,gif"]) == 1


def test_a_report_comparing_an_import_names_its_source(tmp_path, capsys):
    assert main(["import", str(VLLM_FILE), "--out", str(tmp_path)]) == 0
    (imported,) = tmp_path.glob("*.session.sqlite")
    sweep = write_sweep(tmp_path / "sweep.session.sqlite")
    out = tmp_path / "report"
    assert main(["compare", str(imported), str(sweep), "--out", str(out), "--size", "400x300"]) == 0
    report = (out / "report.md").read_text()
    assert (
        f"imported from vllm bench serve (version not recorded in the file), {VLLM_FILE.name}"
        in (report)
    )
