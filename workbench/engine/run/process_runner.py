"""Running an experiment in a child process, for a front end that paints.

In one process, a window's painting and the engine's stream parsing take turns on the same
interpreter lock, so each slows the other: token timestamps drift and frames stall. Here the
child process takes the run through the same ``RunLifecycle`` as ``workbench run`` (the
engine, ``ExperimentRunner``, unchanged; the tables written by the child once the run
ended); its events come back in batches of about 20 ms, with the token chunks of each
request merged within a batch (the views need the text, not one event per token; the
session written by the child keeps every chunk with its own timestamp).

``ProcessRunner`` is a ``lifecycle.Runner``, like ``ExperimentRunner``: ``prepare``,
``start``, ``cancel``, ``running``, ``wait``, ``bus``, ``session_path`` and ``configs``. The
result ``wait`` returns already carries the tables the child wrote.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import queue
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from workbench.engine.base import errors
from workbench.engine.base.records import RequestKey
from workbench.engine.config.experiment import Experiment, RunConfig
from workbench.engine.events import EventBus, RequestFinished, TokenChunkArrived
from workbench.engine.run.lifecycle import RunLifecycle
from workbench.engine.run.runner import ExperimentRunner, RunOptions, RunResult

BATCH_S = 0.02
PREPARE_TIMEOUT_S = 120.0


def coalesce(events: list[Any]) -> list[Any]:
    """Merge each request's token chunks within a batch into one event (text joined, the
    last chunk's time, ``count`` chunks), a run of reasoning apart from the answer after it
    (the pane dims the one). Every other event keeps its place; a finished
    request travels without its chunk list when the server counted its tokens (the views
    need its times and counts, the session keeps its chunks: 64 records of 300 chunks
    took the window's interpreter lock for about 25 ms to unpickle)."""
    out: list[Any] = []
    pending: dict[RequestKey, int] = {}
    for event in events:
        if isinstance(event, TokenChunkArrived):
            key = RequestKey(event.config_index, event.repeat, event.index)
            at = pending.get(key)
            if at is None or out[at].reasoning != event.reasoning:
                pending[key] = len(out)
                out.append(event)
            else:
                merged = out[at]
                out[at] = replace(
                    merged,
                    t_ns=event.t_ns,
                    text=merged.text + event.text,
                    count=merged.count + event.count,
                )
        elif isinstance(event, RequestFinished) and event.record.output_tokens[1] != "chunks":
            out.append(RequestFinished(replace(event.record, chunks=[])))
        else:
            out.append(event)
    return out


def _child(experiment: Experiment, options: RunOptions, to_parent: Any, from_parent: Any) -> None:
    """The child process: prepare, wait for start, forward events, report the result."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    front_end = multiprocessing.parent_process()
    assert front_end is not None, "runs only as a child process"
    runner = ExperimentRunner(experiment, options)
    lifecycle = RunLifecycle(runner)

    def orphan_watch() -> None:
        # Ready when the front end has exited, however: the child of a fork server has that
        # server, not the front end, for its parent process.
        multiprocessing.connection.wait([front_end.sentinel])
        lifecycle.cancel()  # the front end is gone: stop servers, close the session
        from_parent.put("gone")  # a run still waiting for its start ends now
        time.sleep(15.0)
        os._exit(1)

    threading.Thread(target=orphan_watch, name="orphan-watch", daemon=True).start()
    try:
        lifecycle.prepare()
    except errors.WorkbenchError as exc:
        to_parent.put(_error(exc))
        return
    to_parent.put(("prepared", str(runner.session_path), runner.configs))
    if _next_command(from_parent) != "start":
        lifecycle.cancel()
    lifecycle.start()

    def commands() -> None:
        while (command := _next_command(from_parent)) != "gone":
            if command == "cancel":
                lifecycle.cancel()

    def forward(events: list[Any]) -> None:
        if events:
            to_parent.put(("events", coalesce(events)))

    threading.Thread(target=commands, name="commands", daemon=True).start()
    lifecycle.follow(forward, BATCH_S)
    try:
        to_parent.put(("finished", lifecycle.finish()))
    except errors.WorkbenchError as exc:
        to_parent.put(_error(exc))


def _next_command(from_parent: Any) -> str:
    """The front end's next word ("start", "cancel"), or "gone" once none can come."""
    try:
        return str(from_parent.get())
    except (EOFError, OSError):
        return "gone"


def _error(exc: errors.WorkbenchError) -> tuple[str, str, str]:
    """An error for the parent, which raises it again with its class (``_raise``)."""
    return ("error", type(exc).__name__, str(exc))


def _raise(message: tuple[str, str, str]) -> None:
    error_class = getattr(errors, message[1], errors.WorkbenchError)
    raise error_class(message[2])


def engine_context() -> multiprocessing.context.BaseContext:
    """How engine processes start: forked from a fork server that has the engine imported.

    The server starts with the first run (a fresh interpreter, never a fork of the window:
    forking a process that runs Qt is unsafe); each later run forks from it with the engine
    imported, about 0.13 s from asked to ready instead of 0.8 s (``bench/engine_start.py``).
    Where there is no fork server, each run starts a fresh interpreter."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return context


class ProcessRunner:
    def __init__(
        self, experiment: Experiment, options: RunOptions, bus: EventBus | None = None
    ) -> None:
        self.experiment = experiment
        self.options = options
        self.bus = bus or EventBus()
        self.session_path: Path | None = None
        # What the child prepared replaces this (an external server names the model).
        self.configs: list[RunConfig] = experiment.configs(external=options.base_url is not None)
        self._context = engine_context()
        self._to_parent: Any = self._context.Queue()
        self._from_parent: Any = self._context.Queue()
        self._process: Any = None
        self._reader: threading.Thread | None = None
        self._ended = threading.Event()
        self._result: RunResult | None = None
        self._error: tuple[str, str, str] | None = None

    def prepare(self) -> None:
        """Start the child and let it check everything; its error is raised here."""
        self._process = self._context.Process(
            target=_child,
            args=(self.experiment, self.options, self._to_parent, self._from_parent),
            name="workbench-engine",
            daemon=True,
        )
        self._process.start()
        deadline = time.monotonic() + PREPARE_TIMEOUT_S
        while True:
            try:
                message = self._to_parent.get(timeout=0.5)
                break
            except queue.Empty:
                if not self._process.is_alive():
                    raise errors.WorkbenchError(
                        f"the engine process exited while preparing "
                        f"(status {self._process.exitcode})"
                    ) from None
                if time.monotonic() > deadline:
                    self._stop_child()
                    raise errors.WorkbenchError("the engine process did not get ready") from None
        if message[0] == "error":
            self._process.join(10)
            _raise(message)
        self.session_path, self.configs = Path(message[1]), message[2]

    def start(self) -> None:
        self._from_parent.put("start")
        self._reader = threading.Thread(target=self._read, name="engine-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        """Publish what the child sends until its run has ended, then say so: ``running``
        turns false before the bus wakes its followers."""
        try:
            self._read_until_the_end()
        finally:
            self._ended.set()
            self.bus.run_ended()

    def _read_until_the_end(self) -> None:
        while True:
            try:
                message = self._to_parent.get(timeout=0.5)
            except queue.Empty:
                if not self._process.is_alive():
                    return  # died without a word: wait() reports it
                continue
            if message[0] == "events":
                for event in message[1]:
                    self.bus.publish(event)
            elif message[0] == "finished":
                self._result = message[1]
                return
            elif message[0] == "error":
                self._error = message
                return

    def cancel(self) -> None:
        with contextlib.suppress(Exception):
            self._from_parent.put("cancel")

    @property
    def running(self) -> bool:
        return self._reader is not None and not self._ended.is_set()

    def wait(self, timeout: float | None = None) -> RunResult | None:
        assert self._reader is not None
        self._reader.join(timeout)
        if self._reader.is_alive():
            return None
        self._process.join(10)
        if self._error is not None:
            _raise(self._error)
        if self._result is None:
            status = self._process.exitcode
            self._stop_child()
            raise errors.WorkbenchError(
                f"the engine process died (status {status}); the "
                f"session keeps what was recorded: {self.session_path}"
            )
        return self._result

    def _stop_child(self) -> None:
        if self._process is not None and self._process.is_alive():
            self._process.terminate()
            self._process.join(10)
