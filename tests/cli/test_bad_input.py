"""Bad input to every command: one clear line on stderr and a non-zero exit, never a
traceback, and nothing left behind by a run refused before it starts. Argument errors exit 2
with the command's own usage (argparse); errors found later exit 1."""

from __future__ import annotations

import socket
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.made_sessions import write_session
from workbench.cli.main import build_parser, main


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Path:
    return write_session(tmp_path_factory.mktemp("made") / "made.session.sqlite")


def refused(argv: list[str], capsys) -> str:
    """The line argparse ends with for ``argv``, which it must refuse (exit 2) while parsing:
    nothing is run."""
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    """A terminal wide enough for any error: one line is one line, not wrapped."""
    monkeypatch.setenv("COLUMNS", "1000")


def failed(argv: list[str], capsys) -> str:
    """The one line stderr says for ``argv``, which must fail with exit 1."""
    assert main(argv) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    return line


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- numbers: each flag names the value and the range it allows --------------------------------
ABOVE_0 = "must be a number above 0"
DPI = "must be a whole number from 50 to 1200"
CHART = "must be WIDTHxHEIGHT from 200x150 to 8192x8192 pixels"
EACH = "takes comma-separated values, each a whole number from 1 to"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["roofline", "{s}", "--bandwidth-gbs", "-5"], ABOVE_0),
        (["plan", "default", "--memory-gib", "-1"], ABOVE_0),
        (["plan", "default", "--memory-gib", "0"], ABOVE_0),
        (["plan", "default", "--overhead-mib", "-1"], "must be a number at least 0"),
        (["plan", "default", "--need", "-3"], "must be a whole number at least 0"),
        (["plan", "default", "--slots", "0,2"], f"{EACH} 1024 or -1"),
        (["plan", "default", "--ctx", "4096,x"], f"{EACH} 10000000"),
        (["slo", "{s}", "--ttft", "-1"], ABOVE_0),
        (["slo", "{s}", "--ttft-p90", "nan"], ABOVE_0),
        (["slo", "{s}", "--e2e-p90", "inf"], ABOVE_0),
        (["slo", "{s}", "--decode", "0"], ABOVE_0),
        (["slo", "{s}", "--ttft", "1", "--registered", "0"], "must be a whole number at least 1"),
        (
            ["slo", "{s}", "--ttft", "1", "--online", "1.5"],
            "must be a number above 0 and at most 1",
        ),
        (["export", "{s}", "--charts", "{t}", "--dpi", "0"], DPI),
        (["export", "{s}", "--charts", "{t}", "--dpi", "-5"], DPI),
        (["export", "{s}", "--charts", "{t}", "--size", "10x10"], CHART),
        (["export", "{s}", "--charts", "{t}", "--size", "100000x100000"], CHART),
        (["compare", "{s}", "--out", "{t}", "--dpi", "1e9"], DPI),
        (["gui", "--size", "10x10"], "must be WIDTHxHEIGHT from 960x540 to 8192x8192 pixels"),
        (["gui", "--font-size", "0"], "must be a whole number from 6 to 72"),
        (["gui", "--screenshot-at", "-2"], "must be a number at least 0"),
    ],
)
def test_a_number_out_of_range_is_refused_naming_flag_value_and_range(
    args, said, session, tmp_path, capsys
):
    argv = [a.format(s=session, t=tmp_path / "out") for a in args]
    flag, value = args[-2:]
    line = refused(argv, capsys)
    assert line == f"workbench {args[0]}: error: argument {flag}: {said}, got {value!r}"
    assert not (tmp_path / "out").exists()


def test_plan_takes_default_for_the_default_model(capsys):
    assert main(["plan", "default", "--memory-gib", "8", "--ctx", "4096", "--slots", "1"]) == 0
    assert "(llama, Q4_1): 30 layers" in capsys.readouterr().out


# -- base URLs -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "port"),
    [
        ("http://localhost:99999", "99999"),
        ("http://127.0.0.1:abc", "abc"),
        ("http://127.0.0.1:0/v1", "0"),
        ("http://user:secret@127.0.0.1:abc", "abc"),
    ],
)
def test_a_base_url_with_a_bad_port_is_one_line(url, port, tmp_path, capsys):
    said = failed(["run", "--base-url", url, "--slots", "1", "--out", str(tmp_path / "o")], capsys)
    assert f"the port must be a whole number from 1 to 65535, got '{port}'" in said
    assert "secret" not in said
    assert not (tmp_path / "o").exists()


def test_a_base_url_without_a_host_is_one_line(tmp_path, capsys):
    said = failed(
        ["run", "--base-url", "http:///v1", "--slots", "1", "--out", str(tmp_path)], capsys
    )
    assert "base URL 'http:///v1' names no host" in said


def test_a_long_error_is_one_line_at_any_width(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("COLUMNS")  # a pipe: the console's width is 80 columns
    url = "http://localhost:99999/" + "a-long-path/" * 8
    said = failed(["run", "--base-url", url, "--slots", "1", "--out", str(tmp_path)], capsys)
    assert len(said) > 80 and said.endswith("got '99999'")


# -- stored values -------------------------------------------------------------------------------
def test_a_session_whose_clock_origin_is_text_is_refused_on_reading(session, tmp_path, capsys):
    tampered = tmp_path / "tampered.session.sqlite"
    tampered.write_bytes(session.read_bytes())
    with sqlite3.connect(tampered) as conn:
        conn.execute("UPDATE session SET clock_origin_ns = 'soon'")
    conn.close()
    said = failed(["show", str(tampered), "--requests"], capsys)
    assert f"{tampered} is not a readable workbench session" in said
    assert "session: clock_origin_ns must be a whole number, got 'soon'" in said


# -- paths: said for what they are ---------------------------------------------------------------
def test_sessions_of_a_folder_that_is_not_there_fails(tmp_path, capsys):
    missing = tmp_path / "nope"
    line = refused(["sessions", str(missing)], capsys)
    assert f"argument folders: {missing} does not exist" in line


def test_show_a_folder_says_it_is_one_and_how_to_list_it(session, tmp_path, capsys):
    line = refused(["show", str(session.parent)], capsys)
    assert f"{session.parent} is a folder, not a session file" in line
    assert f"`workbench sessions {session.parent}` lists the sessions" in line
    line = refused(["verdicts", str(tmp_path)], capsys)
    assert f"{tmp_path} is a folder, not a session file" in line


def test_run_a_folder_says_the_experiment_is_a_toml_file(tmp_path, capsys):
    (tmp_path / "a.toml").write_text("[server]\n")
    line = refused(["run", str(tmp_path)], capsys)
    assert f"{tmp_path} is a folder: the experiment must be a TOML file such as" in line


def test_an_output_folder_that_is_a_file_is_said_to_be_one(session, tmp_path, capsys):
    existing = tmp_path / "existing.csv"
    existing.write_text("x\n")
    line = refused(["run", "--slots", "1", "--out", str(existing)], capsys)
    assert f"argument --out: {existing} is a file, not a folder" in line
    line = refused(["export", str(session), "--charts", str(existing)], capsys)
    assert f"argument --charts: {existing} is a file, not a folder" in line
    line = refused(["import", str(existing), "--out", str(existing / "under")], capsys)
    assert f"argument --out: {existing / 'under'} cannot be a folder: {existing} is a file" in line


@pytest.mark.parametrize(
    "refusal",
    [
        ["--base-url", "http://127.0.0.1:{port}"],  # nothing listens there
        ["--server-bin", sys.executable, "--model", "{missing}"],
    ],
)
def test_a_run_refused_before_it_starts_leaves_no_output_folder(refusal, tmp_path, capsys):
    out = tmp_path / "new" / "results"
    args = [a.format(port=closed_port(), missing=tmp_path / "none.gguf") for a in refusal]
    failed(["run", "--slots", "1", "--requests", "1", "--out", str(out), *args], capsys)
    assert not (tmp_path / "new").exists()


# -- wording -------------------------------------------------------------------------------------
def test_every_positional_argument_has_help():
    parser = build_parser()
    (commands,) = (a for a in parser._actions if a.choices and a.dest == "command")
    missing = [
        f"{name} {action.dest}"
        for name, command in commands.choices.items()
        for action in command._actions
        if not action.option_strings and not action.help
    ]
    assert missing == []


def test_an_unknown_flag_is_reported_with_the_commands_usage(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["run", "--nope"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith("usage: workbench run ")
    assert err.strip().splitlines()[-1] == "workbench run: error: unrecognized arguments: --nope"
