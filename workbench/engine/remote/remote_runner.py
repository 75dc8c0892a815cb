"""A run on another machine, followed from this one: the near side of ``workbench agent``.

``RemoteRunner`` is a ``Runner``, so the lifecycle, the CLI's progress and the window follow
it as they follow a local run. Preparing says hello, checks the host's facts and measures
the far clock's offset, then asks for the run and waits for its session's header: a run
the far side refuses (no model there) is refused here, before anything started. Running,
a thread takes the agent's messages, each checked on its way in (``protocol.parse``, every
event too), and publishes their events; a ``SessionWriter`` records them into a local
session made from the far header, with its ``remote_origin``. Paths the far side names
are about the far machine: the session's is this copy's, a server log's is prefixed with
the host, so nothing here ever opens one.

However the channel ends, the local session keeps every finished request: garbage ends it
failed; a connection that drops (or goes silent past ``liveness_s``) ends it incomplete,
with the ``workbench fetch`` command that completes it from the far copy.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from workbench.engine.base.errors import OutputDirError, WorkbenchError
from workbench.engine.base.escaping import printable
from workbench.engine.base.states import NoticeLevel, RunStatus
from workbench.engine.config.experiment import Experiment, RunConfig
from workbench.engine.events import (
    EventBus,
    ExperimentFinished,
    ExperimentStarted,
    Notice,
    ServerReady,
)
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.remote.link import (
    LIVENESS_S,
    PING_EVERY_S,
    REPLY_TIMEOUT_S,
    AgentLink,
    LinkLost,
    error_text,
)
from workbench.engine.remote.protocol import (
    PROTOCOL,
    HostFacts,
    HostTarget,
    ProtocolError,
    SessionHeader,
    SessionMessage,
    not_the_protocol,
)
from workbench.engine.run.lifecycle import STOP_WAIT_S
from workbench.engine.run.runner import RunOptions, RunResult
from workbench.engine.run.session_setup import check_out_dir, session_paths
from workbench.engine.store import SessionWriter, create_session, open_session
from workbench.engine.store.rows import RemoteOrigin
from workbench.engine.store.writer import write_remote_origin


def fetch_command(host: str, session_path: Path) -> str:
    """The command that completes a session from the far copy."""
    return f"workbench fetch {host} {session_path}"


def not_ready(host: str, facts: HostFacts) -> WorkbenchError | None:
    """A host's problems as one error, a line each prefixed with the host; None if ready."""
    if not facts.problems:
        return None
    return WorkbenchError("\n".join(f"{host}: {printable(p)}" for p in facts.problems))


class RemoteRunner:
    """An experiment run by the agent on ``target``, its events published on ``bus``."""

    def __init__(
        self,
        experiment: Experiment,
        options: RunOptions,
        target: HostTarget,
        remote_command: list[str],
        model: str | None,
        *,
        reply_timeout_s: float = REPLY_TIMEOUT_S,
        liveness_s: float = LIVENESS_S,
        ping_every_s: float = PING_EVERY_S,
        stop_wait_s: float = STOP_WAIT_S,
    ) -> None:
        self.experiment = experiment
        self.options = options
        self.target = target
        self.host = target.name
        self.remote_command = list(remote_command)
        self.model = model
        self.bus = EventBus()
        self.configs: list[RunConfig] = experiment.configs()
        path, _ = session_paths(experiment, options)
        self._session_path = path
        self.clock_offset_ns: int | None = None  # far minus near, from the quickest round trip
        self.rtt_ns: int | None = None
        self.facts: HostFacts | None = None
        self.run_id: str | None = None
        self.reply_timeout_s = reply_timeout_s
        self.liveness_s = liveness_s
        self.ping_every_s = ping_every_s
        self.stop_wait_s = stop_wait_s
        self._link: AgentLink | None = None
        self._writer: SessionWriter | None = None
        self._thread: threading.Thread | None = None
        self._ended = threading.Event()
        self._cancelled = threading.Event()
        self._status: str = RunStatus.FAILED
        self._error: str | None = None
        self._finished_seen = False

    @property
    def session_path(self) -> Path:
        return self._session_path

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._ended.is_set()

    # -- before the run -----------------------------------------------------------------------
    def prepare(self) -> None:
        """Talk to the agent and have it prepare the run; a ``WorkbenchError`` says what is
        wrong (on which host), with nothing started and nothing left behind."""
        if self.options.resume is not None or self.options.base_url is not None:
            raise WorkbenchError(
                f"{self.host}: a run there starts its own servers; resuming a session or "
                "measuring a server by its URL is for a run from this machine"
            )
        check_out_dir(self.options.out_dir)
        if self.session_path.exists():
            raise OutputDirError(f"session file already exists: {self.session_path}")
        link = self._link = AgentLink(self.target, self.remote_command)
        try:
            link.hello(self.reply_timeout_s)
            self.facts = link.check(self.model, self.options.server_bin, self.reply_timeout_s)
            if (problems := not_ready(self.host, self.facts)) is not None:
                raise problems
            self.rtt_ns, self.clock_offset_ns = link.measure_clock(self.reply_timeout_s)
            link.send(
                "run",
                experiment_toml=self.experiment.source,
                experiment_name=self.experiment.name,
                model=self.model,
                server_bin=self.options.server_bin,
            )
            started = link.expect("session", self.reply_timeout_s)
            self._create_session(started)
        except BaseException:
            link.kill()
            link.close()
            raise

    def _create_session(self, started: SessionMessage) -> None:
        header: SessionHeader = started.header
        self.run_id = started.run_id
        try:
            create_session(
                self.session_path,
                header.name,
                header.experiment_toml,
                header.experiment_path,
                header.mode,
                header.base_url,
                header.hardware,
                header.clock_origin_ns,
                created_at=header.created_at,
                wall_origin=self._wall_at(header.clock_origin_ns),
            )
        except OverflowError:  # a number beyond what a session holds: no clock's
            raise ProtocolError(f"{self.host} sent a session header out of bounds") from None
        except OSError as exc:
            raise OutputDirError(
                f"cannot create the session file {self.session_path}: {exc}"
            ) from None
        self._write_origin()

    def _wall_at(self, far_ns: int) -> float:
        """This machine's wall clock when the far clock read ``far_ns``: sessions from
        several machines are placed side by side by their wall origins."""
        assert self.clock_offset_ns is not None
        far_now = time.perf_counter_ns() + self.clock_offset_ns
        return time.time() - (far_now - far_ns) / 1e9

    def _write_origin(self) -> None:
        assert self.run_id is not None and self._link is not None
        origin = RemoteOrigin(
            host=self.host,
            run_id=self.run_id,
            agent_version=self._link.agent_version,
            protocol=PROTOCOL,
            clock_offset_ns=self.clock_offset_ns,
            rtt_ns=self.rtt_ns,
            received_all=self._finished_seen,
        )
        write_remote_origin(self.session_path, origin)

    # -- the run --------------------------------------------------------------------------------
    def start(self) -> None:
        """Record and publish what the agent sends; ``prepare()`` must have run."""
        assert self._link is not None and self.run_id is not None, "prepare() first"
        self._writer = SessionWriter(self.session_path, self.bus, on_failure=self.cancel)
        self._writer.start()
        self._thread = threading.Thread(target=self._follow, name=f"remote-{self.host}")
        self._thread.daemon = True
        self._thread.start()
        threading.Thread(target=self._ping, name=f"ping-{self.host}", daemon=True).start()

    def cancel(self) -> None:
        """Ask the far side to stop (keeping what it measured) and close the channel; if it
        has not finished within ``stop_wait_s``, the process carrying it is ended."""
        link = self._link
        if link is None or self._cancelled.is_set():
            return
        self._cancelled.set()
        link.send("cancel")
        if self._thread is None:  # prepared, never started: nothing here to follow
            link.close(self.stop_wait_s)
            return
        link.close_input()
        timer = threading.Timer(self.stop_wait_s, link.kill)
        timer.daemon = True
        timer.start()

    def wait(self, timeout: float | None = None) -> RunResult | None:
        """Block until the channel has ended and the session is written; None on timeout."""
        assert self._thread is not None and self._writer is not None
        self._thread.join(timeout)
        if self._thread.is_alive():
            return None
        if (failure := self._writer.failure()) is not None:
            self._status, self._error = RunStatus.FAILED, failure
        summaries: list[ConfigSummary] = []
        with contextlib.suppress(WorkbenchError), open_session(self.session_path) as session:
            summaries = session.summaries()
        return RunResult(self._status, self.session_path, summaries, self._error)

    def _ping(self) -> None:
        while not self._ended.wait(self.ping_every_s):
            assert self._link is not None
            self._link.send("ping", seq=-1)

    def _follow(self) -> None:
        link = self._link
        assert link is not None
        try:
            while self._take(link.receive(self.liveness_s)):
                pass
            if not self._finished_seen:
                self._end(RunStatus.FAILED, self._error or f"{self.host} ended the run unsaid")
        except ProtocolError as exc:
            link.kill()
            self._end(RunStatus.FAILED, str(exc))
        except LinkLost as exc:
            link.kill()
            if not self._finished_seen:
                self._lost(str(exc))
        finally:
            link.close()
            with contextlib.suppress(OSError, WorkbenchError):
                self._write_origin()
            self._ended.set()
            self.bus.run_ended()

    def _take(self, message: Any) -> bool:
        """Act on one message; False once the far side is done."""
        kind = message.kind
        if kind == "events":
            for event in message.events:
                self._publish(event)
        elif kind == "error":
            self._error = f"{self.host}: {error_text(message)}"
            self.bus.publish(Notice(NoticeLevel.ERROR, self._error))
        elif kind == "done":
            return False
        elif kind != "pong":
            raise not_the_protocol(self.host, f"a {kind} message during a run")
        return True

    def _publish(self, event: Any) -> None:
        if isinstance(event, ExperimentStarted):
            event = replace(event, session_path=str(self.session_path))
        elif isinstance(event, ServerReady) and event.log_path is not None:
            event = replace(event, log_path=f"{self.host}:{event.log_path}")
        elif isinstance(event, ExperimentFinished):
            if self._finished_seen:
                return
            self._finished_seen = True
            self._status, self._error = event.status, event.error
        self.bus.publish(event)

    def _end(self, status: str, error: str) -> None:
        """The run's end, said here where the far side could not say it."""
        self._status, self._error = status, error
        self.bus.publish(Notice(NoticeLevel.ERROR, error))
        self.bus.publish(ExperimentFinished(RunStatus(status), error))

    def _lost(self, why: str) -> None:
        error = (
            f"{why}; the session keeps every finished request: "
            f"`{fetch_command(self.host, self.session_path)}` completes it from the far copy"
        )
        self._end(RunStatus.INCOMPLETE, error)
