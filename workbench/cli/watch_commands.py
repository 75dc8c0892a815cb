"""``workbench watch``: a running server watched, not loaded: its ``/slots`` and
``/metrics`` polled (``engine/watch``), a line for each task as it ends, each slot's state
and the queue live on a terminal, and what the watch saw at its end (the duration, or
Ctrl-C), with a verdict."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from workbench.cli.bounds import Duration
from workbench.cli.exit_codes import EXIT_SLO_MISSED
from workbench.cli.paths import out_folder
from workbench.cli.tables import Column, Fitted
from workbench.engine.analysis.export import write_csv
from workbench.engine.base.words import plural
from workbench.engine.server.external import api_key_headers, normalise_base_url, split_credentials
from workbench.engine.tune.records import SloTarget
from workbench.engine.tune.slo_targets import parse_slos
from workbench.engine.tune.verdict import clock
from workbench.engine.watch.compare import WatchComparison, compare_watches
from workbench.engine.watch.record import SUFFIX, KeptInfo, Recorder, kept_at, read
from workbench.engine.watch.server_latencies import FACTS
from workbench.engine.watch.slo_judged import MISSED, Judged, judge_kept
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.summary import WatchSummary, summarize, window_latencies
from workbench.engine.watch.unseen import BETWEEN_POLLS
from workbench.engine.watch.watcher import (
    INTERVAL_S,
    WATCH_FOR_S,
    Endpoints,
    Load,
    Watched,
    WatchError,
    interval_from_text,
    watch,
)

WATCH_FOR = Duration(*WATCH_FOR_S)
BAR = 20  # characters of a slot's progress bar: the live view reads at 80 columns


def add_watch(sub: Any) -> None:
    parser = sub.add_parser(
        "watch",
        help="watch a running server's slots and queue (sends no load)",
        description="Poll a running server's /slots and /metrics and show its tasks as "
        "they run and end (which slot, its prompt and cached tokens, what it decoded) and "
        "its queue. It sends no load. Ctrl-C (or --for) ends the watch and prints what it "
        "saw, with a verdict.",
    )
    parser.add_argument("url", help="the server's address, e.g. http://127.0.0.1:8080")
    parser.add_argument(
        "--interval",
        type=_interval,
        default=INTERVAL_S,
        help=f"seconds between polls (default {INTERVAL_S:g}; a slow server is polled less often)",
    )
    parser.add_argument(
        "--for", dest="duration", type=WATCH_FOR, default=None, help="stop after: 90, 10m, 1h"
    )
    parser.add_argument(
        "--api-key-env", metavar="NAME", help="environment variable with the server's API key"
    )
    parser.add_argument(
        "--out",
        type=out_folder,
        default="results",
        help="where the watch is kept as it goes (default: results/)",
    )
    parser.add_argument(
        "--slots-url",
        metavar="URL",
        help="the server's own /slots where a proxy stands at URL (llama-swap, LiteLLM)",
    )
    parser.add_argument("--metrics-url", metavar="URL", help="the server's own /metrics, likewise")
    add_slo_flag(parser)
    parser.set_defaults(handler=_watch)


def add_slo_flag(parser: argparse.ArgumentParser, kept: bool = False) -> None:
    """``--slo``: on ``watch``, kept with the watch; on ``show`` of a kept watch (``kept``),
    in place of those it keeps."""
    parser.add_argument(
        "--slo",
        action="append",
        default=[],
        metavar="METRIC_PCT:MS",
        help="judge the watch against a percentile limit, e.g. ttft_p90:2000 (ttft, tpot, "
        f"e2el; itl from vLLM's and SGLang's histograms); exit {EXIT_SLO_MISSED} if one is missed"
        + (
            "; without it, the SLOs the watch was given are judged: these replace them"
            if kept
            else "; kept in the watch's file, where `workbench show` and a replay judge them"
        ),
    )


def _interval(text: str) -> float:
    try:
        return interval_from_text(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _watch(args: argparse.Namespace, console: Console) -> int:
    slos = parse_slos(args.slo) if args.slo else ()  # a bad one is one line, before watching
    url, headers = split_credentials(normalise_base_url(args.url))
    headers |= api_key_headers(args.api_key_env)
    endpoints = Endpoints.of(url, args.slots_url, args.metrics_url)
    moved = endpoints.describe(url)
    console.print(
        f"watching {escape(url)} (every {args.interval:g} s; "
        f"{'Ctrl-C ends it' if args.duration is None else f'for {args.duration:g} s'}"
        + (f"; {escape(moved)}" if moved else "")
        + ")"
    )
    view = SlotsView()
    recorder = Recorder(kept_at(Path(args.out)), url, args.interval, slos)
    path = recorder.path
    with Live(view.table(), console=console, auto_refresh=False, transient=True) as live:

        def on_start(watched: Watched) -> None:
            view.watched = watched
            for line in what_is_watched(watched):
                live.console.print(line)

        def on_poll(t_s: float, slots: list[dict] | None, load: Load | None) -> None:
            if view.watched is not None and (said := view.gap_line(view.watched)):
                live.console.print(said)
            view.slots, view.load = slots or [], load or view.load
            live.update(view.table(), refresh=True)

        def on_ended(task: WatchedTask) -> None:
            live.console.print(task_line(task))

        try:
            watched = asyncio.run(
                _until_interrupted(
                    url, args, headers, on_ended, on_poll, on_start, endpoints, recorder
                )
            )
        except WatchError:  # the address could not be watched: nothing to keep
            recorder.abandon()
            raise
    recorder.close(watched)
    for line in summary_lines(summarize(watched)):
        console.print(line)
    console.print(f"kept in {escape(str(path))} (`workbench show` reads it)")
    return judged_slos(path, slos, console)


def judged_slos(path: Path, slos: Sequence[SloTarget], console: Console) -> int:
    """The SLOs judged on the kept watch, a few lines each; the exit status (a missed one:
    ``EXIT_SLO_MISSED``; one it cannot tell is not missed)."""
    if not slos:
        return 0
    judged = judge_kept(path, slos)
    console.print("SLOs on the watch:")
    for one in judged:
        for line in slo_lines(one):
            console.print(line, highlight=False, markup=False)
    return EXIT_SLO_MISSED if any(j.outcome == MISSED for j in judged) else 0


def slo_lines(judged: Judged) -> list[str]:
    """One SLO on a watch: its reading against its limit and the outcome, then what it was
    read from, wrapped to 80 columns."""
    slo = judged.slo
    name = f"{slo.metric.upper()} p{slo.percentile}"
    if judged.value_ms is None:
        head = f"  {name}: {judged.outcome}"
    else:
        margin = f" ±{judged.margin_ms:,.0f}" if judged.margin_ms else ""
        head = (
            f"  {name} {judged.value_ms:,.0f}{margin} ms against {slo.limit_ms:,g} ms: "
            f"{judged.outcome}"
        )
    return [head, *textwrap.wrap(judged.basis, 80, initial_indent="    ", subsequent_indent="    ")]


def what_is_watched(watched: Watched) -> list[str]:
    """What the first poll found to watch, where it is less than both endpoints."""
    said = []
    if not watched.slots_on:
        said.append("no /slots (vLLM and SGLang have none; llama-server: --no-slots): no tasks")
    if watched.kind is None:
        said.append("no /metrics (llama-server: start it with --metrics): the queue is not seen")
    if watched.memory_note:
        said.append(watched.memory_note)
    return said


async def _until_interrupted(
    url: str, args: argparse.Namespace, headers: dict[str, str], *on: Any
) -> Watched:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
        loop.add_signal_handler(signal.SIGINT, stop.set)
    on_ended, on_poll, on_start, endpoints, keeper = on
    try:
        return await watch(
            url,
            args.interval,
            args.duration,
            headers,
            on_ended,
            stop,
            on_poll,
            on_start,
            endpoints,
            keeper,
        )
    finally:
        with contextlib.suppress(NotImplementedError):
            loop.remove_signal_handler(signal.SIGINT)


class SlotsView:
    """One row a slot: its task, what it is doing and how far (a bar of the context it
    holds), and below them the requests running and waiting, where ``/metrics`` says, and
    the server's memory, where it is watched."""

    def __init__(self) -> None:
        self.slots: list[dict] = []
        self.load: Load | None = None
        self.watched: Watched | None = None
        self._gaps_said = (0, False)  # the gaps said, and whether the last one's end

    def gap_line(self, watched: Watched) -> str:
        """A line where the server has stopped or started answering since the last poll."""
        said = (watched.gaps_count, watched.down_since is None)
        if said == self._gaps_said or not watched.gaps:
            return ""
        self._gaps_said, gap = said, watched.gaps[-1]
        if gap.up_s is None:
            return f"{gap.down_s:.1f} s: server down (no answer); the watch goes on"
        return f"{gap.up_s:.1f} s: the server answers again, after {gap.up_s - gap.down_s:.1f} s"

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
        said = []
        load = self.load
        if load is not None and load.running is not None and load.waiting is not None:
            said.append(f"{load.running:.0f} running, {load.waiting:.0f} waiting")
        if load is not None and load.kv_usage is not None:
            said.append(f"KV cache {load.kv_usage:.0%} in use")
        if self.watched is not None and self.watched.memory_bytes is not None:
            said.append(f"the server {self.watched.memory_bytes / 2**20:,.0f} MiB")
        if self.watched is not None:
            said += live_latencies(self.watched)
        table.caption = "; ".join(said) or None
        return table


def live_latencies(watched: Watched) -> list[str]:
    """The server's own latency percentiles over the last minute, where it has them."""
    span_s, found = window_latencies(watched)
    said = [
        f"{FACTS[f.fact]} p50 {f.p50 * 1000:,.0f}, p90 {f.p90 * 1000:,.0f} ms"
        for f in found
        if f.p50 is not None and f.p90 is not None
    ]
    return [f"the server's, last {span_s:.0f} s: " + ", ".join(said)] if said else []


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
    at_least_prompt = "≥" if task.decoding_s is None else ""  # seen on its prompt alone
    prompt = (
        "prompt ?"
        if task.prompt_tokens is None
        else f"prompt {at_least_prompt}{task.prompt_tokens:,}"
    )
    if task.cached_tokens:
        prompt += f" ({task.cached_tokens:,} cached)"
    out = ("1 token" if task.decoded == 1 else f"{task.decoded:,} tokens") + " out"
    if not task.decoded_all:  # its slot went on to another task: its last tokens unseen
        out = "≥" + out if task.decoded else "its tokens unseen"
    at_least = "≥" if task.running_at_start else ""  # it began before the watch
    took = "" if task.gone_s is None else f", {at_least}{task.gone_s - task.seen_s:.2f} s seen"
    return head + f"{prompt}, {out}{took}"


def unseen_lines(s: WatchSummary) -> list[str]:
    """The tasks no poll saw, as the token counters estimate them (llama-server), or the
    requests the server counted (vLLM, SGLang)."""
    if s.requests_finished is not None:
        return [f"  {plural(round(s.requests_finished), 'request')} finished (the server's count)"]
    u = s.unseen
    if u is None or not round(u.tasks):  # none: the tasks ended say it all
        return []
    sized = (
        f"the mean of the {plural(u.sample, 'task')} that ran between two polls"
        if u.sized_by == BETWEEN_POLLS
        else f"the mean of the {plural(u.sample, 'task')} seen to their end, longer than the "
        "unseen: a low estimate"
    )
    said = (
        f"≈ {u.tasks:,.0f} more ended between polls, unseen (estimated from the token "
        f"counters: {u.tokens:,.0f} tokens no task seen accounts for, at {u.size:,.0f} "
        f"tokens a task, {sized})"
    )
    return textwrap.wrap(said, 80, initial_indent="  ", subsequent_indent="    ")


def summary_lines(s: WatchSummary) -> list[str]:
    """What the watch saw, in a few lines of at most 80 columns: its polls and tasks, each
    slot's busy share, the queue and the requests at once where ``/metrics`` said, and the
    verdict."""
    lines = [
        f"watched {s.seconds:.1f} s: {plural(s.polls, 'poll')} answered"
        + (f", {s.unanswered} not (the server down or slow)" if s.unanswered else ""),
        f"  {plural(s.tasks_ended, 'task')} ended"
        + (
            f" ({s.tasks_missed} between two polls, seen by the id it left)"
            if s.tasks_missed
            else ""
        )
        + f", {s.tasks_running} running",
        *unseen_lines(s),
    ]
    if s.gaps_count:
        shown = ", ".join(
            f"{g.down_s:.1f}-{'end' if g.up_s is None else f'{g.up_s:.1f}'} s" for g in s.gaps[-3:]
        )
        lines.append(
            f"  server down {plural(s.gaps_count, 'time')}, {s.down_s:.1f} s in all "
            f"({'last: ' if s.gaps_count > 3 else ''}{shown})"
        )
    lines += [f"  slot {slot}: busy in {share:.0%} of the polls" for slot, share in s.busy.items()]
    if s.queue_max is not None and s.queued_share is not None:
        lines.append(
            f"  queue: p50 {s.queue_p50:.0f}, p90 {s.queue_p90:.0f}, max {s.queue_max:.0f}; "
            f"a queue in {s.queued_share:.0%} of the polls"
        )
    if s.wait_estimate_s is not None:
        lines.append(
            f"  wait in the queue: {s.wait_estimate_s:.2f} s a request or more "
            "(estimated, Little's law)"
        )
    if s.in_server_max is not None:
        lines.append(
            f"  requests in the server at once: p50 {s.in_server_p50:.0f}, p90 "
            f"{s.in_server_p90:.0f}, p99 {s.in_server_p99:.0f}, max {s.in_server_max:.0f}"
        )
    if s.kv_use_p50 is not None and s.kv_use_max is not None:
        lines.append(
            f"  KV cache in use: p50 {s.kv_use_p50:.0f} %, max {s.kv_use_max:.0f} % "
            "(the server's gauge)"
        )
    rates = [
        f"{what} {rate:,.1f} tok/s"
        for what, rate in (("prompt", s.prompt_tok_s), ("generated", s.output_tok_s))
        if rate is not None
    ]
    if rates:
        lines.append("  " + ", ".join(rates) + " over the watch (its counters)")
    for found in s.server_latencies:
        if found.p50 is None or found.p90 is None or found.p99 is None:
            continue
        lines.append(
            f"  the server's {FACTS[found.fact]}: p50 {found.p50 * 1000:,.0f}, p90 "
            f"{found.p90 * 1000:,.0f}, p99 {found.p99 * 1000:,.0f} ms of "
            f"{found.observed:,} (its histogram)"
        )
    if s.memory_max_bytes is not None:
        lines.append(f"  the server's memory: {s.memory_max_bytes / 2**20:,.0f} MiB at most")
    lines.append(f"verdict: {s.verdict}")
    return lines


def show_watch(path: Path, console: Console, slo_texts: list[str]) -> int:
    """``workbench show`` of a kept watch: where and when it watched, its summary, and its
    SLOs judged on it: those given (``--slo`` as typed), else those it keeps."""
    given = parse_slos(slo_texts) if slo_texts else ()  # a bad one is one line, before reading
    kept = read(path)
    slos = given or kept.slos
    console.print(
        f"watch of {escape(kept.url)} from {escape(kept.started)}, every {kept.interval_s:g} s",
        highlight=False,
    )
    for line in summary_lines(summarize(kept.watched)):
        console.print(line, highlight=False)
    return judged_slos(path, slos, console)


def _figure_text(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "%":
        return f"{value:.0f} %"
    text = f"{value:,.0f}" if abs(value) >= 100 or value == int(value) else f"{value:,.2g}"
    return f"{text} {unit}".rstrip()


def short_name(name: str) -> str:
    """A kept watch's file name as a column's header: ``20261206-224402`` (its start)."""
    return name.removesuffix(SUFFIX).removeprefix("watch-")


def comparison_lines(comparison: WatchComparison) -> tuple[Fitted, list[str]]:
    """Kept watches side by side: a row a figure, a column a watch (its file's name), then
    where and when each watched, its verdict, and what is not like for like."""
    columns = [Column("figure", "left"), *(Column(short_name(n)) for n in comparison.names)]
    rows = [
        [row.figure, *(_figure_text(v, row.unit) for v in row.values)] for row in comparison.rows
    ]
    table = Fitted(columns, rows, title="Watches side by side")
    lines = []
    for name, url, started, verdict in zip(
        comparison.names, comparison.urls, comparison.started, comparison.verdicts, strict=True
    ):
        lines.append(f"{short_name(name)}: {url} from {started}")
        lines += textwrap.wrap(
            f"verdict: {verdict}", 80, initial_indent="  ", subsequent_indent="  "
        )
    lines += [f"not like for like: {warning}" for warning in comparison.warnings]
    return table, lines


def compare_kept(paths: list[Path], csv_path: str | None, console: Console) -> int:
    """``workbench compare`` of kept watches, and its table as CSV where asked."""
    comparison = compare_watches(paths)
    table, lines = comparison_lines(comparison)
    console.print(table)
    for line in lines:
        console.print(line, highlight=False, markup=False)
    if csv_path:
        rows = [
            {
                "figure": row.figure,
                "unit": row.unit,
                **dict(zip(comparison.names, row.values, strict=True)),
            }
            for row in comparison.rows
        ]
        write_csv(Path(csv_path), rows, ["figure", "unit", *comparison.names])
        console.print(f"wrote {csv_path}", markup=False)
    return 0


def print_kept(console: Console, infos: list[KeptInfo]) -> None:
    """The kept watches found: when, where, how long, how many tasks; then each file."""
    rows = [
        [str(n), info.error, "-", "-", "-", "-"]
        if info.error
        else [
            str(n),
            info.started.replace("T", " "),
            info.url,
            info.kind,
            clock(info.seconds),
            f"{info.tasks:,}",
        ]
        for n, info in enumerate(infos, 1)
    ]
    names = ("#", "started", "watched", "metrics", "for", "tasks")
    columns = [Column(n, "right" if n in ("#", "for", "tasks") else "left") for n in names]
    console.print(Fitted(columns, rows, title="Watches", keys=2))
    console.print("files:", highlight=False)
    for n, info in enumerate(infos, 1):
        console.print(f"{n:>3}  {info.path}", soft_wrap=True, markup=False, highlight=False)
