"""Command-line options of ``workbench gui`` (no Qt import: the CLI parses them headless)."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.engine.base.errors import WorkbenchError

THEMES = ("dark", "light", "projector")
DEFAULT_FONT_PT = 11  # the window's base font size, in points
DEFAULT_EXPERIMENT = Path("experiments/slots-1-2-4.toml")


def add_gui_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--experiment",
        default=str(DEFAULT_EXPERIMENT),
        help="experiment file to load (default: experiments/slots-1-2-4.toml)",
    )
    parser.add_argument("--out", default="results", help="output folder (default: results/)")
    parser.add_argument("--session", help="open a recorded session (to look at or replay)")
    parser.add_argument(
        "--replay",
        type=int,
        choices=(1, 2, 5, 10),
        help="with --session: play it back at this speed at start",
    )
    parser.add_argument("--base-url", help="start in external mode against this server")
    parser.add_argument(
        "--api-key-env", metavar="NAME", help="environment variable with the server's API key"
    )
    parser.add_argument("--server-bin", help="llama-server binary to use")
    parser.add_argument("--theme", choices=THEMES, default="dark")
    parser.add_argument(
        "--font-size", type=int, default=DEFAULT_FONT_PT, help="base font size in points"
    )
    parser.add_argument("--size", default="1600x950", help="window size WIDTHxHEIGHT")
    parser.add_argument("--autorun", action="store_true", help="press Run at start")
    parser.add_argument(
        "--present",
        action="store_true",
        help="start in presentation mode: full screen, large fonts, captions (F5 leaves it)",
    )
    parser.add_argument("--screenshot", help="save a PNG of the window when the run ends")
    parser.add_argument(
        "--screenshot-at",
        type=float,
        metavar="SECONDS",
        help="with --session: take the screenshot at this time of the session instead "
        "(played up to it with --replay, else shown as it stood then)",
    )
    parser.add_argument("--quit-when-done", action="store_true", help="exit when the run ends")


def window_size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise WorkbenchError(f"--size must look like 1920x1080, got {text!r}") from None
    return width, height
