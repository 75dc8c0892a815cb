"""The watchdog used where there is no parent-death signal (macOS), or for a wrapper's
server group, exercised on any OS."""

from __future__ import annotations

import subprocess
import sys

import psutil

from tests.engine.waiting import ended, until


def test_watchdog_kills_the_child_group_when_the_parent_dies():
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    # A process group of its own, as servers have: a wrapper and the child it started.
    child = subprocess.Popen(
        ["sh", "-c", f"{sys.executable} -c 'import time; time.sleep(60)'; echo done"],
        start_new_session=True,
    )
    until(lambda: psutil.Process(child.pid).children(recursive=True), what="the wrapper's child")
    grandchildren = psutil.Process(child.pid).children(recursive=True)
    watchdog = subprocess.Popen(
        [sys.executable, "-m", "workbench.engine.server.watchdog", str(parent.pid), str(child.pid)]
    )
    try:
        assert child.poll() is None
        parent.kill()
        parent.wait()
        assert child.wait(timeout=10) != 0
        assert watchdog.wait(timeout=10) == 0
        assert grandchildren
        until(lambda: all(map(ended, grandchildren)), 5, "the grandchildren's end")
    finally:
        for proc in (parent, child, watchdog):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert not psutil.pid_exists(child.pid)
