"""Paths a user types, checked as argparse ``type``s for what they must be (a session file, an
experiment file, a folder to write into), so a mix-up is said in those words, with the flag,
before anything is read or written, instead of as the operating system's ``Is a directory``
or ``File exists``. The text is returned as it was given."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.engine.analysis.library import SESSION_GLOB

SESSION_HELP = "a session file (*.session.sqlite; `workbench sessions` lists them)"


def session_file(text: str) -> str:
    """A session file; a folder is said to be one, with the command that lists the sessions
    in it (not counted here: a folder such as ``~`` would be walked whole before the line)."""
    if Path(text).is_dir():
        raise argparse.ArgumentTypeError(
            f"{text} is a folder, not a session file: `workbench sessions {text}` lists the "
            f"sessions ({SESSION_GLOB}) in it"
        )
    return text


def experiment_file(text: str) -> str:
    """An experiment TOML file, not the folder of them."""
    path = Path(text)
    if path.is_dir():
        found = sorted(path.glob("*.toml"))
        example = f" such as {found[0]}" if found else ""
        raise argparse.ArgumentTypeError(
            f"{text} is a folder: the experiment must be a TOML file{example}"
        )
    return text


def existing_folder(text: str) -> str:
    """A folder to read from: it must be there."""
    path = Path(text)
    if not path.is_dir():
        what = "is a file, not a folder" if path.exists() else "does not exist"
        raise argparse.ArgumentTypeError(f"{text} {what}")
    return text


def out_folder(text: str) -> str:
    """A folder to write into, made if missing: neither it nor a folder above it may be a
    file."""
    path = Path(text)
    for place in (path, *path.parents):
        if place.is_dir():
            break
        if place.exists():
            if place == path:
                raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
            raise argparse.ArgumentTypeError(f"{text} cannot be a folder: {place} is a file")
    return text
