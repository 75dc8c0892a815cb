"""Where an agent runs: the one factory from a host's name to its ``HostTarget``.

A host is an SSH destination (``remote.ssh``). ``WORKBENCH_AGENT_TRANSPORT=process`` runs
each host's agent as a subprocess of this machine instead, without SSH: a developer's and
the tests' way to take the whole remote path on one machine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from workbench.engine.remote.protocol import HostTarget

LOCAL = "local"  # this machine: no target, the run stays in this process
TRANSPORT_VARIABLE = "WORKBENCH_AGENT_TRANSPORT"


@dataclass(frozen=True)
class ProcessTarget:
    """A "host" that is a subprocess of this machine: its command runs as it is."""

    name: str

    def command(self, remote: list[str]) -> list[str]:
        return list(remote)


def by_process() -> bool:
    """Whether agents run as local subprocesses (``WORKBENCH_AGENT_TRANSPORT=process``)."""
    return os.environ.get(TRANSPORT_VARIABLE) == "process"


def target_for(host: str) -> HostTarget:
    """The target a host's agent is started through (never ``local``: it has none)."""
    assert host != LOCAL, "the local host runs in this process"
    if by_process():
        return ProcessTarget(host)
    from workbench.engine.remote.ssh import ssh_target

    return ssh_target(host)


def check_reachable(host: str) -> None:
    """One clear line if SSH cannot reach ``host`` (a subprocess "host" always can)."""
    if by_process():
        return
    from workbench.engine.remote.ssh import check_reachable as ssh_reachable

    ssh_reachable(host)
