"""Kill a server when the workbench that started it is gone.

Used where the kernel has no parent-death signal (macOS): ``python -m workbench.engine.watchdog
PARENT_PID CHILD_PID`` polls the parent and, once it has vanished, stops the child with SIGTERM
and then SIGKILL.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def watch(parent: int, child: int, interval_s: float = 0.25) -> None:
    while alive(child):
        if os.getppid() != parent and not alive(parent):
            for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 0.0)):
                try:
                    os.kill(child, sig)
                except ProcessLookupError:
                    return
                deadline = time.monotonic() + grace
                while time.monotonic() < deadline and alive(child):
                    time.sleep(0.05)
            return
        time.sleep(interval_s)


if __name__ == "__main__":
    watch(int(sys.argv[1]), int(sys.argv[2]))
