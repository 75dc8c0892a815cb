"""The child-process runner: merged token chunks, errors that keep their class."""

from __future__ import annotations

import pytest

from workbench.engine.base.errors import ModelFileError
from workbench.engine.base.records import RequestRecord, TokenChunk
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import FirstToken, RequestFinished, TokenChunkArrived
from workbench.engine.run.process_runner import ProcessRunner, coalesce
from workbench.engine.run.runner import RunOptions


def test_coalesce_merges_each_requests_chunks_and_keeps_everything_else_in_place():
    first = FirstToken(0, 0, 1, 5)
    done = RequestFinished(RequestRecord(0, 0, 2, "p"))
    events = [
        first,
        TokenChunkArrived(0, 0, 1, 5, "He"),
        TokenChunkArrived(0, 0, 2, 6, "Wo"),
        TokenChunkArrived(0, 0, 1, 7, "llo"),
        TokenChunkArrived(0, 0, 2, 8, "rld"),
        done,
    ]
    assert coalesce(events) == [
        first,
        TokenChunkArrived(0, 0, 1, 7, "Hello", count=2),
        TokenChunkArrived(0, 0, 2, 8, "World", count=2),
        done,
    ]
    assert coalesce([]) == []


def test_coalesce_keeps_a_run_of_reasoning_apart_from_the_answer_after_it():
    think = [TokenChunkArrived(0, 0, 1, t, "hm ", reasoning=True) for t in (1, 2)]
    answer = [TokenChunkArrived(0, 0, 1, t, "yes ") for t in (3, 4)]
    assert coalesce([*think, *answer]) == [
        TokenChunkArrived(0, 0, 1, 2, "hm hm ", count=2, reasoning=True),
        TokenChunkArrived(0, 0, 1, 4, "yes yes ", count=2),
    ]


def test_finished_requests_travel_without_chunks_when_the_server_counted_tokens():
    chunks = [TokenChunk(i, "x") for i in range(300)]
    counted = RequestRecord(0, 0, 1, "p", ok=True, usage={"completion_tokens": 300}, chunks=chunks)
    uncounted = RequestRecord(0, 0, 2, "p", ok=True, chunks=chunks)
    slim, kept = coalesce([RequestFinished(counted), RequestFinished(uncounted)])
    assert slim.record.chunks == [] and slim.record.output_tokens == (300, "usage")
    assert slim.record.t_submit_ns == counted.t_submit_ns and counted.chunks == chunks
    assert kept.record.chunks == chunks  # its count is its chunks


def test_an_error_while_preparing_comes_back_with_its_class(tmp_path):
    experiment = parse_experiment(f'[server]\nmodel = "{tmp_path / "missing.gguf"}"\n')
    runner = ProcessRunner(experiment, RunOptions(tmp_path / "out"))
    with pytest.raises(ModelFileError, match="model file not found"):
        runner.prepare()
    assert not (tmp_path / "out").exists()  # the window's run leaves no folder behind either


def test_the_child_runs_the_lifecycle_and_writes_the_tables(tmp_path, monkeypatch):
    """The window's surface (prepare, start, running, wait, bus, session_path, configs) over
    a child that takes the run through ``RunLifecycle``: the tables come back written."""
    from tests.fakes.sse_server import Behaviour, serve_in_thread
    from workbench.engine.events import ExperimentFinished
    from workbench.engine.run import lifecycle

    experiment = parse_experiment(
        'name = "child"\n[workload]\nrequests = 3\nmax_tokens = 4\nwarmup = 0\n'
    )
    with serve_in_thread(Behaviour(tokens=4)) as server:
        runner = ProcessRunner(experiment, RunOptions(tmp_path, base_url=server.base_url))
        runner.prepare()
        assert runner.session_path is not None and runner.session_path.parent == tmp_path
        assert [c.label for c in runner.configs] == [
            c.label for c in experiment.configs(external=True)
        ]
        events = runner.bus.subscribe()
        runner.start()
        events.wait(60.0)
        assert events.ended.is_set() and not runner.running  # the end woke the subscriber
        result = runner.wait(60.0)
    assert result is not None and result.status == "complete"
    assert result.tables is not None and result.tables.error is None
    assert result.tables.concurrency == tmp_path / "concurrency.csv"
    assert result.tables.concurrency.exists() and result.tables.requests.exists()
    assert isinstance(events.drain()[-1], ExperimentFinished)

    def never(session_path):
        raise AssertionError("the parent wrote the tables again")

    monkeypatch.setattr(lifecycle, "write_tables", never)  # the child's are kept as they are
    assert lifecycle.RunLifecycle(runner).finish() == result


FRONT_END = """
import sys, time
from pathlib import Path
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.run.process_runner import ProcessRunner
from workbench.engine.run.runner import RunOptions

experiment = parse_experiment('name = "left"\\n[workload]\\nrequests = 1\\nmax_tokens = 4\\n')
runner = ProcessRunner(experiment, RunOptions(Path(sys.argv[1]), base_url=sys.argv[2]))
runner.prepare()
print(runner._process.pid, runner.session_path, flush=True)
time.sleep(60)
"""


def test_the_engine_ends_its_run_when_the_front_end_is_gone(tmp_path):
    """A window killed while its run waits to start: the engine process (a fork server's
    child, whose parent process is that server) sees it go, closes the session and exits."""
    import subprocess
    import sys

    import psutil

    from tests.engine.waiting import ended, until
    from tests.fakes.sse_server import Behaviour, serve_in_thread
    from workbench.engine.store import open_session

    with (
        serve_in_thread(Behaviour(tokens=4)) as server,
        subprocess.Popen(
            [sys.executable, "-c", FRONT_END, str(tmp_path), server.base_url],
            stdout=subprocess.PIPE,
            text=True,
        ) as front_end,
    ):
        pid, session_path = front_end.stdout.readline().split()
        engine = psutil.Process(int(pid))
        assert engine.ppid() != front_end.pid  # the fork server's child
        front_end.kill()
        until(lambda: ended(engine), what="the engine's exit")
    with open_session(session_path) as session:
        assert session.status == "cancelled"
