"""``run --load-from``: a client worker on another machine through its agent. The agent's
``load`` job over pipes; the near side's ``RemoteWorker`` through a local subprocess "host"
(``WORKBENCH_AGENT_TRANSPORT=process``), one whose clock reads an hour ahead; a far worker
killed, garbage, an agent of protocol 1; and one run over the real sshd."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.engine.remote.test_agent import agent  # noqa: F401 (the agent over pipes)
from tests.engine.remote.test_over_ssh import far_workbench
from tests.sshd import SshServer
from workbench import __version__
from workbench.cli.main import main
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.records import RequestRecord, TokenChunk
from workbench.engine.config.experiment import RequestsWorkload
from workbench.engine.events import FirstToken, RequestFinished
from workbench.engine.measure.client_workers import (
    Job,
    WorkerLoads,
    WorkerLost,
    jobs_for,
    run_in_workers,
)
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.measure.workload import plan_records
from workbench.engine.remote import wire
from workbench.engine.remote.load_worker import RemoteWorker, load_workers, on_this_clock
from workbench.engine.remote.protocol import PROTOCOL, ProtocolError, parse
from workbench.engine.remote.targets import TRANSPORT_VARIABLE, ProcessTarget
from workbench.engine.store import open_session
from workbench.mock_server import MockProcess as Mock

pytestmark = pytest.mark.timeout(120)

HERE = Path(__file__).parent
SHIFTED = HERE / "shifted_agent.py"
FAR = [sys.executable, "-m", "workbench"]  # this checkout's workbench, as the far one
SHIFT_S = 3600.0


@pytest.fixture(scope="module")
def mock() -> Iterator[Mock]:
    server = Mock("--ttft-ms", "20", "--itl-ms", "5", "--tokens", "8")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def slow_mock() -> Iterator[Mock]:
    server = Mock("--ttft-ms", "10", "--itl-ms", "5", "--tokens", "400")
    yield server
    server.stop()


@pytest.fixture
def by_process(monkeypatch):
    monkeypatch.setenv(TRANSPORT_VARIABLE, "process")


def job(url: str, count: int, max_tokens: int = 8, worker: int = 1) -> Job:
    workload = RequestsWorkload(requests=count, max_tokens=max_tokens)
    records = plan_records(0, 0, 0, count, PromptSource())
    [one] = jobs_for(url, None, workload, records, [0.01 * i for i in range(count)])
    for record in one.records:
        record.worker = worker
    return dataclasses.replace(one, worker=worker)


def agents_alive() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.cmdline()[-1:] == ["agent"] and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.Error:
            pass
    return found


# -- the far side: the agent's load job -------------------------------------------------------


def test_the_agent_runs_a_load_job_ready_go_events_done(agent, mock):  # noqa: F811
    agent.send("hello", protocol=PROTOCOL, version=__version__)
    assert agent.receive().kind == "hello"
    sent = time.perf_counter_ns()
    agent.send("load", job=wire.plain(job(mock.url, 3)))
    ready = agent.receive()
    assert ready.kind == "ready" and sent < ready.t_ns < time.perf_counter_ns()
    t0 = time.perf_counter_ns() + 20_000_000
    agent.send("go", t0_ns=t0)
    finished: list[RequestRecord] = []
    while (message := agent.receive()).kind == "events":
        for event in message.events:
            if isinstance(event, RequestFinished):
                finished.append(event.record)
    assert message.kind == "done"
    assert message.load.wall_s > 0
    assert sorted(r.index for r in finished) == [0, 1, 2]
    assert all(r.ok and r.worker == 1 for r in finished)
    assert [r.t_intended_ns for r in finished] == [t0, t0 + 10_000_000, t0 + 20_000_000]
    assert agent.end() == 0


def test_a_cancel_ends_the_load_job_with_every_request_sent_back(agent, slow_mock):  # noqa: F811
    agent.send("hello", protocol=PROTOCOL, version=__version__)
    agent.receive()
    agent.send("load", job=wire.plain(job(slow_mock.url, 2, max_tokens=400)))
    assert agent.receive().kind == "ready"
    agent.send("go", t0_ns=time.perf_counter_ns())
    finished: list[RequestRecord] = []
    cancelled = False
    while (message := agent.receive()).kind == "events":
        events = message.events
        if not cancelled and any(isinstance(e, FirstToken) for e in events):
            agent.send("cancel")
            cancelled = True
        finished += [e.record for e in events if isinstance(e, RequestFinished)]
    assert message.kind == "done" and cancelled
    assert sorted(r.index for r in finished) == [0, 1]
    assert all(r.error and r.error.startswith("cancelled") for r in finished)


def test_the_agent_refuses_a_load_job_out_of_bounds(agent, mock):  # noqa: F811
    agent.send("hello", protocol=PROTOCOL, version=__version__)
    agent.receive()
    good = wire.plain(job(mock.url, 2))
    for change, said in (
        ({"workload": {**good["workload"], "workers": 0}}, "load.job.workload.workers must be"),
        ({"offsets": [0.0]}, "an offset from t0 for each request"),
        ({"follows": [None, [1, 0.0]]}, "a later turn follows an earlier request"),
        ({"records": "rm -rf /"}, "a message: load.job.records must be a list, got 'rm -rf /'"),
    ):
        agent.send("load", job={**good, **change})
        answer = agent.receive()
        assert answer.kind == "error" and said in answer.text, answer
    assert agent.end() == 0


# -- the near side: a far clock's times on this one ----------------------------------------------


def test_a_far_record_on_this_clock_keeps_every_duration():
    record = RequestRecord(
        0, 0, 3, "p", t_intended_ns=1_000, t_scheduled_ns=1_010, t_ready_ns=1_020,
        connect_ns=77, t_connected_ns=1_005, t_submit_ns=1_030, t_first_token_ns=1_500,
        t_first_answer_ns=1_600, t_last_token_ns=1_900, t_done_ns=2_000,
        chunks=[TokenChunk(1_500, "a"), TokenChunk(1_900, "b")],
    )  # fmt: skip
    here = on_this_clock(record, 900, "far")
    times = [f.name for f in dataclasses.fields(record) if f.name.startswith("t_")]
    assert all(getattr(here, t) == getattr(record, t) - 900 for t in times)
    assert here.connect_ns == 77  # a duration, not a clock reading
    assert [c.t_ns for c in here.chunks] == [600, 1_000]
    for a, b in itertools.combinations(times, 2):
        assert getattr(here, b) - getattr(here, a) == getattr(record, b) - getattr(record, a)
    with pytest.raises(ProtocolError, match="a time no clock reads"):
        on_this_clock(record, 10_000, "far")


def run_load_from(tmp_path: Path, url: str, *flags: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "experiment.toml"
    path.write_text(
        'name = "spread"\n[workload]\nrequests = 8\narrival = "fixed"\nrate = 50\n'
        "max_tokens = 8\nwarmup = 0\n"
    )
    return subprocess.run(
        [
            sys.executable, "-m", "workbench", "run", str(path), "--out", str(tmp_path / "out"),
            "--base-url", url, *flags,
        ],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, TRANSPORT_VARIABLE: "process"},
    )  # fmt: skip


def far_records(log: Path) -> dict[int, RequestRecord]:
    """What the far side measured, on its own clock: the RequestFinished it sent."""
    found = {}
    for line in log.read_bytes().splitlines():
        for event in getattr(parse(line, "kind"), "events", []):
            if isinstance(event, RequestFinished):
                found[event.record.index] = event.record
    return found


def test_a_run_loads_from_another_machine_on_one_clock(tmp_path, mock):
    """The far clock an hour ahead: every request once, workers 0 and 1, intended times of
    the fixed arrivals still 20 ms apart across both, and each far request's times those
    the far side measured less one constant (its durations unchanged)."""
    log = tmp_path / "far.log"
    far = shlex.join([sys.executable, str(SHIFTED), str(SHIFT_S), str(log)])
    done = run_load_from(tmp_path, mock.url, "--load-from", "far1", "--remote-workbench", far)
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    offset = r"client worker 1 on far1: clock offset \+3(599|600)\d{3}\.\d{3} ms \(round trip "
    assert re.search(offset, said), said
    [path] = (tmp_path / "out").glob("*.session.sqlite")
    with open_session(path) as session:
        records = sorted(session.records(0), key=lambda r: r.index)
    assert [r.index for r in records] == list(range(8)) and all(r.ok for r in records)
    assert [r.worker for r in records] == [0, 1] * 4
    intended = [r.t_intended_ns for r in records]
    gaps = [b - a for a, b in itertools.pairwise(intended)]  # type: ignore[operator]
    assert all(abs(gap - 20_000_000) <= 1 for gap in gaps)
    measured = far_records(log)
    assert sorted(measured) == [1, 3, 5, 7]
    shift = measured[1].t_submit_ns - records[1].t_submit_ns  # type: ignore[operator]
    assert abs(shift - SHIFT_S * 1e9) < 5_000_000
    for here in records[1::2]:  # every time of every far request less the one constant
        expected = on_this_clock(measured[here.index], shift, "far1")
        assert dataclasses.replace(here, chunks=[]) == dataclasses.replace(expected, chunks=[])
        assert [c.t_ns for c in here.chunks] == [c.t_ns for c in expected.chunks]


def test_a_far_worker_killed_mid_run_is_one_error_in_bounded_time(slow_mock):
    async def killed() -> tuple[str, float, list[RequestRecord]]:
        killed_at: list[float] = []

        def emit(event) -> None:
            if isinstance(event, FirstToken) and not killed_at:
                for far in agents_alive():
                    os.kill(far.pid, signal.SIGKILL)
                killed_at.append(time.monotonic())

        workload = RequestsWorkload(requests=4, max_tokens=400)
        records = plan_records(0, 0, 0, 4, PromptSource())
        far = functools.partial(RemoteWorker, ProcessTarget("far1"), FAR)
        run = run_in_workers(
            slow_mock.url, None, workload, records, [0.0] * 4, emit, WorkerLoads(),
            elsewhere=[far],
        )  # fmt: skip
        with pytest.raises(WorkerLost) as caught:
            await asyncio.wait_for(run, 30)
        return str(caught.value), time.monotonic() - killed_at[0], records

    message, took, records = asyncio.run(killed())
    assert message.startswith("client worker 1 on far1 was lost mid-run: the connection to far1")
    assert "\n" not in message
    assert took < 10.0
    assert all(not r.ok and r.error for r in records)
    assert not agents_alive()


GARBAGE_MID_RUN = """
import json, sys, time
def send(**m):
    sys.stdout.write(json.dumps(m) + "\\n"); sys.stdout.flush()
for line in sys.stdin:
    op = json.loads(line)
    if op["op"] == "hello":
        send(kind="hello", protocol=PROTOCOL, version="9.9.9", hostname="fake")
    elif op["op"] == "ping":
        send(kind="pong", seq=op["seq"], t_ns=time.perf_counter_ns())
    elif op["op"] == "load":
        send(kind="ready", t_ns=time.perf_counter_ns())
    elif op["op"] == "go":
        print("\\x1b[2Jnot the protocol", flush=True)
"""


def test_garbage_from_a_far_worker_is_one_clear_error(mock):
    async def garbage() -> str:
        script = GARBAGE_MID_RUN.replace("PROTOCOL", str(PROTOCOL))
        far = RemoteWorker(ProcessTarget("far1"), [sys.executable, "-c", script], job(mock.url, 2))
        try:
            await far.start()
            await far.go(time.perf_counter_ns())
            with pytest.raises(ProtocolError) as caught:
                await asyncio.wait_for(far.pump(lambda events: None), 30)
            return str(caught.value)
        finally:
            far.kill()
            far.forget()

    said = asyncio.run(garbage())
    assert said.startswith("far1 sent something that is not the agent's protocol: not a message")
    assert "\x1b" not in said and "\n" not in said


OLD_AGENT = """
import json, sys
for line in sys.stdin:
    if json.loads(line)["op"] == "hello":
        print(json.dumps({"kind": "hello", "protocol": 1, "version": "0.1.0"}), flush=True)
"""


def test_an_agent_of_protocol_1_is_refused_before_the_run(tmp_path, capsys, by_process):
    old = shlex.join([sys.executable, "-c", OLD_AGENT])
    with pytest.raises(
        WorkbenchError, match=f"far1: workbench 0.1.0 there.*protocol 1 vs {PROTOCOL}"
    ):
        load_workers(["far1"], shlex.split(old))
    code = main(
        ["run", "--base-url", "http://127.0.0.1:9", "--out", str(tmp_path / "out"),
         "--requests", "2", "--load-from", "far1", "--remote-workbench", old]
    )  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code != 0 and "\n" not in err and "protocol 1 vs 2" in err
    assert not (tmp_path / "out").exists()


def test_load_from_flags_are_checked_before_anything_starts(tmp_path, capsys, by_process):
    for flags, said in (
        (["--load-from", "a,,b"], "--load-from takes SSH destinations separated by commas"),
        (["--load-from", "local"], "--load-from local: this machine's own client workers"),
        (["--load-from", "far1", "--host", "gpubox"], "--load-from is for a run from this"),
    ):
        code = main(["run", "--requests", "2", "--out", str(tmp_path / "out"), *flags])
        err = capsys.readouterr().err.strip()
        assert code != 0 and said in err and "\n" not in err, err


@pytest.mark.ssh
@pytest.mark.timeout(300)
def test_a_run_loads_from_a_machine_over_ssh(ssh_env: SshServer, tmp_path, mock):
    path = tmp_path / "experiment.toml"
    path.write_text('name = "ssh"\n[workload]\nrequests = 6\nmax_tokens = 8\nwarmup = 0\n')
    done = subprocess.run(
        [
            sys.executable, "-m", "workbench", "run", str(path), "--out", str(tmp_path / "out"),
            "--base-url", mock.url, "--load-from", "wbtest",
            "--remote-workbench", far_workbench(tmp_path),
        ],
        capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "client worker 1 on wbtest: clock offset" in " ".join(done.stdout.split())
    [session_path] = (tmp_path / "out").glob("*.session.sqlite")
    with open_session(session_path) as session:
        records = sorted(session.records(0), key=lambda r: r.index)
    assert [r.index for r in records] == list(range(6)) and all(r.ok for r in records)
    assert [r.worker for r in records] == [0, 1] * 3
