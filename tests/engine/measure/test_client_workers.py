"""A repeat sent by several client processes (``[workload] workers``): every request once,
named with its worker, its time from the one schedule, and every worker gone however the
repeat ends."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import itertools
import os
import signal
import time
from collections.abc import Iterator

import psutil
import pytest

from workbench.cli.main import main
from workbench.engine.base.errors import ExperimentError
from workbench.engine.config.experiment import RequestsWorkload, parse_experiment
from workbench.engine.events import FirstToken, RequestFinished
from workbench.engine.figures.per_request import percentile, request_metrics
from workbench.engine.measure.client_workers import (
    Job,
    WorkerLoads,
    WorkerLost,
    WorkerProcess,
    deal,
    jobs_for,
    places,
    run_in_workers,
)
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.measure.workload import plan_records
from workbench.engine.run.lifecycle import run_experiment
from workbench.engine.run.runner import RunOptions
from workbench.engine.store import open_session
from workbench.mock_server import MockProcess as Mock

WORKER = "workbench.engine.measure.worker_entry"


@pytest.fixture(scope="module")
def mock() -> Iterator[Mock]:
    server = Mock("--ttft-ms", "20", "--itl-ms", "5", "--tokens", "8")
    yield server
    server.stop()


def workers_alive() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if WORKER in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.Error:
            pass
    return found


def experiment(workload: str):
    return parse_experiment(f'name = "workers"\n[workload]\nmax_tokens = 8\n{workload}\n')


def test_the_setting_is_one_to_256_and_refused_for_conversations():
    assert RequestsWorkload().workers == 1
    assert experiment("workers = 4").configs()[0].workload.workers == 4
    for bad, said in (
        ("workers = 0", r"\[workload\] workers must be between 1 and 256"),
        ("workers = 257", r"\[workload\] workers must be between 1 and 256"),
        ("workers = 1.5", r"\[workload\] workers must be a whole number"),
        (
            'kind = "conversations"\nworkers = 2',
            r'\[workload\] workers is a field of kind = "requests" or arrival = "trace", not ',
        ),
    ):
        with pytest.raises(ExperimentError, match=said):
            experiment(bad)


def test_a_bad_workers_flag_is_one_line(tmp_path, capsys):
    code = main(
        ["run", "--workers", "0", "--base-url", "http://127.0.0.1:9", "--out", str(tmp_path)]
    )
    said = capsys.readouterr().err.strip()
    assert code != 0 and "\n" not in said
    assert "[workload] workers must be between 1 and 256 (client processes), got 0" in said


def test_requests_are_dealt_round_robin_and_a_later_turn_goes_with_the_one_before():
    assert deal(5, 2) == [[0, 2, 4], [1, 3]]
    assert deal(2, 4) == [[0], [1]]  # no worker left without a request
    # 2 follows 0, 3 follows 2: one session, one worker.
    assert deal(5, 2, [None, None, (0, 0.1), (2, 0.0), None]) == [[0, 2, 3, 4], [1]]
    assert places(5, 2) == [3, 2] and places(0, 3) == [0, 0, 0]


def test_the_limit_is_shared_out_and_no_worker_has_no_place():
    records = plan_records(0, 0, 0, 6, PromptSource())
    limited = RequestsWorkload(requests=6, concurrency=3, workers=4)
    jobs = jobs_for("http://127.0.0.1:9", None, limited, records, [0.0] * 6)
    assert [j.workload.concurrency for j in jobs] == [1, 1, 1]
    assert [[r.index for r in j.records] for j in jobs] == [[0, 3], [1, 4], [2, 5]]
    assert [r.worker for r in records] == [0, 1, 2, 0, 1, 2]
    unlimited = RequestsWorkload(requests=6, workers=2)
    jobs = jobs_for("http://127.0.0.1:9", None, unlimited, records, [0.0] * 6)
    assert [j.workload.concurrency for j in jobs] == [0, 0]
    assert [j.workload.effective_concurrency for j in jobs] == [3, 3]


def test_a_worker_shares_this_process_clock():
    """perf_counter_ns read in the worker falls between two reads here around the
    handshake: the two processes' timestamps compare directly."""

    async def handshake() -> tuple[int, int, int]:
        job = Job(0, "http://127.0.0.1:9", None, RequestsWorkload(), [], [], None, None, None)
        worker = WorkerProcess(job)
        before = time.perf_counter_ns()
        ready = await worker.start()
        after = time.perf_counter_ns()
        await worker.go(after)
        await worker.pump(lambda events: None)
        await worker.reap()
        worker.forget()
        return before, ready, after

    before, ready, after = asyncio.run(handshake())
    assert before < ready < after


def test_two_workers_send_every_request_once_on_one_schedule(tmp_path, mock):
    """Fixed arrivals at 100/s, dealt to two workers: each request once, its worker named,
    its intended time t0 + i / rate from one t0, the percentiles those of all records."""
    result = run_experiment(
        experiment('requests = 8\narrival = "fixed"\nrate = 100\nworkers = 2'),
        RunOptions(tmp_path, base_url=mock.url),
    )
    assert result.status == "complete"
    with open_session(result.session_path) as session:
        records = [r for r in session.records(0) if not r.warmup]
        assert result.summaries == session.summaries()
    assert sorted(r.index for r in records) == list(range(1, 9))
    assert all(r.ok for r in records)
    assert [r.worker for r in sorted(records, key=lambda r: r.index)] == [0, 1] * 4
    intended = [r.t_intended_ns for r in sorted(records, key=lambda r: r.index)]
    assert all(t is not None for t in intended)
    gaps = [b - a for a, b in itertools.pairwise(intended)]  # type: ignore[operator]
    assert all(abs(gap - 10_000_000) <= 1 for gap in gaps)
    run = result.summaries[0].runs[0]
    ttft = [m.ttft_s for r in records if (m := request_metrics(r)) is not None]
    assert (run.ttft_p50_s, run.ttft_p99_s) == (percentile(ttft, 50), percentile(ttft, 99))
    assert run.loop_busy is not None
    with (result.session_path.parent / "requests.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert sorted(row["worker"] for row in rows) == ["", "0", "0", "0", "0", "1", "1", "1", "1"]
    assert not workers_alive()


def test_one_worker_sends_from_the_runs_own_loop_as_before(tmp_path, mock):
    result = run_experiment(experiment("requests = 2"), RunOptions(tmp_path, base_url=mock.url))
    with open_session(result.session_path) as session:
        assert [r.worker for r in session.records(0)] == [None, None, None]
    with (result.session_path.parent / "requests.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {row["worker"] for row in rows} == {""}


def slow_repeat(mock_url: str, on_event, requests: int = 6):
    """Six long streams (2 s each) across two workers; every event goes to ``on_event``."""
    workload = RequestsWorkload(requests=requests, max_tokens=400, workers=2)
    records = plan_records(0, 0, 0, requests, PromptSource())
    finished: list[RequestFinished] = []

    def emit(event) -> None:
        if isinstance(event, RequestFinished):
            finished.append(event)
        on_event(event)

    run = run_in_workers(mock_url, None, workload, records, [0.0] * requests, emit, WorkerLoads())
    return run, records, finished


@pytest.fixture(scope="module")
def slow_mock() -> Iterator[Mock]:
    server = Mock("--ttft-ms", "10", "--itl-ms", "5", "--tokens", "400")
    yield server
    server.stop()


def test_a_cancel_ends_every_worker_and_records_every_request(slow_mock):
    async def cancelled() -> float:
        started = asyncio.Event()

        def on_event(event) -> None:
            if isinstance(event, FirstToken):
                started.set()

        coroutine, records, finished = slow_repeat(slow_mock.url, on_event)
        task = asyncio.create_task(coroutine)
        await asyncio.wait_for(started.wait(), 30)
        t = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert sorted(e.record.index for e in finished) == list(range(6))
        assert all(r.error and r.error.startswith("cancelled") for r in records)
        assert all(r.chunks for r in records)  # what came before the cancel is kept
        return time.monotonic() - t

    assert asyncio.run(cancelled()) < 5.0
    assert not workers_alive()


def test_a_worker_killed_mid_run_is_one_error_in_bounded_time(slow_mock):
    async def killed() -> tuple[str, float]:
        def on_event(event) -> None:
            if isinstance(event, FirstToken) and not killed_at:
                victim = next(p for p in workers_alive() if "worker_entry" in p.cmdline()[-1])
                os.kill(victim.pid, signal.SIGKILL)
                killed_at.append(time.monotonic())

        killed_at: list[float] = []
        coroutine, records, finished = slow_repeat(slow_mock.url, on_event)
        with pytest.raises(WorkerLost) as caught:
            await asyncio.wait_for(coroutine, 30)
        assert sorted(e.record.index for e in finished) == list(range(6))
        assert all(not r.ok and r.error for r in records)
        return str(caught.value), time.monotonic() - killed_at[0]

    message, took = asyncio.run(killed())
    assert "\n" not in message
    assert message.startswith("client worker ") and "killed by signal 9 mid-run" in message
    assert took < 10.0
    assert not workers_alive()


@pytest.mark.server
def test_two_workers_against_the_real_server(tmp_path, server_binary, model_path):
    text = (
        'name = "workers"\n[server]\nslots = 2\nctx = 2048\n'
        "[workload]\nrequests = 4\nmax_tokens = 8\nwarmup = 0\nworkers = 2\n"
    )
    result = run_experiment(parse_experiment(text), RunOptions(tmp_path))
    assert result.status == "complete"
    with open_session(result.session_path) as session:
        records = session.records(0)
    assert sorted(r.index for r in records) == [0, 1, 2, 3]
    assert all(r.ok and r.chunks for r in records)
    assert sorted(r.worker for r in records) == [0, 0, 1, 1]  # type: ignore[type-var]
    assert not workers_alive()


def test_the_windows_engine_process_sends_from_workers_too(tmp_path, mock):
    """The window runs the engine in a daemonic multiprocessing child, which may not have
    children of its own that way: the workers start as programs, so they run there too."""
    from workbench.engine.run.process_runner import ProcessRunner

    text = 'name = "window"\n[workload]\nrequests = 4\nmax_tokens = 8\nwarmup = 0\nworkers = 2\n'
    runner = ProcessRunner(parse_experiment(text), RunOptions(tmp_path, base_url=mock.url))
    runner.prepare()
    events = runner.bus.subscribe()
    runner.start()
    result = runner.wait(60.0)
    assert result is not None and result.status == "complete"
    finished = [e.record for e in events.drain() if isinstance(e, RequestFinished)]
    assert sorted((r.index, r.worker) for r in finished) == [(0, 0), (1, 1), (2, 0), (3, 1)]
    assert all(r.ok for r in finished)


def test_a_later_turn_of_a_trace_is_sent_by_its_sessions_worker_after_the_turn_before(mock):
    """Requests 1 and 3 follow 0 and 2 (a trace's later turns): each goes with the one it
    follows (not round-robin), due its delay after that one ended, on the same clock."""
    workload = RequestsWorkload(requests=4, max_tokens=8, workers=2)
    records = plan_records(0, 0, 0, 4, PromptSource())
    follows = [None, (0, 0.05), None, (2, 0.0)]
    asyncio.run(
        run_in_workers(
            mock.url, None, workload, records, [0.0, 0.0, 0.0, 0.0], lambda e: None,
            WorkerLoads(), follows,
        )
    )  # fmt: skip
    assert all(r.ok for r in records)
    assert [r.worker for r in records] == [0, 0, 1, 1]
    first, later, second, latest = records
    assert later.t_intended_ns == first.t_done_ns + 50_000_000  # type: ignore[operator]
    assert latest.t_intended_ns == second.t_done_ns
    assert later.t_submit_ns >= later.t_intended_ns  # type: ignore[operator]


def test_ctrl_c_ends_the_run_and_every_worker(tmp_path, slow_mock):
    """``workbench run --workers 2`` interrupted while its workers stream: the run ends
    cancelled, every request recorded, and no worker outlives it."""
    from tests.cli_process import start_run, stop

    text = 'name = "ctrl-c"\n[workload]\nrequests = 6\nmax_tokens = 400\nwarmup = 0\n'
    proc, out, log = start_run(text, tmp_path, "--base-url", slow_mock.url, "--workers", "2")
    try:
        deadline = time.monotonic() + 60
        while len(workers := _workers_of(proc.pid)) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130, log.read_text()
    finally:
        stop(proc)
    _, alive = psutil.wait_procs(workers, timeout=5)
    assert not alive
    (session_path,) = out.glob("*.session.sqlite")
    with open_session(session_path) as session:
        assert session.status == "cancelled"
        assert sorted(r.worker for r in session.records(0)) == [0, 0, 0, 1, 1, 1]  # type: ignore[type-var]


def _workers_of(pid: int) -> list[psutil.Process]:
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    found = []
    for child in children:
        with contextlib.suppress(psutil.Error):
            if WORKER in " ".join(child.cmdline()):
                found.append(child)
    return found


def test_a_worker_that_cannot_start_is_one_error_with_its_last_words(monkeypatch):
    from workbench.engine.measure import client_workers

    monkeypatch.setattr(client_workers, "ENTRY_MODULE", "workbench.no_such_module")
    workload = RequestsWorkload(requests=2, max_tokens=8, workers=2)
    records = plan_records(0, 0, 0, 2, PromptSource())
    finished: list[RequestFinished] = []
    # A worker that dies at once may be gone before its job is written (a loaded machine).
    with pytest.raises(WorkerLost, match=r"^client worker \d exited with status 1 (while "
                       r"preparing|before it was told): .*No module named "
                       r"workbench.no_such_module$"):  # fmt: skip
        asyncio.run(
            run_in_workers(
                "http://127.0.0.1:9", None, workload, records, [0.0, 0.0], finished.append,
                WorkerLoads(),
            )
        )  # fmt: skip
    assert sorted(e.record.index for e in finished) == [0, 1]
    assert all(r.error == "not finished: its client worker ended first" for r in records)
