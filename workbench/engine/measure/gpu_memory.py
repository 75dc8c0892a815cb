"""NVIDIA GPUs through NVML (the ``pynvml`` module of nvidia-ml-py): what the machine has, and
how much GPU memory the server's processes hold while a run goes.

NVML is started once per process, on first use (a sampler thread, or the fingerprint, never
the measuring loop: ``nvmlInit`` can take a second where the driver is not kept loaded), and
shut down at exit. Every call into it is treated as untrusted: values NVML marks as not
available (``usedGpuMemory`` is None, or the all-ones ``NVML_VALUE_NOT_AVAILABLE`` in builds
that pass it on) are no figure, names come as bytes or text depending on the version, and a
query that hangs holds up only its own thread.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.engine.base.records import Gpu
from workbench.engine.base.states import NoticeLevel

MAX_DEVICES = 64
NOT_AVAILABLE = 2**64 - 1  # NVML_VALUE_NOT_AVAILABLE_ulonglong
NVML_CLOCK_MEM = 2  # pynvml.NVML_CLOCK_MEM, for builds that lack the name
INSTALL_HINT = "pip install 'concurrency-workbench[nvidia]'"


def text(value: Any) -> str:
    """A name or version from NVML: bytes in nvidia-ml-py before 11.515, text after."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def nvidia_driver_present() -> bool:
    """Whether this machine has an NVIDIA driver (its /proc entry, or nvidia-smi on PATH):
    where it has none, missing NVML is nothing to mention."""
    return Path("/proc/driver/nvidia").exists() or shutil.which("nvidia-smi") is not None


class Nvml:
    """One NVML session for the whole process: the module and the device handles, or why
    there are none (``unavailable``, in words a notice can show)."""

    def __init__(self) -> None:
        self.module: Any = None
        self.handles: list[Any] = []
        self.unavailable: str | None = None
        try:
            import pynvml  # type: ignore[import-not-found]
        except ImportError:
            self.unavailable = f"nvidia-ml-py is not installed ({INSTALL_HINT})"
            return
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
            self.unavailable = f"NVML did not start ({describe(exc)})"
            return
        atexit.register(_shutdown, pynvml)
        try:
            count = min(int(pynvml.nvmlDeviceGetCount()), MAX_DEVICES)
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as exc:
            self.unavailable = f"NVML could not list the GPUs ({describe(exc)})"
            return
        if not self.handles:
            self.unavailable = "NVML lists no GPU"
            return
        self.module = pynvml

    def gpus(self) -> list[Gpu]:
        """Each GPU's name, memory, driver and memory bandwidth (a GPU NVML will not describe
        is left out)."""
        nvml, gpus = self.module, []
        for handle in self.handles:
            with contextlib.suppress(Exception):
                gpus.append(
                    Gpu(
                        name=text(nvml.nvmlDeviceGetName(handle)),
                        memory_bytes=int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
                        driver=text(nvml.nvmlSystemGetDriverVersion()),
                        memory_bandwidth_gbs=self.bandwidth_gbs(handle),
                    )
                )
        return gpus

    def bandwidth_gbs(self, handle: Any) -> float | None:
        """Peak memory bandwidth in GB/s: the highest memory clock times the bus width, twice
        (two transfers a clock, as NVML reports the clock of GDDR and HBM alike): 10501 MHz
        x 384 bits is the RTX 4090's 1008 GB/s, 2619 MHz x 5120 bits the H100 SXM's 3352.
        None where NVML does not say (older drivers and nvidia-ml-py versions lack
        ``nvmlDeviceGetMemoryBusWidth``)."""
        nvml = self.module
        try:
            clock_type = getattr(nvml, "NVML_CLOCK_MEM", NVML_CLOCK_MEM)
            clock_mhz = int(nvml.nvmlDeviceGetMaxClockInfo(handle, clock_type))
            bus_bits = int(nvml.nvmlDeviceGetMemoryBusWidth(handle))
        except Exception:
            return None
        if not (0 < clock_mhz <= 100_000 and 0 < bus_bits <= 16_384):
            return None  # not a figure a memory bus has
        return round(clock_mhz * 1e6 * 2 * bus_bits / 8 / 1e9, 1)

    def used_by(self, pids: Collection[int]) -> Usage:
        """What NVML says of these processes on every GPU (raises what NVML raises)."""
        listed, total, without_figure, others = False, 0, False, set()
        for handle in self.handles:
            for proc in self.module.nvmlDeviceGetComputeRunningProcesses(handle):
                if (pid := getattr(proc, "pid", None)) not in pids:
                    others.add(pid)
                    continue
                listed = True
                used = getattr(proc, "usedGpuMemory", None)
                if isinstance(used, bool) or not isinstance(used, int):
                    without_figure = True
                elif 0 <= used < NOT_AVAILABLE:
                    total += used
                else:
                    without_figure = True
        return Usage(listed, total if listed and not without_figure else None, len(others))


@dataclass(frozen=True)
class Usage:
    listed: bool  # NVML lists at least one of the processes
    bytes: int | None  # their GPU memory; None unless NVML gave a figure for each
    others: int = 0  # other processes computing on the GPUs (a busy machine's sign)


def describe(exc: Exception) -> str:
    """An NVML error as words (pynvml's ``NVMLError`` turns its code into them)."""
    with contextlib.suppress(Exception):
        words = str(exc)
        if words:
            return words
    return type(exc).__name__


def _shutdown(pynvml: Any) -> None:
    with contextlib.suppress(Exception):
        pynvml.nvmlShutdown()


_session: Nvml | None = None
_session_lock = threading.Lock()


def nvml() -> Nvml:
    """The process's NVML session, started on first use."""
    global _session
    with _session_lock:
        if _session is None:
            _session = Nvml()
        return _session


class GpuProbe:
    """GPU memory held by a server's processes, for one sampler.

    One query at a time in the whole process: if NVML has not answered the last one, a new
    sample is skipped rather than queued behind it, and a query slower than ``SLOW_S`` or an
    NVML error ends this probe's sampling. Nothing raises: ``sample`` returns bytes or None,
    and ``notices`` collects what a session should be told about a missing curve."""

    SLOW_S = 1.0
    _in_flight = threading.Lock()

    def __init__(self) -> None:
        self.notices: list[tuple[NoticeLevel, str]] = []  # (level, text)
        self.stopped = False
        self.samples = 0
        self._asked = False  # NVML was there to ask (never started by ``finish``)
        self._querying = False  # a query of this probe's has not returned
        self._skipped = 0
        self._listed_without_figure = False
        # The most other processes NVML listed on the GPUs at once; None: never asked.
        self.other_processes: int | None = None

    def sample(self, pids: Collection[int]) -> int | None:
        if self.stopped:
            return None
        session = nvml()
        if session.module is None:
            self.stopped = True
            if session.unavailable and nvidia_driver_present():
                self._notice(
                    NoticeLevel.WARNING, f"GPU memory is not sampled: {session.unavailable}"
                )
            elif session.unavailable and "not installed" not in session.unavailable:
                self._notice(NoticeLevel.INFO, f"GPU memory is not sampled: {session.unavailable}")
            return None
        self._asked = True
        if not self._in_flight.acquire(blocking=False):
            self._skipped += 1  # the last query has not returned: never queue behind it
            return None
        start = time.monotonic()
        self._querying = True
        try:
            usage = session.used_by(pids)
        except Exception as exc:
            self.stopped = True
            self._notice(
                NoticeLevel.WARNING, f"GPU memory sampling stopped: NVML failed ({describe(exc)})"
            )
            return None
        finally:
            self._querying = False
            self._in_flight.release()
        took = time.monotonic() - start
        if took > self.SLOW_S:
            self.stopped = True
            self._notice(
                NoticeLevel.WARNING,
                f"GPU memory sampling stopped: NVML took {took:.1f} s to list the GPU's processes",
            )
        self.other_processes = max(self.other_processes or 0, usage.others)
        if usage.listed and usage.bytes is None:
            self._listed_without_figure = True
        if usage.bytes is not None:
            self.samples += 1
        return usage.bytes

    def finish(self) -> None:
        """Say why a probe that asked NVML took no sample (called once its sampler stops)."""
        if self.stopped or self.samples or not self._asked:
            return
        if self._querying or self._skipped:
            self._notice(NoticeLevel.WARNING, "no GPU memory curve: an NVML query has not returned")
        elif self._listed_without_figure:
            self._notice(
                NoticeLevel.INFO,
                "no GPU memory curve: NVML lists the server's processes but gives no "
                "figure for them (NVML_VALUE_NOT_AVAILABLE: Windows WDDM, or a MIG slice)",
            )
        else:
            self._notice(
                NoticeLevel.INFO,
                "no GPU memory curve: NVML did not list the server's processes (a server "
                "on the CPU, or a container whose process ids are not the host's)",
            )

    def _notice(self, level: NoticeLevel, words: str) -> None:
        self.notices.append((level, words))
