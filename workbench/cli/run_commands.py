"""The commands that run something: ``run`` (an experiment, headless) and ``gui`` (the window).

``run`` takes the experiment through the engine's ``RunLifecycle``, as the window's engine
process does; what is the terminal's own is the display (a live table on a terminal, plain
lines in a log), turning SIGTERM and SIGHUP into the Ctrl-C the lifecycle cancels on, and
the exit status.
"""

from __future__ import annotations

import argparse
import signal
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape

from workbench.cli.exit_codes import (
    EXIT_CANCELLED,
    EXIT_CONFIG_FAILED,
    EXIT_ERROR,
    EXIT_REQUESTS_FAILED,
)
from workbench.cli.progress import ProgressState
from workbench.cli.tables import event_line, results_table, run_line
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.experiment import load_experiment
from workbench.engine.events import Notice
from workbench.engine.run.lifecycle import STOP_SIGNALS, RunLifecycle
from workbench.engine.run.runner import ExperimentRunner, RunOptions, RunResult
from workbench.ui.options import add_gui_arguments


def add_run(sub: Any) -> None:
    run = sub.add_parser("run", help="run an experiment file and save a session")
    run.add_argument("experiment", help="experiment TOML file (see experiments/)")
    run.add_argument("--out", default="results", help="output folder (default: results/)")
    run.add_argument("--base-url", help="measure a server started elsewhere (external mode)")
    run.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="with --base-url: send the bearer token held in this environment variable "
        "(read at run time, never stored)",
    )
    run.add_argument("--server-bin", help="llama-server binary to use")
    run.add_argument("--model", help="GGUF model file (overrides [server] model)")
    run.add_argument("--quiet", action="store_true", help="no live progress, only the results")
    run.set_defaults(handler=cmd_run)


def add_gui(sub: Any) -> None:
    gui = sub.add_parser("gui", help="the desktop workbench")
    add_gui_arguments(gui)
    gui.set_defaults(handler=cmd_gui)


def cmd_gui(args: argparse.Namespace, console: Console) -> int:
    from workbench.ui.app import run_gui  # Qt only for the window

    return run_gui(args)


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    def on_signal(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # SIGTERM and SIGHUP (a closed terminal) end the run like Ctrl-C, from the start: a
    # signal while preparing must say so, not end the process in silence.
    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        return _run(args, console)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(args: argparse.Namespace, console: Console) -> int:
    experiment = load_experiment(args.experiment)
    if args.model:
        experiment = experiment.with_overrides(server={"model": args.model})
    if args.api_key_env and not args.base_url:
        raise WorkbenchError("--api-key-env is for an external server: give --base-url too")
    options = RunOptions(
        Path(args.out),
        base_url=args.base_url,
        server_bin=args.server_bin,
        api_key_env=args.api_key_env,
    )
    runner = ExperimentRunner(experiment, options)
    lifecycle = RunLifecycle(
        runner,
        while_stopping=lambda: console.print(
            "[yellow]already stopping: the session is being closed[/yellow]"
        ),
    )
    lifecycle.prepare()
    state = ProgressState()
    console.print(
        run_line(experiment.name, len(runner.configs), runner.session_path), highlight=False
    )
    show_live = console.is_terminal and not args.quiet
    lifecycle.start()
    try:
        if show_live:
            with Live(state.render(), console=console, auto_refresh=False) as live:
                _follow(lifecycle, state, console, live)
        else:
            _follow(lifecycle, state, console, None)
    finally:
        result = lifecycle.finish()
    if not show_live:
        console.print(results_table(result.summaries, title=experiment.name))
    tables = result.tables
    assert tables is not None  # the lifecycle wrote them
    if tables.error is not None:
        raise WorkbenchError(tables.error)
    console.print(
        f"session: {result.session_path}\ntables: {tables.concurrency}, {tables.requests}",
        highlight=False,
        markup=False,
    )
    return _exit_status(result, console)


def _exit_status(result: RunResult, console: Console) -> int:
    """0 only when every request of every configuration succeeded, so a script can tell."""
    if result.status == "cancelled":
        console.print("[yellow]run cancelled; the session is marked cancelled[/yellow]")
        return EXIT_CANCELLED
    if result.status == "failed":
        console.print(f"[red]run failed: {escape(result.error or '')}[/red]", highlight=False)
        return EXIT_ERROR
    if any(s.status != "ok" for s in result.summaries):
        return EXIT_CONFIG_FAILED
    failed = sum(s.value("failed") or 0 for s in result.summaries)
    if failed:
        console.print(f"[red]{failed} request(s) failed[/red]", highlight=False)
        return EXIT_REQUESTS_FAILED
    return 0


def _follow(
    lifecycle: RunLifecycle, state: ProgressState, console: Console, live: Live | None
) -> None:
    """Fold events into the display until the run ends; Ctrl-C cancels the run."""

    def show(events: list[Any]) -> None:
        now = time.monotonic()
        for event in events:
            state.apply(event, now)
            line = event_line(event)
            if line and (live is None or isinstance(event, Notice)):
                console.print(line, highlight=False)
        if live is not None:
            live.update(state.render(now), refresh=True)

    def say_stopping() -> None:
        console.print(
            "[yellow]stopping: cancelling streams and servers; "
            "the session keeps what finished[/yellow]"
        )

    lifecycle.follow(show, on_interrupt=say_stopping)
