"""Kill a server when the workbench that started it is gone.

``python -m workbench.engine.server.watchdog PARENT_PID GROUP_ID`` polls the parent and, once it has
vanished, stops the server's whole process group with SIGTERM and then SIGKILL. Used where the
kernel has no parent-death signal (macOS), and on Linux when the server binary is a wrapper
that started llama-server as its own child: the parent-death signal reaches only the direct
child, the wrapper, and its llama-server would be orphaned.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable

import psutil


def exists(target: int, send: Callable[[int, int], None] = os.kill) -> bool:
    """Whether a process (``os.kill``) or a process group (``os.killpg``) is there."""
    try:
        send(target, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_alive(group: int) -> bool:
    return exists(group, os.killpg)


def group_members(group: int) -> list[psutil.Process]:
    """The running processes of a process group: what is left of a server.

    Zombies do not count. A signalled server whose parent is gone lingers as one until init
    reaps it, which some container inits do only every few seconds; the group still answers
    ``killpg(group, 0)`` then, and waiting for it would spend a whole grace period on
    processes already dead.
    """
    members = []
    for candidate in psutil.process_iter():
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getpgid(candidate.pid) == group and candidate.status() != psutil.STATUS_ZOMBIE:
                members.append(candidate)
    return members


def watch(parent: int, group: int, interval_s: float = 0.25) -> None:
    while group_alive(group):
        if os.getppid() != parent and not exists(parent):
            for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 0.0)):
                try:
                    os.killpg(group, sig)
                except ProcessLookupError:
                    return
                deadline = time.monotonic() + grace
                while time.monotonic() < deadline and group_members(group):
                    time.sleep(0.05)
            return
        time.sleep(interval_s)


if __name__ == "__main__":
    watch(int(sys.argv[1]), int(sys.argv[2]))
