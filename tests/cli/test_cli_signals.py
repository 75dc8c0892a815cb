"""Ctrl-C and SIGTERM end a run the same way: streams cancelled, server stopped, session kept."""

from __future__ import annotations

import signal

import psutil
import pytest

from tests.cli_process import start_run, stop, wait_for_finished_requests
from workbench.engine.store import open_session

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
    proc, out, log = start_run(EXPERIMENT, tmp_path)
    try:
        progress = wait_for_finished_requests(proc, out, log, count=1)
        proc.send_signal(sig)
        assert proc.wait(30) == 130, log.read_text()
    finally:
        stop(proc)
    assert not psutil.pid_exists(progress.server_pid)
    assert "cancelled" in log.read_text()
    with open_session(progress.session) as session:
        assert session.status == "cancelled"
        records = session.records(0)
        assert len(records) == 10  # finished, cut short, and never sent: all recorded
        assert any(r.ok for r in records)
        cut = [r for r in records if not r.ok]
        assert cut and all("cancelled" in r.error for r in cut)
        (summary,) = session.summaries()
    # The stop's doing, not the server's: counted as cancelled, none as failed.
    assert (summary.value("failed"), summary.value("cancelled")) == (0, len(cut))
    assert summary.value("ok") == len(records) - len(cut)


def test_a_second_and_third_signal_do_not_cut_the_cleanup_short(tmp_path):
    """Ctrl-C twice, then SIGTERM, once left the configuration 'running' for good, without
    its error or log tail; the cleanup now finishes whatever arrives meanwhile."""
    import time

    proc, out, log = start_run(EXPERIMENT, tmp_path)
    try:
        progress = wait_for_finished_requests(proc, out, log, count=1)
        for sig in (signal.SIGINT, signal.SIGINT, signal.SIGTERM):
            proc.send_signal(sig)
            time.sleep(0.01)
        assert proc.wait(60) == 130, log.read_text()
    finally:
        stop(proc)
    assert not psutil.pid_exists(progress.server_pid)
    with open_session(progress.session) as session:
        assert session.status == "cancelled"
        (config,) = session.configs
        assert (config.status, config.error) == ("cancelled", "cancelled by the user")
        assert config.log_tail
