"""The workbench against hostile servers: every mode ends within its deadline, under a memory
ceiling, with a specific error, and the requests that finished before the fault are kept.

One fake server on 127.0.0.1 (``tests/fakes/sse_server.py``); in each mode the first request
is answered normally and the others meet the fault, so each run shows both sides. Every
loop in the fake is bounded in count, and each run in time.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.fakes.sse_server import Behaviour, FakeServer
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.run.lifecycle import run_experiment
from workbench.engine.run.runner import RunOptions
from workbench.engine.store import open_session

DEADLINE_S = 30.0
MEMORY_CEILING_MB = 300  # growth of this process's RSS over one run
EXPERIMENT = (
    'name = "hostile"\n[workload]\nrequests = 3\nconcurrency = 3\nmax_tokens = 8\n'
    "warmup = 0\nrequest_timeout_s = {timeout_s}\n"
)
TIMEOUT_S = 2.0  # the faulty requests end at their fault, long before this
STALL_TIMEOUT_S = 0.25  # a stalled stream waits all of it; a normal answer takes milliseconds
NORMAL = Behaviour(tokens=8)

# mode: (the faulty answer, what the faulty requests' error says; None: they succeed)
MODES: dict[str, tuple[Behaviour, str | None]] = {
    "garbage-sse": (Behaviour(tokens=8, malformed_after=3), "malformed stream: event data"),
    "non-utf8": (Behaviour(tokens=4, raw_events=(b"data: \xff\xfe\n\n",)), "not JSON"),
    "endless-tokens": (Behaviour(tokens=1_000_000), "more than 96 token chunks"),
    "huge-line": (Behaviour(tokens=2, texts=("ok ", "x" * 3_000_000)), "a line longer than"),
    "huge-error-body": (
        Behaviour(status=500, error_body="E" * 65536, error_body_repeats=50_000),
        "HTTP 500: EEEE",
    ),
    "slow-loris": (Behaviour(tokens=8, stall_after=2), "timed out after 0.25 s"),
    "odd-json-values": (
        Behaviour(tokens=4, completion_tokens=2**70, finish_reason={"why": [1, 2]}),
        None,
    ),
    "html-page": (Behaviour(html="<html><body>It works!</body></html>"), "without [DONE]"),
    "redirect-elsewhere": (
        Behaviour(status=302, error_body="", extra_headers=("Location: http://10.1.2.3/",)),
        "HTTP 302",
    ),
    "too-many-requests": (
        Behaviour(
            status=429, error_body='{"error": "slow down"}', extra_headers=("Retry-After: 30",)
        ),
        "HTTP 429",
    ),
}


def one_normal(faulty: Behaviour) -> Any:
    """The first request (prompt 'Request 0. ...') normal, the others faulty."""
    return lambda body: NORMAL if "Request 0." in str(body) else faulty


def run_against(server: FakeServer, folder: Path, timeout_s: float = TIMEOUT_S) -> Path:
    experiment = parse_experiment(EXPERIMENT.format(timeout_s=timeout_s))
    result = run_experiment(experiment, RunOptions(folder, base_url=server.base_url))
    assert result.status == "complete", result.error
    return result.session_path


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_a_hostile_server_costs_bounded_time_and_memory(mode: str, tmp_path: Path) -> None:
    faulty, error = MODES[mode]
    timeout_s = TIMEOUT_S if faulty.stall_after is None else STALL_TIMEOUT_S
    process = psutil.Process()
    rss_before = process.memory_info().rss
    async with FakeServer(one_normal(faulty)) as server:
        started = time.monotonic()
        session_path = await asyncio.wait_for(
            asyncio.to_thread(run_against, server, tmp_path, timeout_s), DEADLINE_S
        )
        took = time.monotonic() - started
    grown_mb = (process.memory_info().rss - rss_before) / 2**20
    assert took < DEADLINE_S and grown_mb < MEMORY_CEILING_MB, (took, grown_mb)
    with open_session(session_path) as session:
        records = sorted(session.records(0), key=lambda r: r.index)
    assert len(records) == 3
    first, *others = records
    assert first.ok and first.output_tokens == (8, "usage")  # finished before any fault
    for record in others:
        if error is None:
            assert record.ok, record.error
        else:
            assert not record.ok and record.error is not None and error in record.error


async def test_endless_metrics_and_slots_do_not_disturb_a_run(tmp_path: Path) -> None:
    async with FakeServer(NORMAL, endless_paths=("/metrics", "/slots")) as server:
        session_path = await asyncio.wait_for(
            asyncio.to_thread(run_against, server, tmp_path), DEADLINE_S
        )
    with open_session(session_path) as session:
        assert all(r.ok for r in session.records(0))
        assert session.samples("metrics_samples", 0) == []
