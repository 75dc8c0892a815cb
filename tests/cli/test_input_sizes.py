"""Inputs too large to act on: a sweep of hundreds of thousands of values, one of tens of
thousands of configurations, arrays nested thousands deep, a value of a megabyte. Each is
refused at once in one short line (never a traceback, never the input echoed), and a sweep
that is merely large runs only when confirmed, after saying how long it takes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.cli.test_bad_input import closed_port, failed, refused
from workbench.cli.bounds import LARGE_SWEEP
from workbench.cli.main import build_parser, main
from workbench.engine.config.experiment import MAX_CONFIGURATIONS

SHORT = 400  # characters: a line a person reads, whatever the input held


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")


def experiment(tmp_path: Path, text: str) -> str:
    path = tmp_path / "e.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def values(n: int, start: int = 1) -> str:
    return "[" + ",".join(str(start + i % 1000) for i in range(n)) + "]"


@pytest.mark.parametrize("command", ["predict", "run"])
def test_a_sweep_of_200000_slots_is_refused_at_once_in_one_line(command, tmp_path, capsys):
    """It kept ``predict`` busy past a minute (25 s here only to fail for want of a
    calibration, with an error of 86 KB)."""
    path = experiment(tmp_path, f"[server]\nslots = {values(200_000)}\n")
    began = time.monotonic()
    said = failed([command, path, *(["--out", str(tmp_path)] if command == "run" else [])], capsys)
    assert time.monotonic() - began < 10
    assert "the sweep makes 200,000 configurations (server.slots 200,000)" in said
    assert f"over the {MAX_CONFIGURATIONS:,}" in said and len(said) < SHORT


def test_a_sweep_of_40000_configurations_is_refused_naming_its_axes(tmp_path, capsys):
    """``run`` accepted it with no estimate, and ``predict``'s error was one 4 MB line."""
    path = experiment(tmp_path, f"[server]\nslots = {values(200)}\nctx = {values(200, 1000)}\n")
    for argv in (["predict", path], ["run", path, "--out", str(tmp_path)]):
        said = failed(argv, capsys)
        assert "40,000 configurations (server.slots 200 x server.ctx 200)" in said
        assert len(said) < SHORT
    assert not list(tmp_path.glob("*.sqlite"))


def test_a_large_sweep_runs_only_when_confirmed_and_says_how_long_first(tmp_path, capsys):
    """More than ``LARGE_SWEEP`` configurations: refused with its estimate and the flag that
    runs it; with the flag, the estimate is said and the run goes on (here to an external
    server that is not there, its own error)."""
    n = LARGE_SWEEP + 1
    argv = ["run", "--base-url", f"http://127.0.0.1:{closed_port()}", "--out", str(tmp_path)]
    argv += ["--requests", ",".join(str(k) for k in range(1, n + 1))]
    said = failed(argv, capsys)
    assert f"this sweep makes {n} configurations" in said
    assert "at least 3 min before any measured request" in said
    assert said.endswith("give --large-sweep to run it")
    assert main([*argv, "--large-sweep"]) != 0
    printed = capsys.readouterr()
    assert f"note: this sweep makes {n} configurations" in printed.out.replace("\n", " ")
    assert "--large-sweep" not in printed.err
    # A server's settings do not sweep an external server: only the workload's count.
    slots = ["--slots", ",".join(str(k) for k in range(1, n + 1)), "--requests", "1"]
    assert main([*argv[:5], *slots]) != 0
    assert "sweep makes" not in capsys.readouterr().err


def test_arrays_nested_5000_deep_are_one_line_not_a_recursion_error(tmp_path, capsys):
    path = experiment(tmp_path, "[server]\nslots = " + "[" * 5000 + "]" * 5000 + "\n")
    for argv in (["run", path, "--out", str(tmp_path)], ["predict", path]):
        said = failed(argv, capsys)
        assert "nested hundreds deep: not an experiment" in said
        assert "RecursionError" not in said and len(said) < SHORT


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[workload]\narrival = "' + "x" * 500_000 + '"\n', "must be one of burst"),
        ('[server]\nslots = "' + "x" * 500_000 + '"\n', "must be a whole number"),
        ("[server]\nslots = [[" + "1," * 100_000 + "1]]\n", "must be a whole number"),
        ('[server]\n"' + "k" * 500_000 + '" = 1\n', "unknown field"),
    ],
)
def test_a_megabyte_value_is_named_never_echoed(text, says, tmp_path, capsys):
    said = failed(["predict", experiment(tmp_path, text)], capsys)
    assert says in said and len(said) < SHORT


def test_an_experiment_file_over_a_mebibyte_is_refused_unread(tmp_path, capsys):
    path = experiment(tmp_path, "# " + "x" * 2**20 + "\n[server]\nslots = 1\n")
    said = failed(["predict", path], capsys)
    assert "is over 1 MiB: not an experiment" in said and len(said) < SHORT


def test_an_error_built_from_thousands_of_configurations_is_bounded(tmp_path, capsys):
    """10,000 configurations without a calibration: one line per configuration made a line
    of 900 KB; the line printed keeps its opening and its end."""
    path = experiment(tmp_path, f"[server]\nslots = {values(100)}\nctx = {values(100, 1000)}\n")
    assert main(["predict", path]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert len(line) < 2_200 and "characters left out" in line
    assert line.startswith("error: np=1 c=1000: no calibration for")


def test_plans_lists_are_bounded_as_their_table_grows_with_both(capsys):
    """``plan --slots`` and ``--ctx`` of 20,000 values each kept ``plan`` busy past 30 s (a
    row for every pair); each list takes at most 100 values, said in one line."""
    many = ",".join(str(1 + k % 1000) for k in range(20_000))
    for flag in ("--slots", "--ctx"):
        said = refused(["plan", "default", flag, many], capsys)
        assert f"argument {flag}: takes at most 100 values, got 20,000" in said
        assert len(said) < SHORT
    hundred = ",".join(str(k) for k in range(1, 101))
    assert build_parser().parse_args(["plan", "default", "--slots", hundred]).slots[-1] == 100


def test_a_sessions_stored_experiment_of_megabytes_is_refused_unparsed(tmp_path, capsys):
    """A session file is someone else's: the experiment it stored is bounded as a file is,
    when ``run --resume`` or ``predict --against`` reads it."""
    import contextlib
    import sqlite3

    from tests.made_sessions import write_session

    path = write_session(tmp_path / "made.session.sqlite")
    huge = "# " + "x" * 2**20 + "\n[server]\nslots = 1\n"
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE session SET experiment_toml = ?", (huge,))
    said = failed(["predict", "--against", str(path)], capsys)
    assert "over 1 MiB of text: not an experiment" in said and len(said) < SHORT
