"""Ctrl-C and SIGTERM end a run the same way: streams cancelled, server stopped, session kept."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time

import psutil
import pytest

from workbench.engine.session import open_session

pytestmark = pytest.mark.server

EXPERIMENT = """
name = "interrupted"
[server]
slots = 1
ctx = 2048
[workload]
requests = 10
max_tokens = 48
warmup = 0
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_cancels_cleanly(tmp_path, sig):
    experiment = tmp_path / "e.toml"
    experiment.write_text(EXPERIMENT)
    out = tmp_path / "out"
    log = tmp_path / "stdout.txt"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workbench", "run", str(experiment), "--out", str(out)],
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    server_pid = None
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.1)
            sessions = list(out.glob("*.session.sqlite"))
            if not sessions:
                continue
            try:
                with sqlite3.connect(sessions[0], timeout=1) as conn:
                    done = conn.execute("SELECT count(*) FROM requests").fetchone()[0]
                    row = conn.execute("SELECT pid FROM configs WHERE pid IS NOT NULL").fetchone()
            except sqlite3.OperationalError:
                continue
            if done >= 1 and row:
                server_pid = row[0]
                break
        assert server_pid is not None
        proc.send_signal(sig)
        assert proc.wait(30) == 130, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not psutil.pid_exists(server_pid)
    assert "cancelled" in log.read_text()
    with open_session(sessions[0]) as session:
        assert session.status == "cancelled"
        records = session.records(0)
        assert len(records) == 10  # finished, cut short, and never sent: all recorded
        assert any(r.ok for r in records)
        cut = [r for r in records if not r.ok]
        assert cut and all("cancelled" in r.error for r in cut)
