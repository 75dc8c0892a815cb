"""``workbench watch``: a running llama-server watched, not loaded: its ``/slots`` polled
(``engine/watch``), a line for each task as it ends, each slot's state live on a terminal,
and what the watch saw at its end (the duration, or Ctrl-C)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from workbench.cli.bounds import Duration, Number
from workbench.engine.base.words import plural
from workbench.engine.server.external import api_key_headers, normalise_base_url, split_credentials
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.watcher import MIN_INTERVAL_S, Watched, watch

WATCH_FOR = Duration(1, 7 * 24 * 3600)
INTERVAL_S = Number(float, ())
BAR = 20  # characters of a slot's progress bar: the live view reads at 80 columns


def add_watch(sub: Any) -> None:
    parser = sub.add_parser(
        "watch",
        help="watch a running llama-server's slots (sends no load)",
        description="Poll a running llama-server's /slots and show its tasks as they run "
        "and end: which slot, its prompt and cached tokens, what it decoded. It sends no "
        "load. Ctrl-C (or --for) ends the watch and prints what it saw.",
    )
    parser.add_argument("url", help="the server's address, e.g. http://127.0.0.1:8080")
    parser.add_argument(
        "--interval",
        type=_interval,
        default=0.1,
        help="seconds between polls (default 0.1; a slow server is polled less often)",
    )
    parser.add_argument(
        "--for", dest="duration", type=WATCH_FOR, default=None, help="stop after: 90, 10m, 1h"
    )
    parser.add_argument(
        "--api-key-env", metavar="NAME", help="environment variable with the server's API key"
    )
    parser.set_defaults(handler=_watch)


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not MIN_INTERVAL_S <= value <= 60:
        raise argparse.ArgumentTypeError(
            f"must be seconds from {MIN_INTERVAL_S:g} to 60, got {text!r}"
        )
    return value


def _watch(args: argparse.Namespace, console: Console) -> int:
    url, headers = split_credentials(normalise_base_url(args.url))
    headers |= api_key_headers(args.api_key_env)
    console.print(
        f"watching {escape(url)} (/slots every {args.interval:g} s; "
        f"{'Ctrl-C ends it' if args.duration is None else f'for {args.duration:g} s'})"
    )
    view = SlotsView()
    with Live(view.table(), console=console, auto_refresh=False, transient=True) as live:

        def on_poll(t_s: float, slots: list[dict]) -> None:
            view.slots = slots
            live.update(view.table(), refresh=True)

        def on_ended(task: WatchedTask) -> None:
            live.console.print(task_line(task))

        watched = asyncio.run(_until_interrupted(url, args, headers, on_poll, on_ended))
    for line in summary(watched):
        console.print(line)
    return 0


async def _until_interrupted(
    url: str, args: argparse.Namespace, headers: dict[str, str], on_poll: Any, on_ended: Any
) -> Watched:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
        loop.add_signal_handler(signal.SIGINT, stop.set)
    try:
        return await watch(url, args.interval, args.duration, headers, on_ended, stop, on_poll)
    finally:
        with contextlib.suppress(NotImplementedError):
            loop.remove_signal_handler(signal.SIGINT)


class SlotsView:
    """One row a slot: its task, what it is doing and how far (a bar of its prompt while
    processed, of its context while decoding)."""

    def __init__(self) -> None:
        self.slots: list[dict] = []

    def table(self) -> Table:
        table = Table(box=None, pad_edge=False)
        for name in ("slot", "task", "state", "tokens", "context"):
            table.add_column(name, justify="right" if name in ("slot", "task") else "left")
        for s in self.slots:
            busy, decoded = s.get("is_processing"), s.get("n_decoded") or 0
            state = "idle" if not busy else ("decoding" if decoded else "prompt")
            sequence, n_ctx = s.get("n_prompt_tokens"), s.get("n_ctx")
            tokens = (
                f"{decoded:,} out" if decoded else (f"{sequence:,} in" if busy and sequence else "")
            )
            table.add_row(
                str(s.get("id")),
                str(s.get("id_task")) if busy else "",
                state,
                tokens,
                _bar(sequence, n_ctx) if busy else "",
            )
        return table


def _bar(tokens: int | None, of: int | None) -> str:
    if not tokens or not of:
        return ""
    share = min(1.0, tokens / of)
    filled = round(share * BAR)
    return "█" * filled + "·" * (BAR - filled) + f" {share:.0%}"


def task_line(task: WatchedTask) -> str:
    """One ended task in a line of at most 80 columns."""
    head = f"slot {task.slot:>2}  task {task.task:>6}  "
    if task.missed:
        tokens = (
            f"{task.sequence_tokens:,} tokens" if task.sequence_tokens else "its tokens unknown"
        )
        return head + f"ran between two polls ({tokens} of prompt and answer)"
    prompt = "prompt ?" if task.prompt_tokens is None else f"prompt {task.prompt_tokens:,}"
    if task.cached_tokens:
        prompt += f" ({task.cached_tokens:,} cached)"
    out = "1 token" if task.decoded == 1 else f"{task.decoded:,} tokens"
    at_least = "≥" if task.running_at_start else ""  # it began before the watch
    took = "" if task.gone_s is None else f", {at_least}{task.gone_s - task.seen_s:.2f} s seen"
    return head + f"{prompt}, {out} out{took}"


def summary(watched: Watched) -> list[str]:
    """What the watch saw, in a few lines: its polls, the tasks ended and running, and each
    slot's busy share."""
    tasks = watched.tasks
    missed = sum(1 for t in tasks.done if t.missed)
    running = len(tasks.tasks) - len(tasks.done)
    lines = [
        f"watched {watched.seconds:.1f} s: {plural(watched.polls, 'poll')} answered"
        + (f", {watched.unanswered} not (the server down or slow)" if watched.unanswered else "")
        + f"; {plural(len(tasks.done), 'task')} ended"
        + (f" ({missed} between two polls, seen by the id it left)" if missed else "")
        + f", {running} running"
    ]
    lines += [
        f"  slot {slot}: busy in {watched.busy_share(slot):.0%} of the polls"
        for slot in sorted(watched.busy | {t.slot: 0 for t in tasks.tasks})
    ]
    return lines
