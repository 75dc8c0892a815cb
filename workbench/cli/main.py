"""``workbench``: run experiments headless, show and export sessions.

This module only builds the parser from the command groups and dispatches; each command
lives with its group (``run_commands``, ``session_commands``, ``capacity_commands``) and
prints through ``tables``.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from workbench import __version__
from workbench.cli import (
    agent_commands,
    calibrate_commands,
    capacity_commands,
    predict_commands,
    preferences_commands,
    run_commands,
    session_commands,
    tune_commands,
    watch_commands,
)
from workbench.cli.exit_codes import EXIT_CANCELLED, EXIT_ERROR
from workbench.cli.tables import output_console, print_error
from workbench.engine.base.errors import WorkbenchError

# Each adds one subcommand and its handler, in the order ``workbench --help`` lists them.
COMMANDS = (
    run_commands.add_run,
    session_commands.add_show,
    session_commands.add_export,
    session_commands.add_import,
    session_commands.add_sessions,
    session_commands.add_compare,
    capacity_commands.add_plan,
    capacity_commands.add_slo,
    capacity_commands.add_roofline,
    session_commands.add_verdicts,
    calibrate_commands.add_calibrate,
    predict_commands.add_predict,
    tune_commands.add_tune,
    watch_commands.add_watch,
    run_commands.add_gui,
    preferences_commands.add_preferences,
    agent_commands.add_fetch,
    agent_commands.add_agent,
)


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser: an argument it does not know is reported with the command's
    usage (``workbench run: error: unrecognized arguments``), not passed up to the top
    level's, whose usage lists only the commands."""

    def parse_known_args(  # type: ignore[override]
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="Measure how a local LLM server behaves under concurrent load.",
    )
    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    for add_command in COMMANDS:
        add_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = output_console()
    try:
        return args.handler(args, console)
    except WorkbenchError as exc:
        print_error(str(exc))
        return EXIT_ERROR
    except KeyboardInterrupt:  # Ctrl-C outside a run's own follow and finish (preparing)
        Console(stderr=True).print("interrupted")
        return EXIT_CANCELLED


if __name__ == "__main__":
    sys.exit(main())
