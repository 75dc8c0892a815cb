"""The bandwidth bound: a cached machine measurement and each configuration's share of it."""

from __future__ import annotations

import pytest

from workbench.cli.main import main
from workbench.engine.analysis import roofline as rl
from workbench.engine.store.session import open_session


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
    facts = {"kv_buffer_mib": 180.0, "n_ctx_slot": 2048, "n_slots": 4, "kv_unified": False}
    assert rl.kv_bytes_per_token(facts) == 23040  # SmolLM2-135M: 30 x 3 x 64 x 2 x 2
    unified = {"kv_buffer_mib": 180.0, "n_ctx_slot": 8192, "n_slots": 4, "kv_unified": True}
    assert rl.kv_bytes_per_token(unified) == 23040
    assert rl.kv_bytes_per_token({}) is None


@pytest.mark.server
def test_roofline_of_a_recorded_session(recorded_session, capsys):
    with open_session(recorded_session) as session:
        rows = rl.roofline(session, bandwidth=20e9)
    assert [r.slots for r in rows] == [1, 2]
    one = rows[0]
    expected = 20e9 / (one.weights_mib * 2**20 + one.batch * one.kv_in_use_mib * 2**20)
    assert one.bound_tok_s == pytest.approx(expected)
    assert 0 < one.share < 1.5 and rows[1].batch == 2
    assert main(["roofline", str(recorded_session), "--bandwidth-gbs", "20"]) == 0
    assert "20.0 GB/s (given)" in capsys.readouterr().out
