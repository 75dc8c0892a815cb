"""The commands of runs on other machines: ``agent`` (the far side, started by ``run
--host`` over SSH) and ``fetch`` (a session completed from the far copy)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from workbench.cli.paths import session_file
from workbench.engine.remote.agent import serve
from workbench.engine.remote.fetch import fetch_session
from workbench.engine.remote.hosts import DEFAULT_REMOTE_COMMAND


def add_agent(sub: Any) -> None:
    agent = sub.add_parser(
        "agent",
        help="the far side of `workbench run --host`: started over SSH, not run by hand",
        description="Speak the agent's JSON-lines protocol on stdin and stdout: what "
        "`workbench run --host HOST` starts on HOST over SSH. It is not run by hand.",
    )
    agent.set_defaults(handler=cmd_agent)


def add_remote_command(parser: argparse.ArgumentParser) -> None:
    """``--remote-workbench``, as ``run`` and ``fetch`` both take it."""
    parser.add_argument(
        "--remote-workbench",
        metavar="CMD",
        type=shlex.split,
        default=list(DEFAULT_REMOTE_COMMAND),
        help="the workbench command on the far host, as shell words (default: workbench)",
    )


def add_fetch(sub: Any) -> None:
    fetch = sub.add_parser(
        "fetch",
        help="complete a session measured on another host from that host's copy",
        description="Bring the far copy of a session recorded with `run --host` home, "
        "replacing the local one (a run whose connection dropped keeps only what arrived).",
    )
    fetch.add_argument("host", metavar="DEST", help="the host the session was measured on")
    fetch.add_argument("session", type=session_file, help="the local session file")
    add_remote_command(fetch)
    fetch.set_defaults(handler=cmd_fetch)


def cmd_agent(args: argparse.Namespace, console: Console) -> int:
    """Stdout is the channel: the process's own fd 1 (and its children's) goes to stderr, so
    nothing printed by accident can corrupt it."""
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return serve(sys.stdin.buffer, channel)


def cmd_fetch(args: argparse.Namespace, console: Console) -> int:
    path = Path(args.session)
    origin = fetch_session(args.host, args.remote_workbench, path)
    console.print(
        f"{path}: the far copy of run {origin.run_id} from {args.host}, complete",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    return 0
