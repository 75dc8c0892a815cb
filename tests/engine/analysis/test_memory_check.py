"""One rule for the predicted footprint: the memory check (``workbench show``) and the window's
memory plot (``footprint.predicted_footprint_mib``) predict from the same buffers, or both
give none."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.made_sessions import Config, build_session, request, startup_facts
from workbench.engine.analysis.export import memory_checks
from workbench.engine.figures.footprint import predicted_footprint_mib
from workbench.engine.store import open_session


def test_the_memory_check_and_the_plot_predict_by_one_rule(tmp_path):
    whole = startup_facts(1, 2048)  # 92.1 + 45 + 62.9 MiB
    no_compute = replace(whole, compute_buffer_mib=None)
    toml = "[server]\nslots = [1, 2]\nctx = 2048\n[workload]\nrequests = 1\n"
    configs = [Config([request(0)], whole), Config([request(1)], no_compute)]
    with open_session(build_session(tmp_path / "s.session.sqlite", toml, configs)) as session:
        checks = memory_checks(session)
    assert [(c.label, c.predicted_mib) for c in checks] == [("np=1", pytest.approx(200.0))]
    assert predicted_footprint_mib(whole) == checks[0].predicted_mib
    assert predicted_footprint_mib(no_compute) is None
    assert predicted_footprint_mib(replace(whole, kv_buffer_mib=None)) is None
