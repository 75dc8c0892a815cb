"""``workbench tune --trace FILE``: the trace's window is the load. Its flags are read and
bounded as the trace settings are, they need ``--trace``, and ``--users`` is not given with
it; each mistake is one line before anything starts (the search faked)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from tests.cli.test_tune import TUNE, fake_tune
from workbench.cli import tune_commands
from workbench.cli.main import main
from workbench.engine.config.settings import TIME_FORMS
from workbench.engine.tune.records import Recommendation, TraceLoad
from workbench.engine.tune.verdict import verdict_words


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")


def test_a_trace_needs_no_users_and_its_window_becomes_the_traffic(tmp_path, monkeypatch):
    asked = fake_tune(monkeypatch, verified=True)
    trace = tmp_path / "t.jsonl"
    code = main([*TUNE, "--trace", str(trace), "--trace-start", "10m", "--trace-duration",
                 "90s", "--trace-requests", "40", "--time-scale", "2.5",
                 "--out", str(tmp_path / "o")])  # fmt: skip
    assert code == 0
    (request,) = asked
    assert request.users is None
    assert request.traffic == {
        "arrival": "trace",
        "trace": str(trace.resolve()),
        "trace_start_s": 600.0,
        "trace_duration_s": 90.0,
        "max_requests": 40,
        "time_scale": 2.5,
    }


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--users", "2", "--trace-start", "90"], "--trace-start cuts a window of a trace: give "),
        (["--users", "2", "--time-scale", "2"], "--time-scale cuts a window of a trace: give --"),
        (["--trace", "t.jsonl", "--users", "4"], "--users sets generated traffic's load: with --t"),
        (["--trace", "t.jsonl", "--registered", "400"], "--registered sets generated traffic's"),
        (["--trace", "t.jsonl", "--requests", "9"], "--requests sets generated traffic: with --tr"),
        (["--trace", "t.jsonl", "--input-tokens", "9"], "--input-tokens sets generated traffic"),
        (
            [],
            "give the load: --users N or --registered N, or --trace FILE (its window is the load)",
        ),
    ],
)
def test_a_window_without_a_trace_or_a_load_given_twice_is_one_line(
    tmp_path, capsys, monkeypatch, flags, said
):
    asked = fake_tune(monkeypatch, verified=True)
    assert main([*TUNE, *flags, "--out", str(tmp_path / "o")]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {said}")
    assert asked == [] and not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--trace-start", "-5"], "argument --trace-start: must be a time from 0 s to 10000000 s"),
        (["--trace-start", "10x"], "--trace-start: must be a time from 0 s to 10000000 s (90, 90s"),
        (["--trace-duration=-1"], "argument --trace-duration: must be a time from 0 s to 100000"),
        (["--trace-duration", "2778h"], "--trace-duration: must be a time from 0 s to 10000000 s"),
        (["--trace-requests=-1"], "argument --trace-requests: must be a whole number from 0 to "),
        (["--trace-requests", "2.5"], "argument --trace-requests: must be a whole number from 0"),
        (["--time-scale", "0"], "argument --time-scale: must be a number from 0.001 to 1000, got"),
        (["--time-scale", "nan"], "argument --time-scale: must be a number from 0.001 to 1000"),
    ],
)
def test_bad_window_values_are_argparse_lines(capsys, flags, said):
    with pytest.raises(SystemExit) as stopped:
        main([*TUNE, "--trace", "t.jsonl", *flags])
    assert stopped.value.code == 2
    assert said in capsys.readouterr().err


def test_a_time_flags_help_says_how_a_time_is_typed_as_the_parser_reads_it(capsys):
    """Each time flag's help says the forms ``seconds_from_text`` reads, in its words."""
    with pytest.raises(SystemExit):
        main(["tune", "--help"])
    entries = [" ".join(e.split()) for e in re.split(r"\n  (?=-)", capsys.readouterr().out)]
    for flag in ("--trace-start", "--trace-duration", "--budget"):
        (entry,) = [e for e in entries if e.startswith(f"{flag} ")]
        assert TIME_FORMS in entry, entry


def test_a_window_with_no_rows_is_one_line_naming_it(tmp_path, capsys):
    """Read and planned before any server starts (the real search, no server needed)."""
    trace = tmp_path / "t.jsonl"
    rows = [{"timestamp": 1000 * k, "input_length": 10, "output_length": 2} for k in range(3)]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main([*TUNE, "--trace", str(trace), "--trace-start", "5", "--trace-duration", "10",
                 "--out", str(tmp_path / "o")])  # fmt: skip
    assert code == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        "error: tune: t.jsonl: no rows from trace_start_s = 5 s for trace_duration_s = 10 s: "
        "its rows arrive from 0 s to 2 s"
    )


def test_the_answer_says_the_windows_requests_at_once_and_where_they_come_from(
    tmp_path, capsys, monkeypatch
):
    load = TraceLoad("t.jsonl", 40, 600.0, 90.0, 2.0, 44.5, 6, "its arrivals and lengths by "
                     "the scheduler model at np=8, the most slots it predicted", 5)  # fmt: skip
    answers: list[Recommendation] = []
    fake_tune(monkeypatch, verified=True)
    faked = tune_commands.tune

    def tune(request, progress, cancel):
        answers.append(replace(faked(request, progress, cancel), load=load, users=5))
        return answers[-1]

    monkeypatch.setattr(tune_commands, "tune", tune)
    assert main([*TUNE, "--trace", str(Path("t.jsonl")), "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "Verified on the real server on the trace window: TTFT p90 1500 ms (<= 2000).\n" in text
    assert (
        "The trace window: 40 requests of t.jsonl from 600 s to 690 s, sent over 44.5 s at "
        "time scale 2.\n" in text
    )
    assert (
        "5 requests at once at peak in the trace window (measured in the winner's verification "
        "run; 6 estimated beforehand from its arrivals and lengths by the scheduler model at "
        "np=8, the most slots it predicted).\n" in text
    )
    assert all(f"{line}\n" in text for line in verdict_words(answers[0]))
    document = json.loads((tmp_path / "recommendation.json").read_text())
    assert document["users"] == 5
