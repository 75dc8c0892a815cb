"""Process memory as the platform counts it. There is no Mac here: macOS's
``proc_pid_rusage`` is stood in for by a C-callable function that fills the same struct, so
the layout, the ctypes call and the fallback are what run; the real libproc is not."""

from __future__ import annotations

import ctypes
import errno
import os
import subprocess
import sys

import psutil
import pytest

from tests.engine.waiting import until
from tests.made_sessions import Config, build_session, request, startup_facts
from workbench.engine.events import Notice, ProcessSample
from workbench.engine.measure import hardware, sampler
from workbench.engine.measure.process_memory import (
    RUSAGE_INFO_V2,
    RusageInfoV2,
    choose_measure,
    phys_footprint,
)
from workbench.engine.measure.sampler import ProcessProbe, ServerSampler
from workbench.engine.server.llama_server import free_port
from workbench.engine.store import open_session

FOOTPRINT = 3 * 2**30 + 12345

RusageFunction = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(RusageInfoV2)
)


def fake_libproc(footprints: dict[int, int]):
    """A C function with ``proc_pid_rusage``'s signature: fills the footprint (and, to show
    the fields are not mixed up, the RSS with something else) for the pids it knows."""

    @RusageFunction
    def proc_pid_rusage(pid, flavor, buffer):
        if flavor != RUSAGE_INFO_V2 or pid not in footprints:
            return -1
        buffer.contents.ri_resident_size = 1
        buffer.contents.ri_phys_footprint = footprints[pid]
        return 0

    return proc_pid_rusage


def test_the_struct_is_macos_rusage_info_v2():
    """<sys/resource.h>: a 16-byte uuid, then 18 uint64 fields, the footprint the 8th."""
    assert ctypes.sizeof(RusageInfoV2) == 16 + 18 * 8
    assert RusageInfoV2.ri_resident_size.offset == 16 + 6 * 8
    assert RusageInfoV2.ri_phys_footprint.offset == 16 + 7 * 8
    assert RusageInfoV2.ri_diskio_byteswritten.offset == 16 + 17 * 8


def test_the_footprint_is_read_from_the_struct_libproc_fills():
    call = fake_libproc({4242: FOOTPRINT})
    assert phys_footprint(4242, call) == FOOTPRINT
    with pytest.raises(OSError, match=r"proc_pid_rusage\(999\) failed"):
        phys_footprint(999, call)


def test_off_a_mac_the_measure_is_the_rss_and_says_nothing():
    measure = choose_measure("linux")
    assert (measure.name, measure.fallback_reason, measure.notice) == ("RSS", None, None)
    me = psutil.Process()
    assert measure.read(me) == pytest.approx(me.memory_info().rss, rel=0.2)


def test_on_a_mac_without_libproc_the_rss_with_the_reason():
    """This machine has no libproc: the real loader fails, as on a Mac that refused it."""
    measure = choose_measure("darwin")
    assert measure.name == "RSS"
    assert "libproc.dylib" in (measure.fallback_reason or "")
    assert (measure.notice or "").startswith(
        "process memory is the RSS, not the physical footprint: libproc's proc_pid_rusage "
        "did not answer"
    )


def test_on_a_mac_a_refusal_for_this_very_process_is_a_fallback_too():
    measure = choose_measure("darwin", lambda: fake_libproc({}))
    assert measure.name == "RSS" and "failed" in (measure.fallback_reason or "")


def test_on_a_mac_the_footprint_of_each_process():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        call = fake_libproc({os.getpid(): 100, child.pid: FOOTPRINT})
        measure = choose_measure("darwin", lambda: call)
        assert measure.name == "physical footprint" and "Activity Monitor" in measure.notice
        assert measure.read(psutil.Process(child.pid)) == FOOTPRINT
    finally:
        child.kill()
        child.wait()
    with pytest.raises(psutil.AccessDenied):
        measure.read(psutil.Process(1))  # libproc refuses a process that is running


def test_a_process_gone_reads_as_gone():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    process = psutil.Process(child.pid)
    child.wait()
    measure = choose_measure("darwin", lambda: fake_libproc({os.getpid(): 100}))
    with pytest.raises(psutil.NoSuchProcess):
        measure.read(process)


def test_the_probe_counts_the_tree_with_the_chosen_measure(monkeypatch):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        call = fake_libproc({os.getpid(): 100, child.pid: FOOTPRINT})
        monkeypatch.setattr(
            sampler, "process_measure", lambda: choose_measure("darwin", lambda: call)
        )
        probe = ProcessProbe(os.getpid())
        memory, _ = probe.sample()
        assert memory == 100 + FOOTPRINT  # the server and its child, by footprint
    finally:
        child.kill()
        child.wait()


def test_the_sampler_says_once_which_figure_its_memory_curve_is(monkeypatch):
    monkeypatch.setattr(sampler, "_told", set())
    monkeypatch.setattr(
        sampler, "process_measure", lambda: choose_measure("darwin", lambda: fake_libproc({}))
    )
    events = []

    def sample_memory_once(config: int) -> None:
        sampler_ = ServerSampler(
            events.append, config, f"http://127.0.0.1:{free_port()}", os.getpid(), http_hz=1
        )
        sampler_.start()
        until(
            lambda: any(isinstance(e, ProcessSample) and e.config_index == config for e in events)
        )
        sampler_.stop()

    for config in (0, 1):
        sample_memory_once(config)
    told = [e for e in events if isinstance(e, Notice) and "RSS" in e.text]
    assert len(told) == 1 and told[0].level == "warning"
    assert len([e for e in events if isinstance(e, ProcessSample)]) >= 2


def test_errno_of_a_refusal_is_kept():
    @RusageFunction
    def refuses(pid, flavor, buffer):
        ctypes.set_errno(errno.EPERM)
        return -1

    with pytest.raises(OSError) as caught:
        phys_footprint(1, refuses)
    assert caught.value.errno == errno.EPERM


def test_the_fingerprint_names_a_figure_that_is_not_the_rss(monkeypatch, tmp_path):
    here = hardware.fingerprint()
    assert here.process_memory is None and "process_memory" not in here.to_dict()
    call = fake_libproc({os.getpid(): 100})
    monkeypatch.setattr(hardware, "process_measure", lambda: choose_measure("darwin", lambda: call))
    on_a_mac = hardware.fingerprint()
    assert on_a_mac.process_memory == "physical footprint"
    made = build_session(
        tmp_path / "mac.session.sqlite",
        "[server]\nslots = 1\n[workload]\nrequests = 1\n",
        [Config([request(0)], startup_facts(1, 2048))],
        hardware=on_a_mac,
    )
    with open_session(made) as session:
        assert session.hardware.process_memory == "physical footprint"
