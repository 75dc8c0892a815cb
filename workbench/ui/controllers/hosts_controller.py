"""Checking the Machine picker's hosts off the GUI thread: each host's key first (an SSH
host whose key is unknown is a question for the user, one whose key changed an error), then
its facts for a run (``check_host``), each said in one line.

Every step that may wait on a network or a process runs in a worker thread
(``asyncio.to_thread``), owned by the window's ``Tasks``: the window never waits on a host.
The functions are handed in (``HostFunctions``), so tests give doubles where they want one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Signal

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.experiment import Experiment
from workbench.engine.remote import hosts, ssh, targets
from workbench.engine.remote.host_check import GIB
from workbench.engine.remote.protocol import HostFacts
from workbench.engine.remote.targets import LOCAL
from workbench.engine.run.lifecycle import Runner
from workbench.engine.run.process_runner import ProcessRunner
from workbench.engine.run.runner import RunOptions
from workbench.ui.controllers.tasks import Tasks

# host, experiment, options, the model typed for the host (None: the experiment's)
MakeRunner = Callable[[str, Experiment, RunOptions, str | None], Runner]


@dataclass(frozen=True)
class HostFunctions:
    """What a check calls, each in a worker thread."""

    # host, model (None: the experiment's as the host resolves it), server_bin, remote command
    check_host: Callable[[str, str | None, str | None, list[str] | None], HostFacts]
    host_key_status: Callable[[str], ssh.HostKey]
    accept_host_key: Callable[[str, tuple[str, ...]], Any]


@dataclass(frozen=True)
class Machines:
    """How the window reaches machines other than this one: the SSH config's hosts, each
    host's checks, what runs an experiment on a host, and the agent's command there."""

    ssh_hosts: Callable[[], list[str]]
    functions: HostFunctions
    make_runner: MakeRunner
    remote_command: list[str]


def key_status(dest: str) -> ssh.HostKey:
    """What ssh knows of ``dest``'s key; a host whose agent runs as a process here (no SSH)
    has nothing to trust."""
    if targets.by_process():
        return ssh.HostKey(
            dest, dest, 22, known=True, changed=False, fingerprints=(), accept_command=""
        )
    return ssh.host_key_status(dest)


def engine_machines(remote_command: list[str] | None = None) -> Machines:
    """The engine's own: SSH, the hosts' agents (started as ``remote_command`` there), and
    this machine's run in a child process (the window's process measures nothing)."""
    command = list(remote_command or hosts.DEFAULT_REMOTE_COMMAND)

    def make_runner(
        host: str, experiment: Experiment, options: RunOptions, model: str | None
    ) -> Runner:
        if host != LOCAL:
            return hosts.runner_for(host, experiment, options, command, model)
        return ProcessRunner(
            experiment.with_overrides({"model": model}) if model else experiment, options
        )

    functions = HostFunctions(hosts.check_host, key_status, ssh.accept_host_key)
    return Machines(ssh.ssh_config_hosts, functions, make_runner, command)


def facts_brief(facts: HostFacts) -> str:
    """A host ready to run, short enough for the picker's narrow column: its hostname,
    workbench version, GPUs and free memory (the CLI's whole line is its tooltip)."""
    parts = [f"ok: {facts.hostname}", f"workbench {facts.workbench_version}"]
    parts.append(", ".join(facts.gpus) or "no GPU")
    if facts.free_memory_bytes is not None:
        parts.append(f"{facts.free_memory_bytes / GIB:.1f} GiB free")
    return ", ".join(parts)


def machine_name(host: str) -> str:
    """A host as the picker, the banner and the status line name it."""
    return "This machine" if host == LOCAL else host


def machine_label(host: str, facts: HostFacts | None) -> str:
    """The machine as the stacked views name it: the host as ticked, its name and GPU."""
    shown = machine_name(host)
    if facts is None:
        return shown
    gpu = ", ".join(facts.gpus) if facts.gpus else "CPU only"
    return f"{shown}  ·  {facts.hostname}  ·  {gpu}"


class HostsController(QObject):
    checking = Signal(str)  # host: its check has started
    checked = Signal(str, object)  # host, HostFacts: its problems may be none or several
    failed = Signal(str, str)  # host, the one line that says why it could not be checked
    key_unknown = Signal(str, object)  # host, its key's fingerprints (tuple): trust it?
    key_changed = Signal(str, str)  # host, the error: never a question

    def __init__(
        self,
        tasks: Tasks,
        functions: HostFunctions,
        server_bin: str | None = None,
        remote_command: list[str] | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.functions = functions
        self.server_bin = server_bin
        self.remote_command = remote_command
        self.facts: dict[str, HostFacts] = {}  # each host's last facts
        self._checking: set[str] = set()

    @property
    def busy(self) -> bool:
        return bool(self._checking)

    def check(self, host: str, model: str | None = None) -> None:
        """Check ``host`` (a second ask while one runs is the same check)."""
        if host not in self._checking:
            self._checking.add(host)
            self.tasks.spawn(self._check(host, model))

    def trust(self, host: str, fingerprints: tuple[str, ...], model: str | None = None) -> None:
        """The user trusts the key shown: it is stored, then the host is checked."""
        if host not in self._checking:
            self._checking.add(host)
            self.tasks.spawn(self._check(host, model, trusted=fingerprints))

    async def _check(
        self, host: str, model: str | None, trusted: tuple[str, ...] | None = None
    ) -> None:
        self.checking.emit(host)
        try:
            if trusted is not None:
                await asyncio.to_thread(self.functions.accept_host_key, host, trusted)
            if host != LOCAL and not await self._key_known(host):
                return
            facts = await asyncio.to_thread(
                self.functions.check_host, host, model, self.server_bin, self.remote_command
            )
        except WorkbenchError as exc:
            self.failed.emit(host, str(exc))
            return
        finally:
            self._checking.discard(host)
        self.facts[host] = facts
        self.checked.emit(host, facts)

    async def _key_known(self, host: str) -> bool:
        """Whether the host's key is known and unchanged; if not, the question or the
        error has been asked or said."""
        key = await asyncio.to_thread(self.functions.host_key_status, host)
        if key.changed:
            self.key_changed.emit(host, ssh.key_line(key))
            return False
        if not key.known:
            self.key_unknown.emit(host, tuple(key.fingerprints))
            return False
        return True
