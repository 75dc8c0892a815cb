"""A tune in words, once (``engine/tune/verdict``): one way to say a time, the progress line
and the answer, which the CLI and the Tune tab both print."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.engine.tune.records import Recommendation, SloTarget, TriedConfig, TuneProgress
from workbench.engine.tune.verdict import clock, progress_words, time_spent, verdict_words


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(-3, "0 s"), (0.4, "0 s"), (45, "45 s"), (59.6, "1 min"), (200, "3 min 20 s"),
     (600, "10 min"), (3725, "62 min 5 s")],
)  # fmt: skip
def test_one_clock(seconds, said):
    assert clock(seconds) == said


def test_the_time_spent_and_left():
    going = TuneProgress("rank", 90.0, 600.0, None, "ranking 12 candidates")
    assert time_spent(going) == "1 min 30 s of a 10 min budget"
    assert progress_words(going) == (
        "Predicting: ranking 12 candidates. 1 min 30 s of a 10 min budget."
    )


WINNER = TriedConfig(
    "np=2", {"slots": 2}, ("-np", "2"), {"ttft_p90_s": 0.9}, {"ttft_p90_s": 1.5}, True
)
SLOS = (SloTarget("ttft", 90, 2000.0),)


def test_a_verified_answer():
    answer = Recommendation(
        SLOS, WINNER, True, 4, 1.2345, (), (WINNER,), "llama-server -np 2",
        Path("t.session.sqlite"), elapsed_s=95.0,
    )  # fmt: skip
    assert verdict_words(answer) == [
        "Recommended: np=2 (slots=2).",
        "Verified on the real server at 4 users at once: TTFT p90 1500 ms (<= 2000).",
        "It holds 1.23 requests/s (Poisson) within the SLO.",
        "Tried 1 configuration (1 measured) in 1 min 35 s.",
        "Verifying runs: t.session.sqlite",
    ]


def test_a_predicted_answer_is_said_to_be_predicted_and_no_answer_says_why():
    predicted = TriedConfig("np=2", {"slots": 2}, ("-np", "2"), {"ttft_p90_s": 0.9}, None, True)
    best = Recommendation(
        SLOS, predicted, False, None, None, (), (predicted,), None, None, "the budget ran out"
    )
    assert verdict_words(best) == [
        "Best found: np=2 (slots=2).",
        "Not verified: its figures are predicted, not measured.",
        "the budget ran out",
        "Tried 1 configuration (0 measured) in 0 s.",
    ]
    none = Recommendation(SLOS, None, False, None, None, (), (), None, None, "cancelled")
    assert verdict_words(none)[0] == "No recommendation: cancelled."
