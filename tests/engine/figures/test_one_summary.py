"""One summary of a configuration: what the live run computes from the records it holds is
what a reopened session (and so a replay and an import) computes from the stored ones."""

from __future__ import annotations

import pytest

from workbench.engine.base.records import StartupFacts
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.figures.summaries import summarize
from workbench.engine.store import open_session


def test_the_live_summary_is_the_reopened_one(sweep_session):
    """The made sweep has a warm-up per configuration: the live list never holds them (they
    are planned apart), the stored records do, and the summaries agree either way."""
    with open_session(sweep_session) as session:
        reopened = session.summaries()
        for config, stored in zip(session.configs, reopened, strict=True):
            records = session.records(config.index)
            assert any(r.warmup for r in records)
            for held in (records, [r for r in records if not r.warmup]):
                live = summarize(
                    config.index,
                    config.label,
                    config.server,
                    config.workload,
                    config.facts or StartupFacts(),
                    held,
                    session.observations(config.index),
                    status=config.status,
                    error=config.error,
                    slots=config.slots,
                    managed=session.managed,
                )
                assert live == stored
    assert [len(s.runs) for s in reopened] == [1, 1]  # the warm-ups make no repeat of their own


@pytest.mark.server
def test_a_real_runs_live_summaries_are_its_reopened_ones(tmp_path, server_binary, model_path):
    from workbench.engine.run.lifecycle import run_experiment
    from workbench.engine.run.runner import RunOptions

    experiment = parse_experiment(
        'name = "one summary"\n[server]\nslots = 2\nctx = 2048\n'
        "[workload]\nrequests = 3\nmax_tokens = 8\nwarmup = 1\nrepeats = 2\n"
    )
    result = run_experiment(experiment, RunOptions(tmp_path))
    with open_session(result.session_path) as session:
        assert result.summaries == session.summaries()
        assert len(result.summaries[0].runs) == 2
