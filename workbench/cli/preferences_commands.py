"""``workbench preferences``: what the workbench remembers between starts (the llama-server
chosen in the window, the model last picked, the Machine picker's hosts), and ``--reset`` to
forget it."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from rich.console import Console

from workbench.engine.config.preferences import (
    load_preferences,
    preferences_path,
    reset_preferences,
)


def add_preferences(sub: Any) -> None:
    preferences = sub.add_parser(
        "preferences", help="show what the workbench remembers between starts, or forget it"
    )
    preferences.add_argument("--reset", action="store_true", help="forget every choice")
    preferences.set_defaults(handler=cmd_preferences)


def cmd_preferences(args: argparse.Namespace, console: Console) -> int:
    path = preferences_path()
    if args.reset:
        forgot = reset_preferences(path)
        console.print(f"forgot {path}" if forgot else f"nothing to forget ({path})", markup=False)
        return 0
    preferences, notes = load_preferences(path)
    console.print(f"preferences: {path}", markup=False)
    for name, value in asdict(preferences).items():
        shown = ", ".join(value) if isinstance(value, tuple) else value
        console.print(f"  {name}: {shown or '-'}", markup=False)
    for note in notes:
        console.print(f"warning: {note}", markup=False)
    return 0
