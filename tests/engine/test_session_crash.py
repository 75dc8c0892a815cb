"""A workbench killed with SIGKILL mid-run: the server dies with it, the session keeps every
finished request and opens as incomplete."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from workbench.engine.session import open_session

pytestmark = pytest.mark.server

EXPERIMENT = """
name = "crash"
[server]
slots = 1
ctx = 2048
[workload]
requests = 12
max_tokens = 48
warmup = 0
"""


def _finished_requests(out: Path) -> tuple[Path | None, int, int | None]:
    sessions = list(out.glob("*.session.sqlite"))
    if not sessions:
        return None, 0, None
    try:
        with sqlite3.connect(sessions[0], timeout=1) as conn:
            done = conn.execute("SELECT count(*) FROM requests WHERE ok = 1").fetchone()[0]
            row = conn.execute("SELECT pid FROM configs WHERE pid IS NOT NULL").fetchone()
    except sqlite3.OperationalError:  # tables not created yet
        return sessions[0], 0, None
    return sessions[0], done, row[0] if row else None


def test_sigkill_mid_run_keeps_finished_requests_and_kills_the_server(tmp_path):
    experiment = tmp_path / "crash.toml"
    experiment.write_text(EXPERIMENT)
    out = tmp_path / "out"
    stderr = tmp_path / "stderr.txt"
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "workbench",
                "run",
                str(experiment),
                "--out",
                str(out),
                "--quiet",
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 120
        session, done, server_pid = None, 0, None
        while time.monotonic() < deadline and done < 2:
            assert proc.poll() is None, stderr.read_text()
            time.sleep(0.1)
            session, done, server_pid = _finished_requests(out)
        assert done >= 2 and server_pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # The parent-death signal (or the watchdog) takes the server down with the workbench.
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(server_pid).wait(timeout=10)
    assert not psutil.pid_exists(server_pid) or psutil.Process(server_pid).status() == "zombie"
    with open_session(session) as opened:
        assert opened.status == "incomplete"
        records = [r for r in opened.records(0) if r.ok]
        assert len(records) >= done
        assert all(len(r.chunks) == 48 and r.timings for r in records)
        (summary,) = opened.summaries()
        assert summary.value("ok") >= done
