"""The watchdog used where there is no parent-death signal (macOS), exercised on any OS."""

from __future__ import annotations

import subprocess
import sys

import psutil


def test_watchdog_kills_the_child_when_the_parent_dies():
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    watchdog = subprocess.Popen(
        [sys.executable, "-m", "workbench.engine.watchdog", str(parent.pid), str(child.pid)]
    )
    try:
        assert child.poll() is None
        parent.kill()
        parent.wait()
        assert child.wait(timeout=10) != 0
        assert watchdog.wait(timeout=10) == 0
    finally:
        for proc in (parent, child, watchdog):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert not psutil.pid_exists(child.pid)
