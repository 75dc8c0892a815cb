"""``workbench agent``: the far side of a run on another machine, over its stdin and stdout.

The near side starts it (through SSH) and speaks ``protocol``; the agent answers each
operation, runs an experiment with the same ``ExperimentRunner`` a local run uses, into its
own data folder (``agent_data_dir``, one folder per run id: never a path the near side
names), and sends every event of the run as it comes. Stdin's end is the near side gone
(OpenSSH sends no hangup to a command without a terminal), and so is a write that fails:
either cancels the run, which stops its servers and keeps its session, and the agent exits.

A load job (``run --load-from``) is one client worker of a run measured from the near side:
the agent checks the job (``load_worker.checked_job``), sends its requests from a loop of its
own with the same code a local worker runs (``worker_entry.run_job``) and streams their
events, timestamped by this machine's clock; a cancel or stdin's end cancels it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import platform
import queue
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any, BinaryIO

from workbench import __version__
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import ExperimentFinished
from workbench.engine.measure.client_workers import Job
from workbench.engine.measure.worker_entry import run_job
from workbench.engine.remote import wire
from workbench.engine.remote.host_check import host_facts
from workbench.engine.remote.load_worker import checked_job
from workbench.engine.remote.protocol import (
    FILE_CHUNK_BYTES,
    MAX_EVENTS_PER_LINE,
    PROTOCOL,
    CancelOp,
    CheckOp,
    FetchOp,
    GoOp,
    HelloOp,
    LoadOp,
    PingOp,
    ProtocolError,
    Refused,
    RunOp,
    SessionHeader,
    dump,
    parse,
    read_line,
)
from workbench.engine.run.lifecycle import STOP_WAIT_S, RunLifecycle
from workbench.engine.run.runner import ExperimentRunner, RunOptions
from workbench.engine.store import open_session

FLUSH_S = 0.05  # events go out at least this often while a run goes on
SESSION_SUFFIX = ".session.sqlite"


def agent_data_dir() -> Path:
    """Where the agent keeps its runs: this user's data folder, never the near side's."""
    from platformdirs import user_data_path

    return user_data_path("concurrency-workbench", appauthor=False) / "agent"


class Channel:
    """Stdout, one message a line, from any thread; a write that fails (the channel gone)
    marks it broken and calls ``on_broken`` once, never raises."""

    def __init__(self, stdout: BinaryIO) -> None:
        self._stdout = stdout
        self._lock = threading.Lock()
        self.broken = False
        self.on_broken: Any = None

    def send(self, kind: str, **fields: Any) -> None:
        data = dump({"kind": kind, **fields})
        with self._lock:
            if self.broken:
                return
            try:
                self._stdout.write(data)
                self._stdout.flush()
            except (OSError, ValueError):
                self.broken = True
        if self.broken and self.on_broken is not None:
            self.on_broken()

    def send_events(self, events: list[Any]) -> None:
        """Events in order, as few lines as their bounds allow."""
        encoded = [wire.encode(e) for e in events]
        for start in range(0, len(encoded), MAX_EVENTS_PER_LINE):
            self._send_batch(encoded[start : start + MAX_EVENTS_PER_LINE])

    def _send_batch(self, batch: list[dict[str, Any]]) -> None:
        try:
            self.send("events", events=batch)
        except ProtocolError:  # over the line's bound: in halves (one event never is)
            if len(batch) == 1:
                raise
            half = len(batch) // 2
            self._send_batch(batch[:half])
            self._send_batch(batch[half:])


class Agent:
    """One near side's operations, answered in order; at most one run at a time."""

    def __init__(self, channel: Channel, data_dir: Path) -> None:
        self.channel = channel
        self.data_dir = data_dir
        self._lifecycle: RunLifecycle | None = None
        self._run_thread: threading.Thread | None = None
        self._load_thread: threading.Thread | None = None
        self._load_commands: queue.Queue[Any] = queue.Queue()
        channel.on_broken = self.cancel

    def handle(self, message: Any) -> bool:
        """Answer one operation (a ``protocol.Op``, checked); False when the agent must stop
        (a refused hello)."""
        match message:
            case HelloOp():
                return self._hello(message)
            case PingOp():
                self.channel.send("pong", seq=message.seq, t_ns=time.perf_counter_ns())
            case CheckOp():
                facts = host_facts(message.model or None, message.server_bin or None)
                self.channel.send("facts", facts=wire.plain(facts))
            case RunOp():
                self._start_run(message)
            case CancelOp():
                self.cancel()
            case FetchOp():
                self._fetch(message.run_id)
            case LoadOp():
                self._start_load(message)
            case GoOp():
                self._load_commands.put(("go", message.t0_ns))
        return True

    def cancel(self) -> None:
        if self._lifecycle is not None:
            self._lifecycle.cancel()
        self._load_commands.put(("cancel",))

    def end(self) -> None:
        """The near side is gone: stop the run (its servers, through the runner's one
        ``finally``), keeping its session, within the lifecycle's bound; and the load job."""
        self.cancel()
        self._load_commands.put(None)
        if self._run_thread is not None:
            self._run_thread.join(STOP_WAIT_S + 10.0)
        if self._load_thread is not None:
            self._load_thread.join(STOP_WAIT_S + 10.0)

    def _hello(self, message: HelloOp) -> bool:
        if message.protocol != PROTOCOL:
            self.channel.send(
                "error",
                text=f"workbench {__version__} here speaks protocol {PROTOCOL}, the near side "
                f"{message.version[:40]} speaks {message.protocol}: install the same version "
                "on both machines",
            )
            return False
        self.channel.send("hello", protocol=PROTOCOL, version=__version__, hostname=platform.node())
        return True

    # -- a run --------------------------------------------------------------------------------
    def _start_run(self, message: RunOp) -> None:
        if self._run_thread is not None and self._run_thread.is_alive():
            self.channel.send("error", text="a run is going on already")
            return
        self._run_thread = threading.Thread(
            target=self._run, args=(message,), name="agent-run", daemon=True
        )
        self._run_thread.start()

    def _run(self, message: RunOp) -> None:
        try:
            self._run_one(message)
        except WorkbenchError as exc:
            self.channel.send("error", text=str(exc))
        finally:
            self.channel.send("done")

    def _run_one(self, message: RunOp) -> None:
        name = message.experiment_name or "experiment"
        experiment = parse_experiment(message.experiment_toml, name_hint=name)
        if message.model:
            experiment = experiment.with_overrides({"model": message.model})
        run_id = uuid.uuid4().hex
        options = RunOptions(self.data_dir / run_id, server_bin=message.server_bin or None)
        lifecycle = self._lifecycle = RunLifecycle(ExperimentRunner(experiment, options))
        lifecycle.prepare()
        session_path = lifecycle.runner.session_path
        assert session_path is not None
        self.channel.send("session", run_id=run_id, header=wire.plain(session_header(session_path)))
        lifecycle.start()
        try:
            # The run's end is held back: it is sent once its result is known (a session
            # that could not be written ends failed, not as the cancel it caused).
            lifecycle.follow(
                lambda events: self.channel.send_events(
                    [e for e in events if not isinstance(e, ExperimentFinished)]
                ),
                every_s=FLUSH_S,
            )
        finally:
            result = lifecycle.finish()
            self.channel.send_events([ExperimentFinished(result.status, result.error)])

    # -- a load job ------------------------------------------------------------------------
    def _start_load(self, message: LoadOp) -> None:
        busy = [t for t in (self._run_thread, self._load_thread) if t is not None and t.is_alive()]
        if busy:
            self.channel.send("error", text="a run or load job is going on already")
            return
        try:
            job = checked_job(message.job)
        except ProtocolError as exc:
            self.channel.send("error", text=str(exc))
            return
        self._load_commands = queue.Queue()
        self._load_thread = threading.Thread(
            target=self._load, args=(job, self._load_commands), name="agent-load", daemon=True
        )
        self._load_thread.start()

    def _load(self, job: Job, commands: queue.Queue[Any]) -> None:
        """The job on a loop of this thread's; a failure is the near side's one line."""
        try:
            asyncio.run(self._run_load(job, commands))
        except Exception as exc:  # whatever stopped the job, said rather than lost
            self.channel.send("error", text=f"the load job failed: {type(exc).__name__}: {exc}")

    async def _run_load(self, job: Job, commands: queue.Queue[Any]) -> None:
        def send(message: Any) -> None:
            if message[0] == "ready":
                self.channel.send("ready", t_ns=message[1])
            elif message[0] == "events":
                self.channel.send_events(message[1])
            else:
                self.channel.send("done", load=wire.plain(message[1]))

        try:
            await run_job(job, send, lambda: asyncio.to_thread(commands.get))
        finally:
            commands.put(None)  # the thread still waiting for a command returns

    # -- a session fetched ------------------------------------------------------------------
    def _fetch(self, run_id: str) -> None:
        found = sorted((self.data_dir / run_id).glob(f"*{SESSION_SUFFIX}"))
        if len(found) != 1:
            self.channel.send("error", text=f"no session of run {run_id} on {platform.node()}")
            return
        copy = found[0].with_name(f".fetch-{uuid.uuid4().hex}")
        try:
            try:
                consistent_copy(found[0], copy)
                self._send_file(run_id, copy)
            finally:
                # Gone before the end is said: the near side may look at the folder (or end
                # the agent) the moment it hears ``file_end``.
                copy.unlink(missing_ok=True)
        except (OSError, sqlite3.Error) as exc:
            self.channel.send("error", text=f"cannot read the session of run {run_id}: {exc}")
            return
        self.channel.send("file_end")

    def _send_file(self, run_id: str, path: Path) -> None:
        """The file's header and its chunks; ``file_end`` is the caller's, once the copy is
        removed."""
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            while chunk := fh.read(FILE_CHUNK_BYTES):
                digest.update(chunk)
        size = path.stat().st_size
        self.channel.send("file", run_id=run_id, size=size, sha256=digest.hexdigest())
        with path.open("rb") as fh:
            while chunk := fh.read(FILE_CHUNK_BYTES):
                self.channel.send("chunk", data=base64.b64encode(chunk).decode("ascii"))


def consistent_copy(source: Path, copy: Path) -> None:
    """The session as one file, its write-ahead log folded in (a run killed mid-way may have
    left one beside it), through SQLite's own backup: never a half-written page."""
    src = sqlite3.connect(source, timeout=10.0)
    try:
        dst = sqlite3.connect(copy)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()


def session_header(path: Path) -> SessionHeader:
    """The far session's header, as the near copy is created from it."""
    with open_session(path) as session:
        meta = session.meta
        return SessionHeader(
            name=meta["name"],
            experiment_toml=meta["experiment_toml"],
            experiment_path=meta["experiment_path"],
            mode=meta["mode"],
            base_url=meta["base_url"],
            hardware=session.hardware,
            clock_origin_ns=meta["clock_origin_ns"],
            created_at=meta["created_at"],
        )


def serve(stdin: BinaryIO, stdout: BinaryIO, data_dir: Path | None = None) -> int:
    """Answer the near side until stdin ends; 0, or 1 after something not of the protocol
    (said to the near side in one line). An operation whose fields are wrong is answered
    with its one line, and the agent goes on (but after a hello: it ends)."""
    agent = Agent(Channel(stdout), data_dir or agent_data_dir())
    status = 0
    try:
        while (line := read_line(stdin)) is not None:
            try:
                message = parse(line, "op")
            except Refused as exc:
                agent.channel.send("error", text=str(exc))
                if exc.word == "hello":  # perhaps a near side of another protocol: no more
                    status = 1
                    break
                continue
            if not agent.handle(message):
                status = 1
                break
    except ProtocolError as exc:
        agent.channel.send("error", text=str(exc))
        status = 1
    finally:
        with contextlib.suppress(WorkbenchError):
            agent.end()
    return status
