"""The memory a process holds, counted the way its platform's own monitor counts it.

On macOS that is the physical footprint (Activity Monitor's "Memory" column), not the RSS:
the Metal buffers a server offloads to the GPU live in the same unified memory, and the
footprint counts them while the RSS leaves most of them out. macOS gives it through
``proc_pid_rusage`` in libproc (``ri_phys_footprint``), which psutil does not expose, so it is
read here with ctypes. Everywhere else, and on a Mac where libproc will not answer, the
measure is the RSS, and the reason for the fallback is kept so that a session can say which
figure its memory curve is.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil

RUSAGE_INFO_V2 = 2
LIBPROC = "/usr/lib/libproc.dylib"


class RusageInfoV2(ctypes.Structure):
    """``struct rusage_info_v2`` of macOS's <sys/resource.h>, field for field."""

    _fields_ = [
        ("ri_uuid", ctypes.c_uint8 * 16),
        ("ri_user_time", ctypes.c_uint64),
        ("ri_system_time", ctypes.c_uint64),
        ("ri_pkg_idle_wkups", ctypes.c_uint64),
        ("ri_interrupt_wkups", ctypes.c_uint64),
        ("ri_pageins", ctypes.c_uint64),
        ("ri_wired_size", ctypes.c_uint64),
        ("ri_resident_size", ctypes.c_uint64),
        ("ri_phys_footprint", ctypes.c_uint64),
        ("ri_proc_start_abstime", ctypes.c_uint64),
        ("ri_proc_exit_abstime", ctypes.c_uint64),
        ("ri_child_user_time", ctypes.c_uint64),
        ("ri_child_system_time", ctypes.c_uint64),
        ("ri_child_pkg_idle_wkups", ctypes.c_uint64),
        ("ri_child_interrupt_wkups", ctypes.c_uint64),
        ("ri_child_pageins", ctypes.c_uint64),
        ("ri_child_elapsed_abstime", ctypes.c_uint64),
        ("ri_diskio_bytesread", ctypes.c_uint64),
        ("ri_diskio_byteswritten", ctypes.c_uint64),
    ]


# int proc_pid_rusage(int pid, int flavor, rusage_info_t *buffer): 0, or -1 with errno set.
RusageCall = Callable[[int, int, Any], int]


def phys_footprint(pid: int, proc_pid_rusage: RusageCall) -> int:
    """The physical footprint of ``pid`` in bytes. Raises ``OSError`` when macOS refuses
    (a process gone, or not this user's)."""
    info = RusageInfoV2()
    if proc_pid_rusage(pid, RUSAGE_INFO_V2, ctypes.byref(info)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"proc_pid_rusage({pid}) failed (errno {errno})")
    return int(info.ri_phys_footprint)


def load_proc_pid_rusage() -> RusageCall:
    """libproc's ``proc_pid_rusage`` (macOS only: raises ``OSError`` elsewhere)."""
    function = ctypes.CDLL(LIBPROC, use_errno=True).proc_pid_rusage
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(RusageInfoV2)]
    function.restype = ctypes.c_int
    return function  # type: ignore[no-any-return]


@dataclass(frozen=True)
class MemoryMeasure:
    """How a process's memory is read, and what the figure is called."""

    name: str  # "physical footprint" or "RSS"
    read: Callable[[psutil.Process], int]
    fallback_reason: str | None = None  # why not the platform's own figure

    @property
    def notice(self) -> str | None:
        """What a session should say about its memory curve; None where RSS is the platform's
        own figure (Linux, Windows)."""
        if self.fallback_reason is not None:
            return f"process memory is the RSS, not the physical footprint: {self.fallback_reason}"
        if self.name == FOOTPRINT:
            return (
                "process memory is the physical footprint (what Activity Monitor shows, "
                "Metal buffers included), not the RSS"
            )
        return None


FOOTPRINT = "physical footprint"


def _rss(process: psutil.Process) -> int:
    return int(process.memory_info().rss)


RSS = MemoryMeasure("RSS", _rss)


def choose_measure(
    platform: str = sys.platform, load: Callable[[], RusageCall] = load_proc_pid_rusage
) -> MemoryMeasure:
    """The physical footprint on macOS when libproc answers for this very process; the RSS
    otherwise, with the reason on a Mac."""
    if platform != "darwin":
        return RSS
    try:
        call = load()
        phys_footprint(os.getpid(), call)
    except (OSError, AttributeError) as exc:  # no libproc, no such symbol, or refused
        return MemoryMeasure("RSS", _rss, f"libproc's proc_pid_rusage did not answer ({exc})")

    def footprint(process: psutil.Process) -> int:
        try:
            return phys_footprint(process.pid, call)
        except OSError:
            if not process.is_running():
                raise psutil.NoSuchProcess(process.pid) from None
            raise psutil.AccessDenied(process.pid) from None

    return MemoryMeasure(FOOTPRINT, footprint)


@functools.cache
def process_measure() -> MemoryMeasure:
    """This machine's measure, chosen once per process."""
    return choose_measure()
