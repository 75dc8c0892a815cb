"""The run lifecycle: the same steps for the terminal, the window's engine process, the tests
and the benches; tables written once however a run ends; a cleanup no signal cuts short."""

from __future__ import annotations

import csv
import inspect
import os
import signal
import threading
import time
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.sse_server import Behaviour, serve_in_thread
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import EventBus, FirstToken, Subscription
from workbench.engine.run import lifecycle as lifecycle_module
from workbench.engine.run.lifecycle import RunLifecycle, Runner, run_experiment
from workbench.engine.run.process_runner import ProcessRunner
from workbench.engine.run.runner import ExperimentRunner, RunOptions, RunResult, RunTables
from workbench.engine.store import open_session

EXPERIMENT = 'name = "cycle"\n[workload]\nrequests = 3\nmax_tokens = 4\nwarmup = 0\n'
SLOW = 'name = "slow"\n[workload]\nrequests = 4\nmax_tokens = 400\nwarmup = 0\n'


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def unlike_a_runner(runner: object) -> list[str]:
    """How ``runner`` differs from ``Runner``: a member missing, a property that is a method
    (``if runner.running`` would always be true) or holds a value of another type, a method
    that is not one or takes other parameters. ``isinstance`` against the Protocol checks
    only that each name is there."""
    differences = []
    for name, member in vars(Runner).items():
        if name.startswith("_"):
            continue
        if not hasattr(runner, name):
            differences.append(f"{name}: missing")
        elif isinstance(member, property):
            value = getattr(runner, name)
            wanted = typing.get_type_hints(member.fget)["return"]
            if inspect.ismethod(value) or not isinstance(value, kinds_of(wanted)):
                differences.append(f"{name}: {value!r} is not a {wanted}")
        elif not inspect.ismethod(getattr(runner, name)):
            differences.append(f"{name}: not a method")
        elif parameters(getattr(type(runner), name)) != parameters(member):
            differences.append(f"{name}: takes {inspect.signature(getattr(runner, name))}")
    return differences


def kinds_of(hint: object) -> tuple[type, ...]:
    """The classes a value of a type hint is an instance of: ``Path | None``, ``list[X]``."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(typing.get_origin(t) or t for t in typing.get_args(hint))
    return (typing.get_origin(hint) or hint,)


def parameters(method: Callable[..., object]) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(method).parameters.values()]


def test_both_runners_are_runners(tmp_path):
    experiment = parse_experiment(EXPERIMENT)
    assert unlike_a_runner(ExperimentRunner(experiment, RunOptions(tmp_path))) == []
    assert unlike_a_runner(ProcessRunner(experiment, RunOptions(tmp_path))) == []


class RunningIsAMethod(ExperimentRunner):
    def running(self) -> bool:  # type: ignore[override]
        return False


class WaitsWithoutATimeout(ExperimentRunner):
    def wait(self) -> RunResult | None:  # type: ignore[override]
        return None


class ConfigsInATuple(ExperimentRunner):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.configs = ()  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("broken", "difference"),
    [
        (RunningIsAMethod, "running: <bound method"),
        (WaitsWithoutATimeout, "wait: takes ()"),
        (ConfigsInATuple, "configs: () is not a list"),
    ],
)
def test_a_runner_that_breaks_the_protocol_is_told_apart(tmp_path, broken, difference):
    """Each passes ``isinstance(runner, Runner)``, and the lifecycle would misuse it."""
    runner = broken(parse_experiment(EXPERIMENT), RunOptions(tmp_path))
    assert isinstance(runner, Runner)
    (found,) = unlike_a_runner(runner)
    assert found.startswith(difference)


def test_a_run_ends_with_its_tables_next_to_the_session(tmp_path, monkeypatch):
    written = []
    write = lifecycle_module.write_tables
    monkeypatch.setattr(lifecycle_module, "write_tables", lambda p: written.append(p) or write(p))
    with serve_in_thread(Behaviour(tokens=4)) as server:
        runner = ExperimentRunner(
            parse_experiment(EXPERIMENT), RunOptions(tmp_path, base_url=server.base_url)
        )
        cycle = RunLifecycle(runner)
        cycle.prepare()
        events = cycle.start()
        seen = []
        cycle.follow(seen.extend, 0.01)
        result = cycle.finish()
    assert result.status == "complete" and not cycle.running
    assert result.tables == RunTables(tmp_path / "concurrency.csv", tmp_path / "requests.csv")
    assert len(rows(result.tables.concurrency)) == 1 and len(rows(result.tables.requests)) == 3
    assert type(seen[0]).__name__ == "ExperimentStarted"
    assert type(seen[-1]).__name__ == "ExperimentFinished"  # the last batch came after the end
    runner.bus.publish("after")
    assert events.drain() == []  # finish let go of the subscription
    assert cycle.finish() is result and written == [result.session_path]  # once


def test_following_ends_when_the_run_does_not_at_its_next_turn(tmp_path):
    with serve_in_thread(Behaviour(tokens=4)) as server:
        options = RunOptions(tmp_path, base_url=server.base_url)
        cycle = RunLifecycle(ExperimentRunner(parse_experiment(EXPERIMENT), options))
        cycle.prepare()
        cycle.start()
        seen = []
        started = time.monotonic()
        cycle.follow(seen.extend, 60.0)
        took = time.monotonic() - started
        result = cycle.finish()
    assert took < 30.0  # a turn is a minute: the run's end cut the wait short
    assert result.status == "complete" and type(seen[-1]).__name__ == "ExperimentFinished"


def test_a_table_that_cannot_be_written_is_reported_with_the_result(tmp_path):
    (tmp_path / "concurrency.csv").mkdir()  # a folder where the table should go
    with serve_in_thread(Behaviour(tokens=4)) as server:
        result = run_experiment(
            parse_experiment(EXPERIMENT), RunOptions(tmp_path, base_url=server.base_url)
        )
    assert result.status == "complete"
    assert result.tables is not None and "cannot write" in (result.tables.error or "")
    with open_session(result.session_path) as session:
        assert session.status == "complete"  # the measurements are kept all the same


def test_cancel_again_and_again_from_many_threads_cancels_once(tmp_path):
    bus = EventBus()
    first = bus.subscribe(FirstToken)
    with serve_in_thread(Behaviour(tokens=400, delay_s=0.01)) as server:
        options = RunOptions(tmp_path, base_url=server.base_url)
        cycle = RunLifecycle(ExperimentRunner(parse_experiment(SLOW), options, bus))
        cycle.prepare()
        cycle.start()
        first.queue.get(timeout=30)
        threads = [threading.Thread(target=cycle.cancel) for _ in range(8)]
        for thread in threads:
            thread.start()
        for _ in range(20):
            cycle.cancel()
        for thread in threads:
            thread.join()
        result = cycle.finish()
    assert result.status == "cancelled" and cycle.cancelled
    assert result.tables is not None and result.tables.error is None
    with open_session(result.session_path) as session:
        assert session.status == "cancelled"
        (config,) = session.configs
        # A second cancellation of the engine's task would have cut this cleanup short.
        assert (config.status, config.error) == ("cancelled", "cancelled by the user")
        assert len(session.records(0)) == 4


def test_a_run_cancelled_before_it_starts_still_ends_with_tables(tmp_path):
    with serve_in_thread(Behaviour(tokens=4)) as server:
        options = RunOptions(tmp_path, base_url=server.base_url)
        cycle = RunLifecycle(ExperimentRunner(parse_experiment(EXPERIMENT), options))
        cycle.prepare()
        cycle.cancel()
        cycle.start()
        result = cycle.finish()
    assert result.status == "cancelled"
    assert result.tables is not None and result.tables.concurrency.exists()


class ScriptedRunner:
    """A ``Runner`` that runs nothing: ``wait`` does what the test says, then returns a
    result whose tables were written elsewhere (as a child process's are)."""

    def __init__(self, tmp_path: Path, during_wait=lambda: None, runs_for: int = 0) -> None:
        self.bus = EventBus()
        self.session_path = tmp_path / "x.session.sqlite"
        self.configs = []
        self.cancels = 0
        self.during_wait = during_wait
        self._polls_left = runs_for

    @property
    def running(self) -> bool:
        self._polls_left -= 1
        return self._polls_left >= 0

    def prepare(self) -> None:
        pass

    def start(self) -> None:
        pass

    def cancel(self) -> None:
        self.cancels += 1

    def wait(self, timeout: float | None = None) -> RunResult | None:
        self.during_wait()
        tables = RunTables(self.session_path.parent / "c.csv", self.session_path.parent / "r.csv")
        return RunResult("complete", self.session_path, [], tables=tables)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signals_while_finishing_only_say_so(tmp_path, sig):
    said = []

    def signalled() -> None:
        for _ in range(3):
            os.kill(os.getpid(), sig)
            time.sleep(0.01)  # the handler runs on the main thread, between bytecodes

    before = signal.getsignal(sig)
    runner = ScriptedRunner(tmp_path, during_wait=signalled)
    cycle = RunLifecycle(runner, while_stopping=lambda: said.append("already stopping"))
    result = cycle.finish()
    assert said == ["already stopping"] * 3
    assert signal.getsignal(sig) is before
    assert result.tables is not None and result.tables.concurrency.name == "c.csv"  # kept


def test_finishing_on_another_thread_installs_no_handlers(tmp_path):
    before = signal.getsignal(signal.SIGINT)
    seen = []
    runner = ScriptedRunner(
        tmp_path, during_wait=lambda: seen.append(signal.getsignal(signal.SIGINT))
    )
    thread = threading.Thread(target=RunLifecycle(runner).finish)
    thread.start()
    thread.join()
    assert seen == [before]


def test_an_interrupt_while_following_cancels_once_and_keeps_following(tmp_path):
    runner = ScriptedRunner(tmp_path, runs_for=5)
    told = []
    batches = []

    def handle(events: list[object]) -> None:
        batches.append(events)
        if len(batches) in (2, 3):  # Ctrl-C twice
            raise KeyboardInterrupt

    cycle = RunLifecycle(runner)
    events = cycle.start()
    assert isinstance(events, Subscription)
    cycle.follow(handle, 0.0, on_interrupt=lambda: told.append("stopping"))
    assert told == ["stopping"] and runner.cancels == 2 and cycle.cancelled
    assert len(batches) == 6  # five polls while running, then the last batch after the end


def test_an_interrupt_while_waiting_for_the_next_turn_cancels_the_run(tmp_path):
    """Ctrl-C lands while following waits between two batches (not in ``handle``): the run
    is cancelled, told once, and its last batch is still handed over."""

    class UntilCancelled(ScriptedRunner):
        """Runs until cancelled, then ends as the real runners do: over, then the bus told."""

        over = False

        @property
        def running(self) -> bool:
            return not self.over

        def cancel(self) -> None:
            super().cancel()
            self.over = True
            self.bus.run_ended()

    runner = UntilCancelled(tmp_path)
    cycle = RunLifecycle(runner)
    cycle.start()
    handled = threading.Event()
    batches = []
    told = []

    def handle(events: list[object]) -> None:
        batches.append(events)
        handled.set()

    def press_ctrl_c() -> None:
        handled.wait(10)
        time.sleep(0.05)  # following is waiting for its next turn by now
        os.kill(os.getpid(), signal.SIGINT)

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    presser = threading.Thread(target=press_ctrl_c)
    try:
        presser.start()
        started = time.monotonic()
        cycle.follow(handle, 60.0, on_interrupt=lambda: told.append("stopping"))
        took = time.monotonic() - started
    finally:
        presser.join()
        signal.signal(signal.SIGINT, before)
    assert took < 30.0 and told == ["stopping"] and runner.cancels == 1 and cycle.cancelled
    assert len(batches) == 2  # the first, then the last after the end


def test_a_run_that_does_not_stop_in_time_is_an_error(tmp_path):
    class Stuck(ScriptedRunner):
        def wait(self, timeout: float | None = None) -> RunResult | None:
            return None

    runner = Stuck(tmp_path, runs_for=100)
    cycle = RunLifecycle(runner, stop_wait_s=1.0)
    events = cycle.start()
    with pytest.raises(WorkbenchError, match="did not stop within 1 s after it was cancelled"):
        cycle.finish()
    assert runner.cancels == 1
    runner.bus.publish("after")
    assert events.drain() == []
