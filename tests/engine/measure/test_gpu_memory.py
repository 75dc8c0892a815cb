"""GPU memory through NVML: read with a stand-in for nvidia-ml-py (no GPU on this machine),
recorded in the session, and absent without a driver. Version-1 sessions read without it."""

from __future__ import annotations

import os
import sys
import time
import types
from dataclasses import replace

import pytest

from tests.conftest import older_session
from tests.made_sessions import NS, Config, build_session, burst, startup_facts
from workbench.engine.events import GpuSample
from workbench.engine.measure.hardware import GpuProbe
from workbench.engine.measure.sampler import ServerSampler
from workbench.engine.run.replay import session_events
from workbench.engine.server.llama_server import free_port
from workbench.engine.store import open_session

MIB = 2**20


@pytest.fixture
def fake_nvml(monkeypatch):
    module = types.ModuleType("pynvml")
    processes = [
        types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=512 * MIB),
        types.SimpleNamespace(pid=1, usedGpuMemory=7 * MIB),
    ]
    module.nvmlInit = lambda: None
    module.nvmlShutdown = lambda: None
    module.nvmlDeviceGetCount = lambda: 2
    module.nvmlDeviceGetHandleByIndex = lambda i: i
    module.nvmlDeviceGetComputeRunningProcesses = lambda handle: processes if handle == 0 else []
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


def test_gpu_probe_sums_what_the_server_processes_hold(fake_nvml):
    probe = GpuProbe()
    assert probe.available
    assert probe.used_by({os.getpid()}) == 512 * MIB
    assert probe.used_by({os.getpid(), 1}) == 519 * MIB
    assert probe.used_by({12345}) is None  # not on the GPU (or a host PID in a container)
    probe.close()
    assert probe.used_by({os.getpid()}) is None


def test_without_nvml_there_is_no_gpu_curve(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    assert GpuProbe().available is False


def test_the_sampler_emits_gpu_samples(fake_nvml):
    events = []
    sampler = ServerSampler(
        events.append, 0, f"http://127.0.0.1:{free_port()}", os.getpid(), process_hz=50, http_hz=1
    )
    sampler.start()
    time.sleep(0.3)
    sampler.stop()
    gpu = [e for e in events if isinstance(e, GpuSample)]
    assert len(gpu) >= 3 and all(e.gpu_bytes == 512 * MIB for e in gpu)


def test_a_version_1_session_reads_without_gpu_samples(tmp_path):
    gpu = [GpuSample(0, k * NS, (300 + k) * MIB) for k in range(3)]
    made = build_session(
        tmp_path / "gpu.session.sqlite",
        "[server]\nslots = 1\n[workload]\nrequests = 3\n",
        [Config(burst(0, 3, slots=1, at_s=0.0), startup_facts(1, 8192), gpu)],
    )
    with open_session(made) as session:
        assert [(g.config_idx, g.t_ns, g.gpu_bytes) for g in session.samples("gpu_samples", 0)] == [
            (0, e.t_ns, e.gpu_bytes) for e in gpu
        ]
        assert [e for _, e in session_events(session) if isinstance(e, GpuSample)] == gpu
        records = session.records(0)
    old = older_session(made, tmp_path, 1, "gpu_samples")
    with open_session(old) as session:
        assert session.schema_version == 1
        assert session.samples("gpu_samples", 0) == []
        assert not [e for _, e in session_events(session) if isinstance(e, GpuSample)]
        assert session.records(0) == [replace(r, slot=None) for r in records]  # nor slots
        (summary,) = session.summaries()
        assert (summary.status, summary.runs[0].ttft_p50_s) == ("ok", 1.3)
