"""One summary of a configuration: what the live run computes from the records it holds is
what a reopened session (and so a replay and an import) computes from the stored ones."""

from __future__ import annotations

import pytest

from workbench.engine.config.experiment import parse_experiment
from workbench.engine.run.lifecycle import run_experiment
from workbench.engine.run.runner import RunOptions
from workbench.engine.store import open_session, summarize_config_records
from workbench.mock_server import MockProcess as Mock


def test_the_warm_ups_make_no_repeat_of_their_own(sweep_session):
    """The made sweep has a warm-up per configuration: the stored records hold them, and
    the summary leaves them out whether or not the list it is given does."""
    with open_session(sweep_session) as session:
        reopened = session.summaries()
        for config, stored in zip(session.configs, reopened, strict=True):
            records = session.records(config.index)
            assert any(r.warmup for r in records)
            measured = [r for r in records if not r.warmup]
            observed = session.observations(config.index)
            for given in (records, measured):
                assert summarize_config_records(config, given, observed, session.managed) == stored
    assert [len(s.runs) for s in reopened] == [1, 1]


def test_a_runs_live_summaries_are_its_reopened_ones(tmp_path):
    """The live path itself (the runner's summaries as the run ends) against the reopened
    file's, for a run of two repeats with a warm-up, against the mock server."""
    experiment = parse_experiment(
        'name = "one summary"\n[workload]\nrequests = 3\nmax_tokens = 8\nwarmup = 1\nrepeats = 2\n'
    )
    with Mock("--ttft-ms", "10", "--itl-ms", "2", "--tokens", "8", "--slots", "2") as mock:
        result = run_experiment(experiment, RunOptions(tmp_path, base_url=mock.url))
    with open_session(result.session_path) as session:
        assert result.summaries == session.summaries()
    assert [len(s.runs) for s in result.summaries] == [2]
    assert [run.requests for run in result.summaries[0].runs] == [3, 3]


@pytest.mark.server
def test_a_real_runs_live_summaries_are_its_reopened_ones(tmp_path, server_binary, model_path):
    experiment = parse_experiment(
        'name = "one summary"\n[server]\nslots = 2\nctx = 2048\n'
        "[workload]\nrequests = 3\nmax_tokens = 8\nwarmup = 1\nrepeats = 2\n"
    )
    result = run_experiment(experiment, RunOptions(tmp_path))
    with open_session(result.session_path) as session:
        assert result.summaries == session.summaries()
        assert len(result.summaries[0].runs) == 2
