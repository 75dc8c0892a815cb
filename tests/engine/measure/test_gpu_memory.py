"""GPU memory and bandwidth through NVML, with a stand-in for nvidia-ml-py (no GPU on this
machine) shaped as its ``pynvml`` module is (13.615): errors are ``NVMLError`` subclasses whose
text is NVML's own words, process entries carry ``usedGpuMemory`` as None where NVML has no
figure (older builds pass on the all-ones value instead), and names come as bytes in
versions before 11.515. Also: what a session records, and version-1 sessions without it."""

from __future__ import annotations

import os
import sys
import threading
import time
import types
from dataclasses import replace

import pytest

from tests.conftest import older_session
from tests.engine.waiting import until
from tests.made_sessions import NS, Config, build_session, burst, startup_facts
from workbench.engine.base.records import Gpu
from workbench.engine.events import GpuSample, Notice
from workbench.engine.figures.machine_load import machine_busy_reason
from workbench.engine.measure import gpu_memory, hardware, sampler
from workbench.engine.measure.gpu_memory import GpuProbe, Nvml, nvml
from workbench.engine.measure.sampler import ServerSampler
from workbench.engine.run.replay import session_events
from workbench.engine.server.llama_server import free_port
from workbench.engine.store import open_session

MIB = 2**20
NOT_AVAILABLE = 2**64 - 1
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15
WORDS = {NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found", 15: "GPU is lost"}


class NVMLError(Exception):
    """As pynvml's: built from a return code, shown as NVML's words for it."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return WORDS.get(self.value, f"NVML Error with code {self.value}")


class Proc:
    """As pynvml's ``nvmlFriendlyObject`` of a ``c_nvmlProcessInfo_v3_t``."""

    def __init__(self, pid: int, used: int | None) -> None:
        self.pid, self.usedGpuMemory = pid, used
        self.gpuInstanceId = self.computeInstanceId = 0xFFFFFFFF


def fake_pynvml(processes: dict[int, list[Proc]], names=(b"NVIDIA H200", "NVIDIA L4")):
    """Two GPUs; ``processes`` by GPU index (a list the test may change)."""
    module = types.ModuleType("pynvml")
    module.NVMLError = NVMLError
    module.NVML_CLOCK_MEM = 2
    module.calls = []
    # Max memory clock (MHz) and bus width (bits): an H200 (nvidia-smi read 3201 MHz on one)
    # and an L4.
    clocks = {0: (3201, 6144), 1: (6251, 192)}
    module.nvmlInit = lambda: module.calls.append("init")
    module.nvmlShutdown = lambda: module.calls.append("shutdown")
    module.nvmlDeviceGetCount = lambda: 2
    module.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)
    module.nvmlDeviceGetName = lambda h: names[h[1]]
    module.nvmlSystemGetDriverVersion = lambda: b"580.159.03"
    module.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(
        total=(143771 if h[1] == 0 else 23034) * MIB, free=0, used=0
    )

    def max_clock(handle, kind):
        assert kind == module.NVML_CLOCK_MEM
        return clocks[handle[1]][0]

    module.nvmlDeviceGetMaxClockInfo = max_clock
    module.nvmlDeviceGetMemoryBusWidth = lambda h: clocks[h[1]][1]
    module.nvmlDeviceGetComputeRunningProcesses = lambda h: list(processes.get(h[1], []))
    return module


def started_sampler(events: list, config_index: int, gpu_hz: float = 4.0) -> ServerSampler:
    """A sampler of this test process (standing for the server), its /metrics on a port
    where nothing answers, started."""
    sampler_ = ServerSampler(
        events.append,
        config_index,
        f"http://127.0.0.1:{free_port()}",
        os.getpid(),
        http_hz=1,
        gpu_hz=gpu_hz,
    )
    sampler_.start()
    return sampler_


@pytest.fixture
def fresh(monkeypatch):
    """A process with no NVML session started and no notice told yet."""
    monkeypatch.setattr(gpu_memory, "_session", None)
    monkeypatch.setattr(sampler, "_told", set())


@pytest.fixture
def server_on_gpu(fresh, monkeypatch):
    """NVML lists this test process (standing for the server) on GPU 0 with 512 MiB, and a
    stranger on both GPUs."""
    processes = {0: [Proc(os.getpid(), 512 * MIB), Proc(1, 7 * MIB)], 1: [Proc(1, 9 * MIB)]}
    module = fake_pynvml(processes)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module, processes


def test_gpus_with_their_bandwidth_and_names_as_bytes_or_text(server_on_gpu):
    module, _ = server_on_gpu
    assert hardware.nvidia_gpus() == [
        Gpu("NVIDIA H200", 143771 * MIB, "580.159.03", 4916.7),  # spec: 4.8 TB/s
        Gpu("NVIDIA L4", 23034 * MIB, "580.159.03", 300.0),  # spec: 300 GB/s
    ]
    assert module.calls == ["init"]  # one session for the process
    hardware.nvidia_gpus()
    assert module.calls == ["init"]


def test_no_bandwidth_where_nvml_does_not_say(server_on_gpu):
    module, _ = server_on_gpu
    del module.nvmlDeviceGetMemoryBusWidth  # an nvidia-ml-py from before the call existed
    assert [g.memory_bandwidth_gbs for g in nvml().gpus()] == [None, None]
    module.nvmlDeviceGetMemoryBusWidth = lambda h: 0  # no figure a bus has
    assert [g.memory_bandwidth_gbs for g in nvml().gpus()] == [None, None]


def test_usage_sums_the_servers_processes_on_every_gpu(server_on_gpu):
    _, processes = server_on_gpu
    session = nvml()
    assert session.used_by({os.getpid()}).bytes == 512 * MIB
    processes[1].append(Proc(4242, 100 * MIB))  # a child of the server on the other GPU
    assert session.used_by({os.getpid(), 4242}).bytes == 612 * MIB
    # The stranger (pid 1, on both GPUs) and 4242 are others; for 12345, so is this one.
    assert session.used_by({os.getpid()}).others == 2
    assert session.used_by({12345}) == gpu_memory.Usage(False, None, 3)  # not on any GPU


@pytest.mark.parametrize("odd", [None, NOT_AVAILABLE, -1, True, "512"])
def test_a_process_nvml_gives_no_figure_for_is_no_figure(server_on_gpu, odd):
    _, processes = server_on_gpu
    processes[1].append(Proc(os.getpid(), odd))  # listed twice, once without a figure
    assert nvml().used_by({os.getpid()}) == gpu_memory.Usage(True, None, 1)


def test_the_sampler_records_the_servers_gpu_memory(server_on_gpu):
    events = []
    sampler_ = started_sampler(events, 0, gpu_hz=50)
    until(lambda: len([e for e in events if isinstance(e, GpuSample)]) >= 3)
    sampler_.stop()
    gpu = [e for e in events if isinstance(e, GpuSample)]
    assert len(gpu) >= 3 and all(e.gpu_bytes == 512 * MIB for e in gpu)
    assert not [e for e in events if isinstance(e, Notice)]  # nothing to explain
    # Another process on the GPU makes the machine busy (``machine_load``).
    machine = sampler_.machine_load()
    assert machine is not None and machine.gpu_other_processes == 1
    assert "1 other process(es) on the GPU" in (machine_busy_reason(machine) or "")


def notices_of(probe_run) -> list[tuple[str, str]]:
    probe = GpuProbe()
    probe_run(probe)
    probe.finish()
    return probe.notices


def test_without_nvidia_ml_py_a_machine_with_no_nvidia_driver_hears_nothing(fresh, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # the import fails
    monkeypatch.setattr(gpu_memory, "nvidia_driver_present", lambda: False)
    assert notices_of(lambda p: p.sample({os.getpid()})) == []
    assert "not installed" in (nvml().unavailable or "")


def test_without_nvidia_ml_py_on_an_nvidia_machine_the_fix_is_named(fresh, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(gpu_memory, "nvidia_driver_present", lambda: True)
    (notice,) = notices_of(lambda p: p.sample({os.getpid()}))
    assert notice == (
        "warning",
        "GPU memory is not sampled: nvidia-ml-py is not installed "
        "(pip install 'concurrency-workbench[nvidia]')",
    )


def test_nvml_that_will_not_start_says_why(fresh, monkeypatch):
    module = fake_pynvml({})

    def no_library():
        raise NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND)

    module.nvmlInit = no_library
    monkeypatch.setitem(sys.modules, "pynvml", module)
    monkeypatch.setattr(gpu_memory, "nvidia_driver_present", lambda: False)
    assert notices_of(lambda p: p.sample({os.getpid()})) == [
        ("info", "GPU memory is not sampled: NVML did not start (NVML Shared Library Not Found)")
    ]
    assert hardware.nvidia_gpus() == []  # and the fingerprint falls back to nvidia-smi (none)


def test_an_nvml_error_mid_run_stops_the_probe_not_the_run(server_on_gpu):
    module, _ = server_on_gpu

    def lost(handle):
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)

    probe = GpuProbe()
    assert probe.sample({os.getpid()}) == 512 * MIB
    module.nvmlDeviceGetComputeRunningProcesses = lost
    assert probe.sample({os.getpid()}) is None and probe.stopped
    probe.finish()
    assert probe.notices == [("warning", "GPU memory sampling stopped: NVML failed (GPU is lost)")]


def test_a_slow_query_stops_the_probe(server_on_gpu, monkeypatch):
    module, processes = server_on_gpu
    monkeypatch.setattr(GpuProbe, "SLOW_S", 0.01)

    def slow(handle):
        time.sleep(0.03)
        return list(processes.get(handle[1], []))

    module.nvmlDeviceGetComputeRunningProcesses = slow
    probe = GpuProbe()
    assert probe.sample({os.getpid()}) == 512 * MIB  # the answer still counts
    assert probe.stopped and probe.sample({os.getpid()}) is None
    ((level, words),) = probe.notices
    assert level == "warning" and words.startswith("GPU memory sampling stopped: NVML took")


def test_a_query_that_has_not_returned_is_never_queued_behind(server_on_gpu):
    probe = GpuProbe()
    with GpuProbe._in_flight:  # another probe's query hangs inside NVML
        assert probe.sample({os.getpid()}) is None
    probe.finish()
    assert probe.notices == [("warning", "no GPU memory curve: an NVML query has not returned")]


def test_why_a_probe_that_ran_took_no_sample(server_on_gpu):
    assert notices_of(lambda p: p.sample({12345})) == [
        (
            "info",
            "no GPU memory curve: NVML did not list the server's processes (a server on the "
            "CPU, or a container whose process ids are not the host's)",
        )
    ]
    _, processes = server_on_gpu
    processes[0].append(Proc(777, None))
    ((level, words),) = notices_of(lambda p: p.sample({777}))
    assert level == "info" and "NVML_VALUE_NOT_AVAILABLE" in words


def test_a_probe_that_never_sampled_starts_no_nvml_when_it_finishes(server_on_gpu):
    """finish runs on the thread that stops the sampler (the measuring loop's): it must not
    be the one that starts NVML."""
    module, _ = server_on_gpu
    probe = GpuProbe()
    probe.finish()
    assert (module.calls, probe.notices) == ([], [])


def hanging_query(
    module: types.ModuleType, processes: dict[int, list[Proc]]
) -> tuple[threading.Event, threading.Event]:
    """NVML's process list hangs until released, then lists ``processes``: whether a query
    has entered it, and the release."""
    entered, release = threading.Event(), threading.Event()

    def hang(handle: tuple[str, int]) -> list[Proc]:
        entered.set()
        release.wait(10)
        return list(processes.get(handle[1], []))

    module.nvmlDeviceGetComputeRunningProcesses = hang
    return entered, release


def test_a_hung_nvml_call_holds_up_neither_the_memory_curve_nor_stop(server_on_gpu, monkeypatch):
    monkeypatch.setattr(ServerSampler, "GPU_JOIN_S", 0.1)  # the bound, not its size, is tested
    module, _ = server_on_gpu
    entered, release = hanging_query(module, {})
    events = []
    sampler_ = started_sampler(events, 3, gpu_hz=50)

    def memory() -> int:
        return len([e for e in events if type(e).__name__ == "ProcessSample"])

    assert entered.wait(10)
    hung_at = memory()
    until(lambda: memory() >= max(2, hung_at + 1))  # the curve goes on while the query hangs
    start = time.monotonic()
    sampler_.stop()
    took = time.monotonic() - start
    release.set()
    assert took < ServerSampler.GPU_JOIN_S + 0.5
    assert len([e for e in events if type(e).__name__ == "ProcessSample"]) >= 2
    assert not [e for e in events if isinstance(e, GpuSample)]
    told = [(e.level, e.text) for e in events if isinstance(e, Notice)]
    assert told == [("warning", "no GPU memory curve: an NVML query has not returned")]


def test_the_same_notice_is_told_once_per_process(fresh, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    events = []
    asked = threading.Semaphore(0)
    monkeypatch.setattr(gpu_memory, "nvidia_driver_present", lambda: asked.release() or True)
    for config in (0, 1):  # a sampler per repeat of each configuration
        sampler_ = started_sampler(events, config)
        assert asked.acquire(timeout=10)  # its probe found NVML missing before it stopped
        sampler_.stop()
    told = [e for e in events if isinstance(e, Notice) and "nvidia-ml-py" in e.text]
    assert [(n.level, n.config_index) for n in told] == [("warning", 0)]


def test_an_nvml_session_is_shared_and_shut_down_once(server_on_gpu, monkeypatch):
    module, _ = server_on_gpu
    at_exit = []
    monkeypatch.setattr(gpu_memory.atexit, "register", lambda f, *a: at_exit.append((f, a)))
    session = Nvml()
    assert session.module is module and len(session.handles) == 2
    ((shutdown, args),) = at_exit
    shutdown(*args)
    assert module.calls == ["init", "shutdown"]


def test_a_version_1_session_reads_without_gpu_samples(tmp_path):
    gpu = [GpuSample(0, k * NS, (300 + k) * MIB) for k in range(3)]
    made = build_session(
        tmp_path / "gpu.session.sqlite",
        "[server]\nslots = 1\n[workload]\nrequests = 3\n",
        [Config(burst(0, 3, slots=1, at_s=0.0), startup_facts(1, 8192), gpu)],
    )
    with open_session(made) as session:
        assert [
            (g.config_index, g.t_ns, g.gpu_bytes) for g in session.samples("gpu_samples", 0)
        ] == [(0, e.t_ns, e.gpu_bytes) for e in gpu]
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


def test_a_query_that_returns_after_stop_records_nothing(server_on_gpu, monkeypatch):
    """A query still hanging when stop() gave up on it comes back later with a figure: the
    run it was for has ended, so no sample reaches the session."""
    monkeypatch.setattr(ServerSampler, "GPU_JOIN_S", 0.1)
    module, processes = server_on_gpu
    entered, release = hanging_query(module, processes)
    events = []
    sampler_ = started_sampler(events, 3, gpu_hz=50)
    assert entered.wait(10)
    sampler_.stop()
    gave_up_on = [t for t in threading.enumerate() if t.name == "sampler-gpu"]
    release.set()  # the query returns now, with 512 MiB
    for thread in gave_up_on:
        thread.join(10)
    assert gave_up_on and not any(t.is_alive() for t in gave_up_on)
    assert not [e for e in events if isinstance(e, GpuSample)]
