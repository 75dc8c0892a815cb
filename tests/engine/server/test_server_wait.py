"""Waiting for a server process to exit: the status, the timeout, and no lost exits.

``wait_for_exit`` replaces ``Popen.wait(timeout=...)`` in the stop path (on Linux through a
pidfd, so an exit is seen at once rather than at the next step of a doubling sleep); these
check it keeps ``Popen.wait``'s meaning, with plain processes instead of a server."""

from __future__ import annotations

import subprocess
import time

from workbench.engine.server.llama_server import wait_for_exit


def test_returns_the_exit_status():
    proc = subprocess.Popen(["sh", "-c", "exit 3"])
    assert wait_for_exit(proc, 10.0) == 3
    assert proc.returncode == 3  # reaped: no zombie left behind


def test_none_when_the_process_outlives_the_timeout():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        started = time.monotonic()
        assert wait_for_exit(proc, 0.05) is None
        assert time.monotonic() - started < 5.0
        assert wait_for_exit(proc, 0) is None  # zero only polls
    finally:
        proc.kill()
        proc.wait()
    assert wait_for_exit(proc, 1.0) == -9


def test_a_process_already_reaped_keeps_its_status():
    proc = subprocess.Popen(["sh", "-c", "exit 5"])
    proc.wait()
    assert wait_for_exit(proc, 1.0) == 5
    assert wait_for_exit(proc, 0) == 5
