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
from typing import Any, Protocol

from PySide6.QtCore import QObject, Signal

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.remote.protocol import HostFacts
from workbench.ui.controllers.tasks import Tasks

LOCAL = "local"  # this machine, as runs and checks name it
GIB = 1024**3


class HostKeyStatus(Protocol):
    """What is known of an SSH host's key (``remote.ssh.HostKey``)."""

    @property
    def known(self) -> bool: ...

    @property
    def changed(self) -> bool: ...

    @property
    def fingerprints(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class HostFunctions:
    """What a check calls, each in a worker thread."""

    # host, model (None: the experiment's as the host resolves it), server_bin, remote command
    check_host: Callable[[str, str | None, str | None, list[str] | None], HostFacts]
    host_key_status: Callable[[str], HostKeyStatus]
    accept_host_key: Callable[[str, tuple[str, ...]], Any]


def facts_line(facts: HostFacts) -> str:
    """A host ready to run, in one line: what it is, what it runs, what it has free."""
    parts = [facts.hostname, f"workbench {facts.workbench_version}"]
    parts.append(", ".join(facts.gpus) if facts.gpus else "no GPU (CPU)")
    if facts.free_memory_bytes is not None:
        parts.append(f"{facts.free_memory_bytes / GIB:.1f} GiB free")
    return "ok: " + ", ".join(parts)


def machine_label(host: str, facts: HostFacts | None) -> str:
    """The machine as the stacked views name it: the host as ticked, its name and GPU."""
    shown = "This machine" if host == LOCAL else host
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
            self.key_changed.emit(
                host,
                f"{host}'s host key has CHANGED since it was trusted: someone may be in the "
                "middle, or the host was reinstalled. Check with its owner, then remove the old "
                "key (ssh-keygen -R) before trusting it again.",
            )
            return False
        if not key.known:
            self.key_unknown.emit(host, tuple(key.fingerprints))
            return False
        return True
