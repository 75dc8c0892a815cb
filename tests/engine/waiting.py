"""Waiting for what other threads and processes do: as long as a busy machine needs, and no
longer than it takes, where a fixed sleep is either too short under load or wasted when idle."""

from __future__ import annotations

import time
from collections.abc import Callable

import psutil


def until(done: Callable[[], object], within_s: float = 10.0, what: str = "it") -> None:
    """Return once ``done()`` is true; fail the test if it is not within ``within_s``."""
    deadline = time.monotonic() + within_s
    while not done():
        assert time.monotonic() < deadline, f"{what} did not happen within {within_s:g} s"
        time.sleep(0.005)


def ended(proc: psutil.Process) -> bool:
    """Gone or a zombie: this container's init reaps orphans only every couple of seconds."""
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
