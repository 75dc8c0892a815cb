"""Supervising one llama-server process: start, health, facts, stop, and no orphans.

The server writes its log to a file (a pipe could fill and stall it). It runs in its own
session so a Ctrl-C at the terminal reaches only the workbench, which then stops servers in
order. If the workbench dies without cleaning up (even by SIGKILL), the server dies too: on
Linux through the parent-death signal, elsewhere through a small watchdog process.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from workbench.engine.base.errors import PortInUseError, ServerStartError
from workbench.engine.base.escaping import printable
from workbench.engine.base.records import StartupFacts
from workbench.engine.base.states import ServerState
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.settings import fields_of
from workbench.engine.server.startup_log import parse_startup_log
from workbench.engine.server.watchdog import group_members

LOG_VERBOSITY = 4  # the level at which KV, model and compute buffer sizes are logged
HOST = "127.0.0.1"
PORT_ATTEMPTS = 3
# Every configuration change waits, on average, half a poll interval more than the server
# needs (at 0.1 s that was ~50 ms of a ~0.5 s start); a poll costs this process a few ms at
# most, so 20 ms keeps the wait short without spinning against the loading server.
HEALTH_POLL_S = 0.02
# The server writes its log from a thread of its own, so /health can answer 200 a moment
# before its last startup lines reach the file (seen for "model loaded"); the sooner we
# look, the likelier that is, so wait this long at most for the slot layout.
LOG_SETTLE_S = 0.25
_PR_SET_PDEATHSIG = 1

_live: set[LlamaServer] = set()


@dataclass(frozen=True)
class StopResult:
    how: str  # "not running", "SIGINT", "SIGTERM", "SIGKILL"
    returncode: int | None


def server_arguments(settings: ServerSettings, model: Path, port: int) -> list[str]:
    """The llama-server flags for one configuration (binary not included): the fixed ones,
    each setting's own flags as its schema declares them, then ``extra_args`` last (they win)."""
    args = ["-m", str(model), "--host", HOST, "--port", str(port), "--metrics", "--slots"]
    args += setting_flags(settings)
    args += ["-lv", str(LOG_VERBOSITY)]
    args += list(settings.extra_args)
    return args


def setting_flags(settings: ServerSettings) -> list[str]:
    """Each setting's own flags, as its schema declares them (the model, the port and
    ``extra_args`` are the caller's)."""
    return [flag for f in fields_of(ServerSettings) for flag in f.flags(getattr(settings, f.name))]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # Like the server's own listener: the previous server's TIME_WAIT sockets don't count.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            raise PortInUseError(
                f"port {port} on {HOST} is already in use by another program; "
                "choose another [server] port, or leave it out to pick a free one"
            ) from None


def describe_exit(returncode: int) -> str:
    """Explain an exit status in words a user can act on."""
    signum = -returncode if returncode < 0 else returncode - 128 if 128 < returncode <= 192 else 0
    if signum:
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        text = f"killed by {name} (exit {returncode})"
        if signum == signal.SIGILL:
            text += (
                ": the binary uses CPU instructions this machine does not allow. Rebuild llama.cpp "
                "for this CPU (on x86_64 where AMX is advertised but not granted, build with "
                "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16, as the Makefile does)"
            )
        elif signum == signal.SIGKILL:
            text += ": possibly the kernel's out-of-memory killer, or another program"
        return text
    return f"exited with status {returncode}"


# Resolved once here: the child of a fork in a threaded program must not dlopen anything.
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def _parent_death_signal(parent: int) -> Callable[[], None]:
    def in_child() -> None:  # pragma: no cover - runs between fork and exec
        assert _prctl is not None
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return in_child


class LlamaServer:
    """One managed llama-server process.

    On Linux the parent-death signal is tied to the *thread* that started the process, so
    servers must be started from a thread that outlives them (the engine's own thread).
    """

    def __init__(
        self,
        binary: str,
        model: Path,
        settings: ServerSettings,
        log_path: Path,
        on_state: Callable[[ServerState, str], None] | None = None,
    ) -> None:
        self.binary = binary
        self.model = model
        self.settings = settings
        self.log_path = log_path
        self.port = settings.port or 0
        self.process: subprocess.Popen[bytes] | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.facts = StartupFacts()
        self.state = ServerState.STOPPED
        self._on_state = on_state or (lambda state, detail: None)

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def command(self) -> list[str]:
        return [self.binary, *server_arguments(self.settings, self.model, self.port)]

    def _set_state(self, state: ServerState, detail: str = "") -> None:
        self.state = state
        self._on_state(state, detail)

    def spawn(self) -> None:
        if self.settings.port:
            check_port_free(self.settings.port)
        else:
            self.port = free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._set_state(ServerState.STARTING, " ".join(self.command))
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_parent_death_signal(os.getpid()) if _prctl is not None else None,
            )
        _live.add(self)
        if sys.platform != "linux":
            self.watchdog = start_watchdog(self.process.pid)

    def _watch_grandchildren(self) -> None:
        """A wrapper script that does not ``exec`` runs llama-server as its own child, which
        the parent-death signal does not reach: give such a server group a watchdog."""
        if self.watchdog is not None or self.process is None:
            return
        with contextlib.suppress(psutil.Error):
            if psutil.Process(self.process.pid).children(recursive=True):
                self.watchdog = start_watchdog(self.process.pid)

    async def start(self) -> StartupFacts:
        """Spawn and wait until ``/health`` answers 200; raise ServerStartError otherwise.

        A port we picked ourselves can be taken by another program before the server binds
        it; then we pick another, a few times."""
        for attempt in range(PORT_ATTEMPTS):
            try:
                return await self._start_once()
            except PortInUseError:
                if self.settings.port or attempt == PORT_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    async def _start_once(self) -> StartupFacts:
        self.spawn()
        deadline = time.monotonic() + self.settings.startup_timeout_s
        async with httpx.AsyncClient(base_url=self.base_url, timeout=2.0) as client:
            while True:
                code = self.poll()
                if code is not None:
                    self._fail_start(describe_exit(code))
                try:
                    response = await client.get("/health")
                    if response.status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    await asyncio.to_thread(self.stop)
                    self._fail_start(
                        f"did not become healthy within {self.settings.startup_timeout_s:g} s "
                        "(raise [server] startup_timeout_s for a large model)",
                        stopped=True,
                    )
                await asyncio.sleep(HEALTH_POLL_S)
        self.facts = await self._settled_facts()
        self._watch_grandchildren()
        self._set_state(ServerState.HEALTHY)
        return self.facts

    async def _settled_facts(self) -> StartupFacts:
        """The startup facts, once the log holds the slot layout (or ``LOG_SETTLE_S`` ran
        out: a build that does not log it must not cost every start more than that)."""
        deadline = time.monotonic() + LOG_SETTLE_S
        while True:
            facts = parse_startup_log(self.log_text())
            if facts.n_slots is not None or time.monotonic() > deadline:
                return facts
            await asyncio.sleep(0.01)

    def _fail_start(self, why: str, stopped: bool = False) -> None:
        if not stopped:
            self.stop()
        self._set_state(ServerState.CRASHED, why)
        tail = self.log_tail(25)
        if "couldn't bind" in tail or "Address already in use" in tail:
            raise PortInUseError(f"llama-server could not bind port {self.port}: it is in use")
        raise ServerStartError(
            f"llama-server {why} while starting.\n  command: {' '.join(self.command)}\n"
            f"  log: {self.log_path}\n  last log lines:\n" + _indent(tail)
        )

    def poll(self) -> int | None:
        return self.process.poll() if self.process else None

    def wait_exit(self, timeout: float) -> int | None:
        """The exit status if the process ends within ``timeout`` seconds, else None."""
        if self.process is None:
            return None
        return wait_for_exit(self.process, timeout)

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, sigint_s: float = 5.0, sigterm_s: float = 3.0) -> StopResult:
        """SIGINT, then SIGTERM, then SIGKILL, each after a timeout. Safe to call twice."""
        proc = self.process
        if proc is None:
            return StopResult("not running", None)
        how = "not running"
        # The server runs in a session (and process group) of its own: signal the group, so
        # that a wrapper script's llama-server stops with it, and wait for all of it.
        group = proc.pid
        if proc.poll() is None or group_members(group):
            self._set_state(ServerState.STOPPING)
            for sig, wait_s in (
                (signal.SIGINT, sigint_s),
                (signal.SIGTERM, sigterm_s),
                (signal.SIGKILL, 10.0),
            ):
                _signal_group(proc, sig)
                how = sig.name
                if wait_for_exit(proc, wait_s) is not None:
                    _, left = psutil.wait_procs(group_members(group), timeout=wait_s)
                    if not left:
                        break
        _live.discard(self)
        if self.watchdog is not None:
            with contextlib.suppress(ProcessLookupError):
                self.watchdog.kill()
            self.watchdog.wait()
            self.watchdog = None
        if self.state != ServerState.CRASHED:
            self._set_state(ServerState.STOPPED, how)
        return StopResult(how, proc.returncode)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return read_tail(self.log_path, lines)


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:  # not our group after all: the process alone
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


def wait_for_exit(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """The exit status if ``proc`` ends within ``timeout`` seconds (reaped), else None.

    ``Popen.wait(timeout=...)`` polls with a sleep that doubles up to 50 ms, so a server
    that exits 33 ms after SIGINT was seen gone only after 64 ms, on every configuration
    change. Linux can instead hand us a descriptor that becomes readable the moment the
    process exits (a pidfd); elsewhere we fall back to ``Popen.wait``.
    """
    if proc.returncode is not None or timeout <= 0:
        return proc.poll()
    pidfd_open = getattr(os, "pidfd_open", None)
    fd = None
    if pidfd_open is not None:
        with contextlib.suppress(OSError):  # an old kernel, or the pid already reaped
            fd = pidfd_open(proc.pid)
    if fd is None:
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
    try:
        if proc.returncode is not None:  # reaped by another thread meanwhile
            return proc.returncode
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if poller.poll(max(1, round(timeout * 1000))):
            return proc.wait()  # it has exited: this only reaps it
        return proc.poll()
    finally:
        os.close(fd)


def read_tail(path: Path, lines: int = 40, max_bytes: int = 64 * 1024) -> str:
    """The last lines of a possibly large log file, without reading all of it."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read()
    except FileNotFoundError:
        return ""
    text = "\n".join(data.decode("utf-8", errors="replace").splitlines()[-lines:])
    return printable(text)  # a log can echo what a client sent: no escapes reach a terminal


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines()) or "    (empty log)"


def start_watchdog(child_pid: int) -> subprocess.Popen[bytes]:
    """A tiny process that kills ``child_pid`` when this process disappears."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workbench.engine.server.watchdog",
            str(os.getpid()),
            str(child_pid),
        ],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop_all_servers() -> None:
    """Last-resort cleanup at interpreter exit: nothing we started may outlive us."""
    for server in list(_live):
        server.stop(sigint_s=2.0, sigterm_s=2.0)


atexit.register(stop_all_servers)
