"""recommendation.json: its keys, in order, and no predicted figure among the measured."""

from __future__ import annotations

import json
from pathlib import Path

from workbench.engine.tune.answer import write_recommendation
from workbench.engine.tune.records import Recommendation, SloTarget, TriedConfig

SLOS = (SloTarget("ttft", 90, 2000), SloTarget("e2el", 99, 9000))
WINNER = TriedConfig(
    "np=2", {"slots": 2}, ("-m", "m.gguf", "-np", "2"),
    {"ttft_p90_s": 0.9, "e2e_p99_s": 3.0, "agg_tok_s": 90.0},
    {"ttft_p90_s": 1.5, "e2e_p99_s": 4.0, "agg_tok_s": 80.0},
    True,
)  # fmt: skip
PREDICTED = TriedConfig(
    "np=4", {"slots": 4}, ("-m", "m.gguf", "-np", "4"), {"ttft_p90_s": 0.5}, None, True,
    "predicted to meet the SLO, not verified within the budget",
)  # fmt: skip
UNKNOWN = TriedConfig("np=8", {"slots": 8}, ("-np", "8"), {}, None, False, "not predicted")


def test_recommendation_json_has_its_documented_keys(tmp_path: Path):
    made = Recommendation(
        SLOS, WINNER, True, 4, 2.5, (PREDICTED, UNKNOWN), (WINNER, PREDICTED, UNKNOWN),
        "llama-server -m m.gguf -np 2", tmp_path / "tune.session.sqlite",
    )  # fmt: skip
    document = json.loads(write_recommendation(made, tmp_path).read_text())
    assert list(document) == [
        "version", "slos", "verified", "reason", "llama_server_args", "command_line",
        "measured", "winner", "users", "rate_rps", "rate_probes", "runners_up", "tried",
        "session", "rate_session", "elapsed_s",
    ]  # fmt: skip
    assert document["slos"][0] == {"slo": "ttft_p90", "limit_ms": 2000, "measured_ms": 1500.0}
    assert document["measured"] == {"ttft_p90": 1500.0, "e2el_p99": 4000.0}
    assert document["llama_server_args"] == ["-m", "m.gguf", "-np", "2"]
    assert document["winner"]["figures"]["ttft_p90_s"] == 1.5
    assert [(c["label"], c["source"]) for c in document["runners_up"]] == [
        ("np=4", "predicted"),
        ("np=8", "none"),
    ]
    assert document["runners_up"][0]["why_lost"].startswith("predicted to meet")


def test_without_a_winner_nothing_is_measured(tmp_path: Path):
    made = Recommendation(
        SLOS, None, False, None, None, (), (PREDICTED,), None, None, reason="the budget ran out"
    )
    document = json.loads(write_recommendation(made, tmp_path).read_text())
    assert document["measured"] == {} and document["llama_server_args"] is None
    assert all(s["measured_ms"] is None for s in document["slos"])
    assert document["reason"] == "the budget ran out" and not document["verified"]
