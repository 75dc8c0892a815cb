"""A run raises its own open-files limit: each stream is a socket, and a soft limit below
the run's streams (1,024 is usual) would fail the requests past it with "Too many open
files" instead of measuring them."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from workbench.engine.store import open_session
from workbench.mock_server import MockProcess as Mock

STREAMS = 96
SOFT = 64  # below the run's streams, with the interpreter's own files besides
EXPERIMENT = f"""name = "many"
[workload]
requests = {STREAMS}
concurrency = {STREAMS}
max_tokens = 4
warmup = 0
"""


def test_a_run_of_more_streams_than_the_soft_limit_measures_them_all(tmp_path):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 4 * STREAMS:
        pytest.skip(f"the hard open-files limit is {hard}")
    experiment = tmp_path / "many.toml"
    experiment.write_text(EXPERIMENT)
    out = tmp_path / "out"
    with Mock("--ttft-ms", "200", "--itl-ms", "5", "--tokens", "4") as mock:
        run = ["run", str(experiment), "--out", str(out), "--base-url", mock.url, "--quiet"]
        done = subprocess.run(
            [sys.executable, "-m", "workbench", *run],
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT, hard)),
        )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (session_path,) = out.glob("*.session.sqlite")
    with open_session(session_path) as session:
        records = session.records(0)
    assert len(records) == STREAMS and all(r.ok for r in records)
