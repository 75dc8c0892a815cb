"""The bandwidth bound: a cached machine measurement and each configuration's share of it."""

from __future__ import annotations

import pytest

from workbench.cli.main import main
from workbench.engine.analysis import roofline as rl
from workbench.engine.base.records import StartupFacts
from workbench.engine.store import open_session


def test_bandwidth_is_measured_once_per_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []
    monkeypatch.setattr(rl, "measure_bandwidth", lambda: calls.append(1) or 12.5e9)
    assert rl.machine_bandwidth() == (12.5e9, True)
    assert rl.machine_bandwidth() == (12.5e9, False)
    assert rl.machine_bandwidth(refresh=True) == (12.5e9, True)
    assert len(calls) == 2 and rl.cache_file().is_file()


def test_a_real_copy_gives_a_plausible_bandwidth():
    assert 0.2e9 < rl.measure_bandwidth(copy_mib=16, repeats=2) < 2e12


def test_kv_bytes_per_token_from_the_servers_own_figures():
    facts = StartupFacts(kv_buffer_mib=180.0, n_ctx_slot=2048, n_slots=4, kv_unified=False)
    assert rl.kv_bytes_per_token(facts) == 23040  # SmolLM2-135M: 30 x 3 x 64 x 2 x 2
    unified = StartupFacts(kv_buffer_mib=180.0, n_ctx_slot=8192, n_slots=4, kv_unified=True)
    assert rl.kv_bytes_per_token(unified) == 23040
    assert rl.kv_bytes_per_token(StartupFacts()) is None


def test_roofline_of_a_session(sweep_session, capsys):
    with open_session(sweep_session) as session:
        rows = rl.roofline(session, bandwidth=20e9)
    # KV per token: 45 MiB over 2048 cells = 23040 B; in use per sequence: the 20-token
    # prompt and half the 12 tokens out. A step reads the weights once, the KV per sequence.
    kv_in_use = (20 + 12 / 2) * 23040
    assert [(r.label, r.slots, r.batch, r.weights_mib) for r in rows] == [
        ("np=1", 1, 1, 92.1),
        ("np=2", 2, 2, 92.1),
    ]
    assert [r.kv_in_use_mib for r in rows] == pytest.approx([kv_in_use / 2**20] * 2)
    bounds = [20e9 / (92.1 * 2**20 + batch * kv_in_use) for batch in (1, 2)]
    assert [r.bound_tok_s for r in rows] == pytest.approx(bounds)
    assert [r.share for r in rows] == pytest.approx([10.0 / bounds[0], 8.0 / bounds[1]])
    assert main(["roofline", str(sweep_session), "--bandwidth-gbs", "20"]) == 0
    out = capsys.readouterr().out
    assert "20.0 GB/s (given)" in out
    assert "│ np=2   │     2 │     2 │          92 │              0.57 │         205 │" in out


def test_a_session_from_another_machine_says_so(sweep_session, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(rl, "measure_bandwidth", lambda: 12.5e9)
    report = rl.session_roofline(sweep_session)
    assert (report.bandwidth, report.how, report.recorded_on) == (
        12.5e9,
        "measured now",
        "made-host",
    )
    assert rl.session_roofline(sweep_session, bandwidth_gbs=20).recorded_on is None  # given
