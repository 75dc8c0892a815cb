"""A workbench killed with SIGKILL mid-run: the server dies with it, the session keeps every
finished request and opens as incomplete."""

from __future__ import annotations

import contextlib
import os
import signal

import psutil
import pytest

from tests.cli_process import start_run, stop, wait_for_finished_requests
from workbench.engine.store import open_session

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


def test_sigkill_mid_run_keeps_finished_requests_and_kills_the_server(tmp_path):
    proc, out, log = start_run(EXPERIMENT, tmp_path)
    try:
        progress = wait_for_finished_requests(proc, out, log, count=2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        stop(proc)
    # The parent-death signal (or the watchdog) takes the server down with the workbench.
    # A zombie is dead too: reaping it is the job of whatever init the machine runs.
    with contextlib.suppress(psutil.NoSuchProcess, psutil.TimeoutExpired):
        psutil.Process(progress.server_pid).wait(timeout=10)
    with contextlib.suppress(psutil.NoSuchProcess):
        assert psutil.Process(progress.server_pid).status() == psutil.STATUS_ZOMBIE
    sidecar = progress.session.with_name(progress.session.name + "-wal")
    before = [p.read_bytes() if p.exists() else None for p in (progress.session, sidecar)]
    with open_session(progress.session) as opened:
        assert opened.status == "incomplete"
        records = [r for r in opened.records(0) if r.ok]
        assert len(records) >= progress.finished_ok
        assert all(len(r.chunks) == 48 and r.timings for r in records)
        (summary,) = opened.summaries()
        assert summary.value("ok") >= progress.finished_ok
    after = [p.read_bytes() if p.exists() else None for p in (progress.session, sidecar)]
    assert after == before  # reading a session never writes to it


def test_a_row_sqlite_refuses_costs_only_itself(tmp_path):
    """An unforeseen value (here a time past SQLite's integers) must not stop the writer or
    lose the other requests of its batch: it becomes a notice."""
    from workbench.engine.base.records import Hardware, RequestRecord
    from workbench.engine.events import EventBus, ExperimentFinished, RequestFinished
    from workbench.engine.store import SessionWriter, create_session

    path = tmp_path / "s.session.sqlite"
    create_session(path, "odd", "", None, "external", None, Hardware(), 0)
    bus = EventBus()
    writer = SessionWriter(path, bus)
    good = RequestRecord(0, 0, 0, "p", t_submit_ns=1, ok=True)
    bad = RequestRecord(0, 0, 1, "p", t_submit_ns=2**70, ok=True)
    later = RequestRecord(0, 0, 2, "p", t_submit_ns=3, ok=True)
    for event in (RequestFinished(good), RequestFinished(bad), RequestFinished(later)):
        bus.publish(event)
    bus.publish(ExperimentFinished("complete"))
    writer.start()
    writer.join(10)
    assert writer.error is None
    with open_session(path) as session:
        assert [r.index for r in session.records(0)] == [0, 2]
        notices = session.notices()
    assert any("could not store a RequestFinished" in (n.text or "") for n in notices)
