"""A draft model's figures: its counters read from llama-server's ``/metrics`` text, each
repeat's drafts the difference of the cumulative counters around it, and a configuration's
the repeats' sums and mean share, stored as the counters already are and shown only where a
configuration drafted."""

from __future__ import annotations

import contextlib
import csv
import json
import sqlite3
from pathlib import Path

import pytest

from tests.made_sessions import Config, build_session, request, startup_facts
from workbench.cli.main import main
from workbench.engine.analysis.export import write_concurrency_csv
from workbench.engine.base.server_kinds import parse_metrics
from workbench.engine.figures.metrics import figure
from workbench.engine.figures.per_run import RunObservations, summarize_run
from workbench.engine.figures.speculative import SpecFigures, spec_figures
from workbench.engine.store import open_session

# What llama-server b11434 (-md, --spec-type draft-simple, --spec-draft-n-max 4, -np 2) gave
# after two requests of 24 tokens, one per slot: 20 drafts of 76 tokens, 24 accepted.
AFTER = """\
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 48
# HELP llamacpp:spec_decode_num_draft_tokens_total Speculative: Total draft tokens generated
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 76
# HELP llamacpp:spec_decode_num_accepted_tokens_total Speculative: Total draft tokens accepted
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total 24
# HELP llamacpp:spec_decode_num_drafts_total Speculative: Total verification steps
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 20
# HELP llamacpp:spec_decode_num_accepted_tokens_per_pos_total Speculative: per position
# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 11
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 7
"""
# A server with no draft model exports the same counters, at 0.
IDLE = {
    "llamacpp:spec_decode_num_drafts_total": 0.0,
    "llamacpp:spec_decode_num_draft_tokens_total": 0.0,
    "llamacpp:spec_decode_num_accepted_tokens_total": 0.0,
}


def counters(drafts: float, drafted: float, accepted: float) -> dict[str, float]:
    return dict(zip(IDLE, (drafts, drafted, accepted), strict=True))


def test_a_repeats_drafts_are_the_counters_differences():
    after = parse_metrics(AFTER)
    assert spec_figures(IDLE, after) == SpecFigures(20, 76, 24, 24 / 76)
    # cumulative: a second repeat counts only its own drafts (the per-position series aside)
    later = counters(30, 116, 44)
    assert spec_figures(after, later) == SpecFigures(10, 40, 20, 0.5)


def test_vllms_labelled_counters_add_up_over_its_engines():
    before = {"vllm:spec_decode_num_drafts_total{engine=0}": 1.0}
    after = {
        f"vllm:spec_decode_num_{name}_total{{engine={engine}}}": value
        for engine in (0, 1)
        for name, value in (("drafts", 3.0), ("draft_tokens", 9.0), ("accepted_tokens", 6.0))
    }
    assert spec_figures(before, after) == SpecFigures(5, 18, 12, 2 / 3)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (IDLE, IDLE),  # no draft model: nothing drafted
        (None, counters(2, 8, 4)),  # /metrics did not answer before the repeat
        ({}, {}),  # a server that does not count drafts
        (counters(5, 20, 10), counters(2, 8, 4)),  # restarted between the reads
        (IDLE, counters(2, 8, 9)),  # more accepted than drafted: no such server
        (IDLE, counters(2, 8.5, 4)),  # not a count
        (IDLE, counters(2, float("nan"), 4)),
        (IDLE, counters(2, 1e15, 4)),  # beyond any real count
    ],
)
def test_no_drafts_or_untrusted_counters_give_no_figures(before, after):
    assert spec_figures(before, after) == SpecFigures()


def test_a_repeat_summary_carries_them():
    records = [request(0, submit_s=0.0, ttft_s=0.1, tokens=8)]
    run = summarize_run(records, RunObservations(None, IDLE, counters(2, 8, 6)))
    assert (
        run.speculative.spec_drafts,
        run.speculative.spec_draft_tokens,
        run.speculative.spec_accepted_tokens,
    ) == (2, 8, 6)
    assert run.speculative.spec_acceptance == 0.75
    assert (
        summarize_run(records, RunObservations(None, IDLE, IDLE)).speculative.spec_acceptance
        is None
    )


def write_drafted(path: Path) -> Path:
    """A session of two configurations of two repeats, one without a draft model and one
    whose repeats drafted 16 tokens each, 8 then 16 accepted (a share of 0.5, then 1)."""
    toml = '[server]\ndraft_model = ["", "d.gguf"]\n[workload]\nrequests = 2\nrepeats = 2\n'
    made = [
        Config(
            [
                request(4 * c + 2 * r + k, submit_s=10.0 * r, ttft_s=0.1, tokens=8, repeat=r)
                for r in (0, 1)
                for k in (0, 1)
            ],
            startup_facts(1, 8192),
        )
        for c in (0, 1)
    ]
    build_session(path, toml, made)
    drafted = {0: (IDLE, counters(4, 16, 8)), 1: (counters(4, 16, 8), counters(8, 32, 24))}
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        for repeat, (before, after) in drafted.items():
            conn.execute(
                "UPDATE server_counters SET before_json = ?, after_json = ? "
                "WHERE config_idx = 1 AND repeat = ?",
                (json.dumps(before), json.dumps(after), repeat),
            )
    return path


def test_a_sessions_configurations_show_them_where_they_drafted(tmp_path, capsys):
    path = write_drafted(tmp_path / "s.session.sqlite")
    with open_session(path) as session:
        plain, spec = session.summaries()
    acceptance = figure("spec_acceptance")
    assert acceptance.of(plain) is None and acceptance.of(spec) == 0.75  # mean of 0.5 and 1
    assert [figure(k).of(spec) for k in ("spec_drafts", "spec_accepted_tokens")] == [8, 24]
    write_concurrency_csv(tmp_path / "c.csv", [plain, spec])
    with (tmp_path / "c.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [row["spec_acceptance"] for row in rows] == ["", "0.75"]
    assert main(["show", str(path)]) == 0
    table = capsys.readouterr().out.split("draft accept")[1]  # its own table, last of all
    assert "0.75" in table.split("draft=d.gguf")[1].splitlines()[0]
