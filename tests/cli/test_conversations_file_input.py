"""A conversations file that is not what it claims: `workbench run` says so in one line
naming the file, the line and the field, exits 1, and leaves nothing behind (the file is
read before the output folder is made or a server starts)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workbench.cli.main import main


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    """A terminal wide enough for any error: one line is one line, not wrapped."""
    monkeypatch.setenv("COLUMNS", "1000")


def run_with(tmp_path: Path, name: str, capsys) -> str:
    experiment = tmp_path / "exp.toml"
    experiment.write_text(f'[workload]\nkind = "conversations"\nconversations_file = "{name}"\n')
    out = tmp_path / "out"
    assert main(["run", str(experiment), "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert not out.exists()
    return line


def test_a_bad_line_is_named_with_its_field(tmp_path, capsys):
    (tmp_path / "chats.jsonl").write_text(
        '{"messages": [{"role": "user", "content": "hi"}]}\n'
        '{"messages": [{"role": "user", "content": 7}]}\n'
    )
    line = run_with(tmp_path, "chats.jsonl", capsys)
    assert line.endswith(
        "[workload] conversations_file: chats.jsonl:2: messages[0].content must be text, got 7"
    )


def test_a_missing_file_and_a_fifo_are_refused(tmp_path, capsys):
    assert "conversations_file: cannot read" in run_with(tmp_path, "none.jsonl", capsys)
    os.mkfifo(tmp_path / "pipe.jsonl")
    assert run_with(tmp_path, "pipe.jsonl", capsys).endswith("pipe.jsonl: not a file")
