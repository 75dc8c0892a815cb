"""The near side's end of the channel to one agent: the process that carries it (``ssh``,
or a local subprocess), its lines read on a thread of their own, and every wait bounded.

Whatever comes is untrusted: each line is bounded (``protocol.read_line``) and parsed before
anyone sees it; garbage becomes one ``ProtocolError`` naming the host. A wait for an answer
never outlasts its timeout: an agent that stalls is as lost as one whose connection closed.
Every way out ends the process (``close``).
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import threading
import time
from collections import deque
from typing import Any

from workbench import __version__
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.escaping import printable
from workbench.engine.remote.protocol import (
    CLOCK_BOUND,
    PROTOCOL,
    ErrorMessage,
    HostFacts,
    HostTarget,
    ProtocolError,
    dump,
    not_the_protocol,
    parse,
    read_line,
)

REPLY_TIMEOUT_S = 30.0  # for an answer to hello, check, fetch: ssh may be slow to connect
CLOSE_WAIT_S = 5.0  # for the process to end once its stdin is closed, before it is killed
STDERR_KEPT_BYTES = 4096  # of what the process said on stderr, for an error's line
QUEUED_MESSAGES = 64  # read ahead of whoever takes them: the pipe holds the rest
INSTALL = "pip install concurrency-workbench=="
LIVENESS_S = 30.0  # no message for this long while a run goes on: the connection is lost
PING_EVERY_S = 2.0  # a ping keeps a quiet run's channel talking (and shows it alive)
CLOCK_PINGS = 8  # round trips for the clock offset: the quickest one is taken


class LinkLost(WorkbenchError):
    """The channel ended (or went silent) before the far side said it was done."""


class _End:
    """What the reader queues once the channel has ended."""


class AgentLink:
    """One agent, started through ``target``; ``receive`` hands its messages in order."""

    def __init__(self, target: HostTarget, remote_command: list[str]) -> None:
        self.host = target.name
        argv = target.command([*remote_command, "agent"])
        try:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # a Ctrl-C is the near side's to handle, not ssh's
            )
        except OSError as exc:
            raise WorkbenchError(f"{self.host}: cannot start {argv[0]}: {exc}") from None
        self.agent_version = ""
        self.last_heard = time.monotonic()
        self._messages: queue.Queue[Any] = queue.Queue(QUEUED_MESSAGES)
        self._stderr: deque[bytes] = deque()
        self._send_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name=f"agent-{self.host}", daemon=True)
        self._errors = threading.Thread(target=self._keep_stderr, name="agent-stderr", daemon=True)
        self._reader.start()
        self._errors.start()

    # -- the channel ------------------------------------------------------------------------
    def send(self, op: str, **fields: Any) -> bool:
        """Send one operation; False when the channel is gone (the reader will say so)."""
        stdin = self.process.stdin
        assert stdin is not None
        with self._send_lock:
            try:
                stdin.write(dump({"op": op, **fields}))
                stdin.flush()
            except (OSError, ValueError):  # a closed pipe, or stdin closed here
                return False
        return True

    def receive(self, timeout: float) -> Any:
        """The next message (a ``protocol.Message``, checked); ``LinkLost`` when the channel
        ended or nothing came within ``timeout``, ``ProtocolError`` when what came is not the
        protocol's."""
        try:
            message = self._messages.get(timeout=timeout)
        except queue.Empty:
            raise LinkLost(f"{self.host} sent nothing for {timeout:.0f} s") from None
        if isinstance(message, ProtocolError):
            raise not_the_protocol(self.host, message)
        if isinstance(message, _End):
            self._errors.join(CLOSE_WAIT_S)  # what it said as it ended, read to its end
            raise LinkLost(f"the connection to {self.host} closed{self.said()}")
        return message

    def expect(self, kind: str, timeout: float = REPLY_TIMEOUT_S) -> Any:
        """The next message, which must be ``kind`` (an ``error`` is the far side's line)."""
        message = self.receive(timeout)
        if message.kind == "error":
            raise WorkbenchError(f"{self.host}: {error_text(message)}")
        if message.kind != kind:
            raise not_the_protocol(self.host, f"a {message.kind} message where a {kind} was due")
        return message

    def said(self) -> str:
        """The end of what the process wrote on stderr, as ``: ...`` (or nothing)."""
        text = b"".join(self._stderr).decode("utf-8", "replace").strip()
        lines = [line for line in text.splitlines() if line.strip()]
        return f": {printable(lines[-1][-300:])}" if lines else ""

    # -- the conversation's first steps -------------------------------------------------------
    def hello(self, timeout: float = REPLY_TIMEOUT_S) -> None:
        """Say who we are; a far side of another protocol is one line saying what to do."""
        self.send("hello", protocol=PROTOCOL, version=__version__)
        message = self.expect("hello", timeout)
        self.agent_version = printable(message.version[:100])
        if message.protocol != PROTOCOL:
            raise WorkbenchError(
                f"{self.host}: workbench {self.agent_version} there, {__version__} here: "
                f"protocol {message.protocol} vs {PROTOCOL}, upgrade with "
                f"`{INSTALL}{__version__}` on the older side"
            )

    def check(
        self, model: str | None, server_bin: str | None, timeout: float = REPLY_TIMEOUT_S
    ) -> HostFacts:
        """The far host's facts for a run."""
        self.send("check", model=model, server_bin=server_bin)
        facts: HostFacts = self.expect("facts", timeout).facts
        return facts

    def measure_clock(self, timeout: float = REPLY_TIMEOUT_S) -> tuple[int, int]:
        """(round trip, far clock minus this one's) from the round trip that took least
        time (its midpoint is the likeliest moment the far side read the ping)."""
        best: tuple[int, int] | None = None
        for seq in range(CLOCK_PINGS):
            sent = time.perf_counter_ns()
            self.send("ping", seq=seq)
            pong = self.expect("pong", timeout)
            came = time.perf_counter_ns()
            if pong.seq != seq:
                raise ProtocolError(f"{self.host} answered ping {seq} with pong {pong.seq}")
            if best is None or came - sent < best[0]:
                best = (came - sent, pong.t_ns - (sent + came) // 2)
        assert best is not None
        return best

    # -- the end ------------------------------------------------------------------------------
    def close_input(self) -> None:
        """Say nothing more will be asked: the far side finishes what it does, then ends."""
        with self._send_lock, contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Close the channel and end the process: asked (stdin closed), then killed."""
        self.close_input()
        try:
            self.process.wait(wait_s)
        except subprocess.TimeoutExpired:
            self.kill()
        self._reader.join(wait_s)
        self._errors.join(wait_s)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def kill(self) -> None:
        """End the process now (its reader then sees the channel's end)."""
        with contextlib.suppress(OSError):
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(CLOSE_WAIT_S)

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while (line := read_line(stdout)) is not None:
                self.last_heard = time.monotonic()
                self._messages.put(parse(line, "kind"))
            self._messages.put(_End())
        except ProtocolError as exc:
            self._messages.put(exc)
        except (OSError, ValueError):  # the pipe closed under the reader
            self._messages.put(_End())

    def _keep_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        kept = 0
        with contextlib.suppress(OSError, ValueError):
            while chunk := stderr.read1(4096):
                self._stderr.append(chunk)
                kept += len(chunk)
                while kept > STDERR_KEPT_BYTES and len(self._stderr) > 1:
                    kept -= len(self._stderr.popleft())


def clock_reading(value: Any) -> bool:
    """Whether ``value`` can be a ``perf_counter_ns`` reading (and an offset made of it
    fits the session's 64-bit column)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < CLOCK_BOUND


def error_text(message: ErrorMessage) -> str:
    """An ``error`` message's line, bounded and safe for a terminal."""
    return printable(message.text[:1000])
