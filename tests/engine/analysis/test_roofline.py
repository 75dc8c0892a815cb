"""The bandwidth bound: a cached machine measurement, a GPU's bandwidth for the layers a
server offloaded, and each configuration's share of its bound."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from tests.made_sessions import (
    HARDWARE,
    SWEEP,
    Config,
    build_session,
    burst,
    request,
    startup_facts,
)
from workbench.cli.main import main
from workbench.engine.analysis import roofline as rl
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.records import Gpu, StartupFacts
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


def test_a_prompt_count_that_is_no_count_is_left_out(sweep_session, tmp_path):
    """``timings`` is the server's, kept as it came: a ``prompt_n`` that is no count gives
    the KV in use of the output alone, not a TypeError."""
    damaged = tmp_path / "damaged.session.sqlite"
    shutil.copy(sweep_session, damaged)
    with contextlib.closing(sqlite3.connect(damaged)) as conn, conn:
        conn.execute("""UPDATE requests SET timings_json = '{"prompt_n": "x"}'""")
    with open_session(damaged) as session:
        rows = rl.roofline(session, bandwidth=20e9)
    assert [r.kv_in_use_mib for r in rows] == pytest.approx([12 / 2 * 23040 / 2**20] * 2)


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


# -- the GPU's bandwidth for runs on a GPU -------------------------------------------------
H200 = Gpu("NVIDIA H200", 141 * 2**30, "580.159.03", 4916.7)


def gpu_sweep(path, hardware, *offloads):
    """The made sweep (np=1 and np=2, the same requests and buffers), each configuration's
    server with a backend and "offloaded k/n layers"."""
    warm = {"repeat": -1, "warmup": True, "slot": None}
    requests = (
        [request(0, submit_s=0.0, **warm), *burst(1, 3, slots=1, at_s=2.0)],
        [request(4, submit_s=6.0, **warm), *burst(5, 3, slots=2, at_s=8.0, itl_s=0.125)],
    )
    configs = [
        Config(
            made, replace(startup_facts(slots, 2048), backend=b, layers_offloaded=k, layers_total=n)
        )
        for slots, made, (b, k, n) in zip((1, 2), requests, offloads, strict=True)
    ]
    return build_session(path, SWEEP, configs, hardware=hardware)


@pytest.fixture
def no_cpu_measure(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []
    monkeypatch.setattr(rl, "measure_bandwidth", lambda: calls.append(1) or 12.5e9)
    return calls


def test_apple_chips_by_name_and_cores():
    assert rl.apple_bandwidth("Apple M1", 8) == rl.Bandwidth(
        68.25e9, "Apple M1: Apple's stated unified memory bandwidth"
    )
    gbs = {
        (chip, cores): (b.bytes_per_s / 1e9 if (b := rl.apple_bandwidth(chip, cores)) else None)
        for chip, cores in [
            ("Apple M1 Pro (Virtual)", 10),
            ("Apple M2 Ultra", 24),
            ("Apple M3 Pro", 11),
            ("Apple M3 Max", 14),
            ("Apple M3 Max", 16),
            ("Apple M3 Max", None),  # which M3 Max is not known: no guess
            ("Apple M4", 10),
            ("Apple M4 Max", 14),
            ("Apple M4 Max", 16),
            ("Apple M9", 8),
            ("Intel(R) Core(TM) i7-9750H", 6),
            (None, None),
        ]
    }
    assert list(gbs.values()) == [200, 800, 150, 300, 400, None, 120, 410, 546, None, None, None]
    assert "14 CPU cores" in rl.apple_bandwidth("Apple M4 Max", 14).source


def test_nvidia_bandwidth_from_the_fingerprint():
    assert rl.nvidia_bandwidth(replace(HARDWARE, gpus=(Gpu("L4", 1),))) is None  # nvidia-smi
    one = rl.nvidia_bandwidth(replace(HARDWARE, gpus=(H200, H200)))
    assert one == rl.Bandwidth(
        4916.7e9, "NVIDIA H200: peak from NVML, memory clock x bus width x 2"
    )
    mixed = rl.nvidia_bandwidth(replace(HARDWARE, gpus=(H200, Gpu("NVIDIA L4", 1, None, 300.0))))
    assert mixed.bytes_per_s == 300e9 and "(the slowest GPU)" in mixed.source


def test_a_step_split_between_gpu_and_cpu_reads_each_share_at_its_speed():
    assert rl.step_bandwidth(1.0, 10e9, 90e9) == 90e9
    assert rl.step_bandwidth(0.0, 10e9, 90e9) == 10e9
    assert rl.step_bandwidth(0.5, 10e9, 90e9) == pytest.approx(1 / (0.5 / 10e9 + 0.5 / 90e9))
    assert rl.step_bandwidth(0.5, 10e9, None) == 10e9
    assert rl.gpu_share(StartupFacts(backend="CUDA", layers_offloaded=12, layers_total=31)) == (
        pytest.approx(12 / 31)
    )
    for facts in (
        StartupFacts(backend="CPU", layers_offloaded=31, layers_total=31),  # no GPU backend
        StartupFacts(backend="CUDA"),  # offload not logged
        StartupFacts(backend="Vulkan", layers_offloaded=31, layers_total=31),  # no figure yet
    ):
        assert rl.gpu_share(facts) == 0.0


def test_a_session_on_an_nvidia_gpu_is_bound_by_the_gpus_bandwidth(tmp_path, no_cpu_measure):
    hardware = replace(HARDWARE, gpus=(H200,))
    path = gpu_sweep(tmp_path / "s.session.sqlite", hardware, ("CUDA", 31, 31), ("CUDA", 31, 31))
    report = rl.session_roofline(path)
    assert no_cpu_measure == []  # nothing ran on the CPU: its bandwidth is not needed
    assert (report.bandwidth, report.on_gpu, report.recorded_on) == (4916.7e9, True, None)
    assert report.how == "NVIDIA H200: peak from NVML, memory clock x bus width x 2"
    kv_in_use = (20 + 12 / 2) * 23040
    assert [r.bound_tok_s for r in report.rows] == pytest.approx(
        [4916.7e9 / (92.1 * 2**20 + batch * kv_in_use) for batch in (1, 2)]
    )
    assert [(r.bandwidth, r.gpu_share) for r in report.rows] == [(4916.7e9, 1.0)] * 2


def test_a_session_on_metal_is_bound_by_the_chips_bandwidth(tmp_path, no_cpu_measure):
    hardware = replace(HARDWARE, apple_chip="Apple M2 Max", cpu_physical_cores=12)
    path = gpu_sweep(tmp_path / "s.session.sqlite", hardware, ("Metal", 31, 31), ("Metal", 31, 31))
    report = rl.session_roofline(path)
    assert (report.bandwidth, report.how) == (
        400e9,
        "Apple M2 Max: Apple's stated unified memory bandwidth",
    )


def test_gpu_and_cpu_configurations_each_get_their_own_bound(tmp_path, no_cpu_measure):
    """-ngl 0 against -ngl 99 on one machine, and a partial offload."""
    hardware = replace(HARDWARE, gpus=(H200,))
    path = gpu_sweep(tmp_path / "s.session.sqlite", hardware, ("CUDA", 0, 31), ("CUDA", 12, 31))
    report = rl.session_roofline(path)
    assert no_cpu_measure == [1] and report.on_gpu
    assert report.how == (
        "NVIDIA H200: peak from NVML, memory clock x bus width x 2; CPU 12.5 GB/s, measured now"
    )
    cpu_row, partial = report.rows
    assert (cpu_row.bandwidth, cpu_row.gpu_share) == (12.5e9, 0.0)
    assert partial.gpu_share == pytest.approx(12 / 31)
    assert partial.bandwidth == pytest.approx(1 / (12 / 31 / 4916.7e9 + 19 / 31 / 12.5e9))
    assert report.recorded_on == "made-host"  # the CPU's figure is this machine's


def test_a_gpu_session_that_lacks_the_gpus_bandwidth_says_so(tmp_path, no_cpu_measure):
    hardware = replace(HARDWARE, gpus=(Gpu("NVIDIA H200", 1),))  # nvidia-smi knew no more
    path = gpu_sweep(tmp_path / "s.session.sqlite", hardware, ("CUDA", 31, 31), ("CUDA", 31, 31))
    report = rl.session_roofline(path)
    assert report.bandwidth == 12.5e9 and not report.on_gpu
    assert report.how.startswith("measured now; the session does not say its CUDA GPU's")
    assert [r.gpu_share for r in report.rows] == [0.0, 0.0]
    given = rl.session_roofline(path, bandwidth_gbs=4800)
    assert (given.bandwidth, given.how, given.recorded_on) == (4800e9, "given", None)


def test_a_bandwidth_a_session_file_gets_wrong_is_not_used():
    from workbench.engine.base.records import Hardware

    hardware = Hardware(gpus=(Gpu(name="H200", memory_bandwidth_gbs=-5.0), Gpu(name="L4")))
    assert rl.nvidia_bandwidth(hardware) is None


# -- sessions with nothing to bound ----------------------------------------------------------
def test_an_imported_session_has_no_roofline_and_says_why(tmp_path, capsys, monkeypatch):
    """Once an empty table, status 0, after measuring this machine's bandwidth for nothing."""
    monkeypatch.setattr(rl, "measure_bandwidth", lambda: pytest.fail("measured for nothing"))
    vllm = next((Path(__file__).parents[2] / "data" / "imports" / "vllm").glob("*.json"))
    assert main(["import", str(vllm), "--out", str(tmp_path)]) == 0
    (imported,) = tmp_path.glob("*.session.sqlite")
    capsys.readouterr()
    assert main(["roofline", str(imported)]) == 1
    printed = capsys.readouterr()
    assert printed.out == ""
    (line,) = printed.err.splitlines()
    assert line == (
        f"error: {imported.name}: it was imported from vllm bench serve (version not "
        f"recorded in the file), {vllm.name}, whose results do not say the model's and the "
        "KV cache's sizes in memory, which a roofline needs"
    )


def test_an_external_server_s_session_has_no_roofline_and_says_why(tmp_path):
    toml = "[server]\nslots = 1\n[workload]\nrequests = 3\nmax_tokens = 12\n"
    path = build_session(
        tmp_path / "ext.session.sqlite",
        toml,
        [Config(burst(0, 3, slots=1, at_s=0.0))],
        base_url="http://127.0.0.1:8080",
    )
    with pytest.raises(WorkbenchError, match="it measured an external server"):
        rl.session_roofline(path, bandwidth_gbs=20)
