"""A run's hosts, for the CLI and the window alike: ``local`` is this machine (the run in
this process), any other name a machine reached through its agent (``targets``)."""

from __future__ import annotations

import re

from workbench.engine.config.experiment import Experiment
from workbench.engine.remote.host_check import host_facts
from workbench.engine.remote.link import AgentLink
from workbench.engine.remote.protocol import HostFacts
from workbench.engine.remote.remote_runner import RemoteRunner
from workbench.engine.remote.targets import LOCAL, check_reachable, target_for
from workbench.engine.run.lifecycle import Runner
from workbench.engine.run.runner import ExperimentRunner, RunOptions

DEFAULT_REMOTE_COMMAND = ("workbench",)  # the far side's workbench, found on its PATH


def host_folder(host: str) -> str:
    """A host's own output folder's name (``user@box:22`` → ``user@box-22``), where several
    hosts run at once."""
    return re.sub(r"[^A-Za-z0-9@._-]+", "-", host).strip("-.") or "host"


def runner_for(
    host: str,
    experiment: Experiment,
    options: RunOptions,
    remote_command: list[str],
    model: str | None,
) -> Runner:
    """What runs ``experiment`` on ``host``; ``model`` (a path on that host) replaces the
    experiment's."""
    if host == LOCAL:
        chosen = experiment.with_overrides({"model": model}) if model else experiment
        return ExperimentRunner(chosen, options)
    return RemoteRunner(experiment, options, target_for(host), remote_command, model)


def check_host(
    host: str, model: str | None, server_bin: str | None, remote_command: list[str]
) -> HostFacts:
    """``host``'s facts for a run, before anything starts there; a ``WorkbenchError`` when
    the host cannot be asked (unreachable, no agent, another protocol)."""
    if host == LOCAL:
        return host_facts(model, server_bin)
    check_reachable(host)
    link = AgentLink(target_for(host), remote_command)
    try:
        link.hello()
        return link.check(model, server_bin)
    finally:
        link.close()
