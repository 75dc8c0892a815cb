"""The commands lay their output out at the width they are read at: the terminal's, or
``COLUMNS`` when piped, else ``DEFAULT_WIDTH``."""

from __future__ import annotations

import os

import pytest

from tests.made_sessions import write_sweep
from workbench.cli.main import main
from workbench.cli.tables import DEFAULT_WIDTH


def no_terminal(fd: int) -> os.terminal_size:
    raise OSError("not a terminal")


def widest_line(text: str) -> int:
    return max(len(line) for line in text.splitlines())


@pytest.mark.parametrize("columns", [80, 100, 200])
def test_columns_sets_the_width_of_a_pipe(columns, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(os, "get_terminal_size", no_terminal)
    monkeypatch.setenv("COLUMNS", str(columns))
    session = write_sweep(tmp_path / "sweep.session.sqlite")
    assert main(["show", str(session), "--wide"]) == 0
    text = capsys.readouterr().out
    assert widest_line(text) <= columns
    assert columns == 80 or widest_line(text) > 80  # a wide table uses the room it has


def test_without_a_terminal_or_columns_the_default_width(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(os, "get_terminal_size", no_terminal)
    monkeypatch.delenv("COLUMNS", raising=False)
    session = write_sweep(tmp_path / "sweep.session.sqlite")
    assert main(["show", str(session), "--wide"]) == 0
    assert 80 < widest_line(capsys.readouterr().out) <= DEFAULT_WIDTH


def test_a_terminal_piped_from_sets_the_width(tmp_path, capsys, monkeypatch):
    """``workbench show S | less``: stdout is a pipe, the terminal is stdin's."""
    monkeypatch.delenv("COLUMNS", raising=False)
    sizes = {0: os.terminal_size((90, 40))}

    def stdin_only(fd: int) -> os.terminal_size:
        if fd not in sizes:
            raise OSError("not a terminal")
        return sizes[fd]

    monkeypatch.setattr(os, "get_terminal_size", stdin_only)
    session = write_sweep(tmp_path / "sweep.session.sqlite")
    assert main(["show", str(session), "--wide"]) == 0
    assert 80 < widest_line(capsys.readouterr().out) <= 90
