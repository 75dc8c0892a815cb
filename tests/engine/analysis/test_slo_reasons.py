"""A configuration's missed SLO reads true as it is shown: a value just over its limit is
shown with the digits that tell them apart (2.0004 s > 2 s, never 2.000 s > 2 s)."""

from __future__ import annotations

from tests.made_sessions import Config, build_session, request, startup_facts
from workbench.engine.analysis.slo import Slo, goodput
from workbench.engine.store import open_session


def test_a_value_just_over_its_limit_is_shown_over_it(tmp_path):
    toml = "[server]\nslots = 1\n[workload]\nrequests = 3\n"
    requests = [request(k, submit_s=3.0 * k, ttft_s=2.0004) for k in range(3)]
    path = build_session(
        tmp_path / "s.session.sqlite", toml, [Config(requests, startup_facts(1, 8192))]
    )
    with open_session(path) as session:
        (over,) = goodput(session, Slo(ttft_s=2.0))[0].reasons
        (kept,) = goodput(session, Slo(ttft_s=1.5))[0].reasons
    assert over == "TTFT p50 2.0004 s > 2 s"
    assert kept == "TTFT p50 2.000 s > 1.5 s"  # the table's own three decimals when they tell
