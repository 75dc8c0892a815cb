"""A CPU hog that is no descendant of the test process: what a busy machine's other
processes are. Started through a shell that exits at once, so the workbench under test (this
process, or a child) cannot count it as its own."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

HOG = "while 1: pass"


@contextlib.contextmanager
def cpu_hog(processes: int = 2) -> Iterator[list[int]]:
    """``processes`` busy loops (one per core on this project's two-core machine)."""
    line = " ".join(
        f"{sys.executable!r} -c {HOG!r} >/dev/null 2>&1 & echo $!;" for _ in range(processes)
    )
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True).stdout
    pids = [int(p) for p in out.split()]
    try:
        yield pids
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
