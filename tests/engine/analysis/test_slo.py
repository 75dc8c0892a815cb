"""Goodput against SLOs and the recommendation, on a recorded session; planning arithmetic."""

from __future__ import annotations

import pytest

from workbench.cli.main import main
from workbench.engine.analysis.slo import Slo, goodput, machines_needed, peak_users, recommend
from workbench.engine.figures.summaries import request_metrics
from workbench.engine.store.session import open_session


def test_planning_arithmetic():
    assert peak_users(1000, 0.05) == 50
    assert peak_users(999, 0.05) == 50  # rounded up: 49.95 people are 50
    assert machines_needed(50, 8) == 7
    assert machines_needed(50, 0) is None
    with pytest.raises(ValueError):
        Slo()


@pytest.mark.server
def test_goodput_and_recommendation_on_a_recorded_session(recorded_session, capsys):
    with open_session(recorded_session) as session:
        easy = goodput(session, Slo(ttft_s=60.0))
        impossible = goodput(session, Slo(ttft_s=1e-6))
        records = [r for r in session.records(1) if not r.warmup]
        makespan = session.summaries()[1].mean["makespan_s"]
    assert [r.good for r in easy] == [3, 3] and all(r.acceptable for r in easy)
    assert easy[1].goodput_rps == pytest.approx(3 / makespan)
    assert recommend(easy).choice.label in ("np=1", "np=2")
    assert all(r.good == 0 and not r.acceptable for r in impossible)
    assert "TTFT p50" in impossible[0].reasons[0]
    assert recommend(impossible).choice is None
    assert "add a machine" in recommend(impossible).text
    # A per-request threshold between the fastest and slowest request splits them.
    ttfts = sorted(request_metrics(r).ttft_s for r in records)
    middle = goodput_for(recorded_session, Slo(ttft_s=(ttfts[0] + ttfts[1]) / 2))[1]
    assert middle.good == 1

    assert main(["slo", str(recorded_session), "--ttft", "60", "--registered", "100"]) == 0
    out = capsys.readouterr().out
    assert "peak concurrent users = 100 registered x 0.05 online = 5" in out
    assert "recommendation: np=" in out
    assert main(["slo", str(recorded_session)]) == 1


def goodput_for(path, slo):
    with open_session(path) as session:
        return goodput(session, slo)
