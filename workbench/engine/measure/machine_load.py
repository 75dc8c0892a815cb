"""What else used the machine during a repeat: the counters behind ``MachineLoad``.

Cumulative counters (CPU times, swap, memory stall time) are read when the repeat starts and
when it ends, so their differences are exact whatever the sampling rate; the figures that are
a state (CPU frequency, GPU processes) are sampled on the server sampler's own thread. The
workbench's CPU time is its own process tree's (the server it started, its client worker
processes, children that ended in between), so "other processes" is everything else.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from workbench.engine.figures.machine_load import MachineLoad

PSI_MEMORY = Path("/proc/pressure/memory")
MAX_PSI_BYTES = 4096
# System-wide CPU time that is no process's work: idle, waiting on I/O, a hypervisor's steal,
# and guest time (already counted in user time on Linux).
NOT_BUSY = ("idle", "iowait", "steal", "guest", "guest_nice")


def _busy_and_steal() -> tuple[float, float | None]:
    times = psutil.cpu_times()
    fields = times._asdict()
    busy = sum(v for name, v in fields.items() if name not in NOT_BUSY)
    return busy, fields.get("steal")


def tree_cpu_s(root: psutil.Process, extra: int | None) -> float:
    """CPU time of ``root``, its descendants and the process ``extra`` (the server, where it
    is not a descendant), each with its ended children's time."""
    members = {root.pid: root}
    with contextlib.suppress(psutil.Error):
        members |= {c.pid: c for c in root.children(recursive=True)}
    if extra is not None and extra not in members:
        with contextlib.suppress(psutil.Error):
            server = psutil.Process(extra)
            members[extra] = server
            members |= {c.pid: c for c in server.children(recursive=True)}
    total = 0.0
    for process in members.values():
        with contextlib.suppress(psutil.Error):
            t = process.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


def _swap() -> tuple[int, int] | None:
    with contextlib.suppress(Exception):
        swap = psutil.swap_memory()
        return int(swap.sin), int(swap.sout)
    return None


def memory_stall_s(text: str) -> float | None:
    """The ``some`` line's ``total`` (microseconds some task stalled on memory) of
    ``/proc/pressure/memory``, in seconds; None when the text has none."""
    for line in text.splitlines():
        if line.startswith("some "):
            for part in line.split()[1:]:
                name, _, value = part.partition("=")
                if name == "total" and value.isdigit():
                    return int(value) / 1e6
    return None


def _pressure() -> float | None:
    with contextlib.suppress(OSError), PSI_MEMORY.open("rb") as f:
        return memory_stall_s(f.read(MAX_PSI_BYTES).decode(errors="replace"))
    return None


def _freq_share() -> float | None:
    """Current over top CPU frequency, where the OS says both."""
    with contextlib.suppress(Exception):
        freq = psutil.cpu_freq()
        if freq is not None and freq.max and freq.max > 0 and freq.current > 0:
            return min(freq.current / freq.max, 1.0)
    return None


@dataclass
class _Counters:
    wall_ns: int
    busy_s: float
    steal_s: float | None
    own_s: float
    swap: tuple[int, int] | None
    stall_s: float | None


class MachineMeter:
    """From its creation to ``read``: what processes other than the workbench's tree (and the
    server ``server_pid``) used. ``judged`` False: the server runs elsewhere, and the figures
    say nothing of its machine."""

    def __init__(self, server_pid: int | None, judged: bool = True) -> None:
        self._own = psutil.Process()
        self._server_pid = server_pid
        self._judged = judged
        self._lowest_freq: float | None = None
        self._start = self._counters()

    def _counters(self) -> _Counters:
        busy, steal = _busy_and_steal()
        return _Counters(
            time.perf_counter_ns(),
            busy,
            steal,
            tree_cpu_s(self._own, self._server_pid),
            _swap(),
            _pressure(),
        )

    def sample(self) -> None:
        """The states a delta cannot give (called on the sampler's thread)."""
        if (share := _freq_share()) is not None:
            lowest = self._lowest_freq
            self._lowest_freq = share if lowest is None else min(lowest, share)

    def read(self, gpu_other_processes: int | None = None) -> MachineLoad:
        end = self._counters()
        start = self._start
        steal = None
        if end.steal_s is not None and start.steal_s is not None:
            steal = max(end.steal_s - start.steal_s, 0.0)
        swap_in = swap_out = None
        if end.swap is not None and start.swap is not None:
            swap_in = max(end.swap[0] - start.swap[0], 0)
            swap_out = max(end.swap[1] - start.swap[1], 0)
        stall = None
        if end.stall_s is not None and start.stall_s is not None:
            stall = max(end.stall_s - start.stall_s, 0.0)
        load_avg = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        return MachineLoad(
            wall_s=(end.wall_ns - start.wall_ns) / 1e9,
            cores=psutil.cpu_count() or 1,
            other_cpu_s=max((end.busy_s - start.busy_s) - (end.own_s - start.own_s), 0.0),
            steal_s=steal,
            load_avg=load_avg,
            swap_in_bytes=swap_in,
            swap_out_bytes=swap_out,
            memory_pressure_s=stall,
            cpu_freq_share=self._lowest_freq,
            gpu_other_processes=gpu_other_processes,
            judged=self._judged,
        )
