"""``workbench tune``: one line for what it cannot tune (before any server starts), and what
it writes and exits with for a recommendation, verified or not (the search faked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.cli import tune_commands
from workbench.cli.exit_codes import EXIT_NOT_VERIFIED
from workbench.cli.main import main
from workbench.engine.tune.records import Recommendation, TriedConfig, TuneRequest
from workbench.engine.tune.verdict import verdict_words

TUNE = ["tune", "--slo", "ttft_p90:2000"]


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--slo", "ttft_p95:1"], "--slo 'ttft_p95:1': the percentile is p50, p90, p99, not p95"),
        (["--slo", "foo_p50:1"], "the metric is one of ttft, tpot, itl, e2el, stall, not 'foo'"),
        (["--slo", "ttft_p90:-5"], "the limit is a time above 0 ms, not '-5'"),
        (["--slo", "ttft_p90:abc"], "the limit is a time in ms, not 'abc'"),
        (["--budget", "5s"], "a budget of 5 s cannot verify one candidate: at least ~"),
        (["--space", "slots=0"], "--space slots must be between 1 and 1024"),
        (["--space", "slot=1,2"], "'slot' is not a server setting (did you mean 'slots'?)"),
        (["--space", "ctx=10000000"], "nothing in the space fits: 1 combination, the first"),
        (["--draft-model", "no-such-draft.gguf"], "--draft-model: "),
    ],
)
def test_what_it_cannot_tune_is_one_line(tmp_path, capsys, flags, said):
    code = main([*TUNE, "--users", "2", *flags, "--out", str(tmp_path / "out")])
    assert code == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert said in line and line.startswith("error: ")
    assert not (tmp_path / "out" / "recommendation.json").exists()


@pytest.mark.parametrize("flag", ["--model", "--draft-model"])
def test_a_truncated_model_is_refused_before_any_server_starts(
    tmp_path, capsys, truncated_model, flag
):
    code = main([*TUNE, "--users", "2", flag, str(truncated_model), "--out", str(tmp_path / "o")])
    assert code == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "the data of tensor 'token_embd.weight' runs past the end of the file" in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--users", "2", "--budget", "10x"], "argument --budget: must be a time from 1 s"),
        (["--users", "0"], "argument --users: must be a whole number at least 1"),
    ],
)
def test_bad_flags_are_argparse_lines(capsys, flags, said):
    with pytest.raises(SystemExit) as stopped:
        main([*TUNE, *flags])
    assert stopped.value.code == 2
    assert said in capsys.readouterr().err


WINNER = TriedConfig(
    "np=2", {"slots": 2}, ("-m", "m.gguf", "-np", "2"), {"ttft_p90_s": 0.9, "agg_tok_s": 90.0},
    {"ttft_p90_s": 1.5, "agg_tok_s": 80.0}, True,
)  # fmt: skip
LOSER = TriedConfig(
    "np=1", {"slots": 1}, ("-m", "m.gguf", "-np", "1"), {"ttft_p90_s": 0.9},
    {"ttft_p90_s": 2.6, "agg_tok_s": 40.0}, False,
    "measured TTFT p90 2600 ms > 2000 ms (the model predicted it would meet)",
)  # fmt: skip


MISSED = "no candidate met the SLO: the closest, np=1, measured TTFT p90 2600 ms > 2000 ms"


def fake_tune(monkeypatch, verified: bool) -> list[TuneRequest]:
    asked: list[TuneRequest] = []

    def tune(request, progress, cancel):
        asked.append(request)
        winner = WINNER if verified else None
        return Recommendation(
            request.slos, winner, verified, request.users if verified else None, None,
            (LOSER,), (WINNER, LOSER) if verified else (LOSER,),
            "llama-server -m m.gguf -np 2" if verified else None,
            request.out_dir / "tune.session.sqlite",
            None if verified else MISSED,
        )  # fmt: skip

    monkeypatch.setattr(tune_commands, "tune", tune)
    return asked


def test_a_verified_recommendation_is_written_and_its_command_printed(
    tmp_path, capsys, monkeypatch
):
    asked = fake_tune(monkeypatch, verified=True)
    out = tmp_path / "tuned"
    code = main([*TUNE, "--registered", "400", "--online", "0.02", "--input-tokens", "512",
                 "--max-tokens", "128", "--space", "slots=1,2", "--budget", "10m",
                 "--out", str(out)])  # fmt: skip
    assert code == 0
    (request,) = asked
    assert request.users == 8 and request.budget_s == 600
    assert request.traffic == {"input_tokens": 512, "max_tokens": 128}
    text = capsys.readouterr().out
    assert "peak concurrent users = 400 registered x 0.02 online = 8" in text
    assert "Recommended: np=2 (slots=2).\n" in text
    assert "Verified on the real server at 8 users at once: TTFT p90 1500 ms (<= 2000)." in text
    assert "Tried 2 configurations (2 measured) in 0 s." in text
    assert "\nllama-server -m m.gguf -np 2\n" in text
    assert "(the model predicted it would meet)" in text
    document = json.loads((out / "recommendation.json").read_text())
    assert document["verified"] and document["llama_server_args"] == ["-m", "m.gguf", "-np", "2"]
    assert (out / "pareto.png").stat().st_size > 0


def test_an_unverified_tune_says_why_and_exits_non_zero(tmp_path, capsys, monkeypatch):
    fake_tune(monkeypatch, verified=False)
    code = main([*TUNE, "--users", "4", "--out", str(tmp_path)])
    assert code == EXIT_NOT_VERIFIED
    text = capsys.readouterr().out
    assert f"No recommendation: {MISSED}.\n" in text
    assert not json.loads((tmp_path / "recommendation.json").read_text())["verified"]


@pytest.mark.parametrize("verified", [True, False])
def test_the_verdict_is_the_tune_tabs_words(tmp_path, capsys, monkeypatch, verified):
    """The CLI and the window say one answer the same way: every line of the engine's
    verdict, as the Tune tab shows it, is printed."""
    fake_tune(monkeypatch, verified)
    searched = tune_commands.tune
    answers: list[Recommendation] = []

    def tune(request, progress, cancel):
        answers.append(searched(request, progress, cancel))
        return answers[-1]

    monkeypatch.setattr(tune_commands, "tune", tune)
    main([*TUNE, "--users", "4", "--out", str(tmp_path)])
    text = capsys.readouterr().out
    (answer,) = answers
    assert all(f"{line}\n" in text for line in verdict_words(answer))


def test_a_trace_or_conversations_become_the_traffic(tmp_path, monkeypatch):
    asked = fake_tune(monkeypatch, verified=True)
    trace = tmp_path / "t.jsonl"
    main([*TUNE, "--trace", str(trace), "--out", str(tmp_path / "a")])
    main([*TUNE, "--users", "2", "--conversations-file", str(trace), "--out", str(tmp_path / "b")])
    assert asked[0].traffic == {"arrival": "trace", "trace": str(trace.resolve())}
    assert asked[1].traffic == {
        "kind": "conversations",
        "conversations_file": str(Path(trace).resolve()),
    }


def test_rates_and_throughputs_are_printed_to_three_figures(tmp_path, capsys, monkeypatch):
    from dataclasses import replace

    fast = replace(WINNER, measured={"ttft_p90_s": 1.5, "agg_tok_s": 1234.56})

    def tune(request, progress, cancel):
        return Recommendation(
            request.slos, fast, True, request.users, 3.1475, (), (fast,),
            "llama-server -m m.gguf -np 2", request.out_dir / "tune.session.sqlite",
        )  # fmt: skip

    monkeypatch.setattr(tune_commands, "tune", tune)
    monkeypatch.setenv("COLUMNS", "200")
    assert main([*TUNE, "--users", "4", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "It holds 3.15 requests/s (Poisson) within the SLO." in text
    assert " 1,230 │" in text and "1234" not in text
