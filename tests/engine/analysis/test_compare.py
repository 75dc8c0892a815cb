"""Comparing sessions recorded with different settings: aligned, normalised, and honest about
what makes them unlike."""

from __future__ import annotations

import csv
import math

import pytest

from workbench.cli.main import main
from workbench.engine.analysis.compare import compare_sessions, to_markdown
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.run.runner import ExperimentRunner, RunOptions
from workbench.engine.store.session import open_session

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def other_session(tmp_path_factory):
    experiment = parse_experiment(
        'name = "other"\n[server]\nslots = [1, 4]\nctx = 4096\n'
        "[workload]\nrequests = 3\nmax_tokens = 8\nwarmup = 0\n"
    )
    out = tmp_path_factory.mktemp("other")
    return ExperimentRunner(experiment, RunOptions(out)).run().session_path


def test_sessions_align_by_configuration(recorded_session, other_session):
    with open_session(recorded_session) as a, open_session(other_session) as b:
        comparison = compare_sessions([a, b])
        relative = compare_sessions([a, b], relative=True)
        summaries = a.summaries()
    assert comparison.labels == ["np=1", "np=2", "np=4"]
    assert comparison.columns[0].startswith("recorded · ")
    agg = comparison.cells[("np=2", "agg_tok_s")]
    assert agg[0] == pytest.approx(summaries[1].mean["agg_tok_s"]) and agg[1] is None
    assert comparison.cells[("np=4", "agg_tok_s")][0] is None
    assert all(v == pytest.approx(1.0) for v in relative.cells[("np=1", "ttft_p50_s")])
    expected = summaries[1].value("decode_tok_s") / summaries[0].value("decode_tok_s")
    assert relative.cells[("np=2", "decode_tok_s")][0] == pytest.approx(expected)
    text = " | ".join(comparison.warnings)
    assert "different workload max_tokens: 12 vs 8" in text
    assert "np=1: different context per slot: 2048 vs 4096" in text
    markdown = to_markdown(comparison)
    assert markdown.count("\n| np=") == 21 and "Not a like-for-like comparison" in markdown


def test_compare_command_writes_csv_and_markdown(recorded_session, other_session, tmp_path, capsys):
    out_csv, out_md = tmp_path / "c.csv", tmp_path / "c.md"
    args = [
        "compare",
        str(recorded_session),
        str(other_session),
        "--csv",
        str(out_csv),
        "--markdown",
        str(out_md),
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "np=4" in printed and "not like for like" in printed
    with out_csv.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 21 and rows[0]["configuration"] == "np=1"
    value = rows[1][next(k for k in rows[1] if k.startswith("recorded"))]
    assert math.isfinite(float(value))
    assert out_md.read_text().startswith("| configuration | metric |")
