"""``workbench tune``: the server settings that meet latency SLOs at a number of users, or
on a window of a recorded trace, searched within a time budget (``engine/tune/search``),
with a progress bar and an ETA; it writes ``recommendation.json``, the Pareto chart and a
session of every verification run, and prints the command line to serve with."""

from __future__ import annotations

import argparse
import signal
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn
from rich.table import Table

from workbench.cli.bounds import (
    BUDGET,
    SHARE_ONLINE,
    TIME_SCALE,
    TOKENS,
    TRACE_POINT,
    TRACE_ROWS,
    TRACE_STRETCH,
    USERS,
)
from workbench.cli.exit_codes import EXIT_CANCELLED, EXIT_NOT_VERIFIED
from workbench.cli.paths import out_folder
from workbench.engine.analysis.slo import peak_users
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.settings import TIME_FORMS
from workbench.engine.run.lifecycle import STOP_SIGNALS
from workbench.engine.tune.answer import write_recommendation
from workbench.engine.tune.records import (
    Recommendation,
    TuneProgress,
    TuneRequest,
    rounded,
    trace_traffic,
)
from workbench.engine.tune.search import tune
from workbench.engine.tune.slo_targets import parse_slos, value_ms
from workbench.engine.tune.verdict import progress_words, time_spent, verdict_words

DEFAULT_BUDGET = "10m"
FOLLOW_S = 0.2
WINDOW = {  # the flags that cut a trace's window, and the trace setting each sets
    "--trace-start": "trace_start_s",
    "--trace-duration": "trace_duration_s",
    "--trace-requests": "max_requests",
    "--time-scale": "time_scale",
}


def add_tune(sub: Any) -> None:
    parser = sub.add_parser(
        "tune",
        help="find the server settings that meet latency SLOs at a number of users",
        description="Search --space for the llama-server settings that meet every --slo at "
        "--users concurrent users, or on a window of a recorded --trace (the trace is the "
        "load): what does not fit in memory is left out, the scheduler model ranks the rest, "
        "short real runs verify the best, and the winner's highest Poisson request rate "
        "within the SLO is bracketed, all within --budget.",
    )
    parser.add_argument(
        "--slo",
        action="append",
        default=[],
        metavar="METRIC_PCT:MS",
        help="a percentile limit, e.g. ttft_p90:2000 or tpot_p50:120 (ttft, tpot, itl, e2el "
        "at p50, p90 or p99; stall_p99, the streams' generation stalls); give one or more",
    )
    users = parser.add_mutually_exclusive_group()
    users.add_argument(
        "--users", type=USERS, help="concurrent users (requests in flight); not with --trace"
    )
    users.add_argument(
        "--registered", type=USERS, help="registered users: --online of them are concurrent"
    )
    parser.add_argument(
        "--online",
        type=SHARE_ONLINE,
        default=0.05,
        help="with --registered: the share online at peak, above 0 and at most 1 (0.05)",
    )
    parser.add_argument(
        "--space",
        default="",
        help='the settings to search, e.g. "slots=1..16; ctx>=4096; cache_type_k=f16,q8_0; '
        'flash_attn=on,off; threads" (default: slots; with a stall SLO, slots and batch_size)',
    )
    parser.add_argument(
        "--draft-model",
        metavar="FILE",
        help="a draft model (GGUF) for speculative decoding: every combination is tried with "
        "it and without (to search draft_max, give the draft in --space: draft_model=FILE; "
        "draft_max=2,4); the model does not predict drafting, so those are measured",
    )
    parser.add_argument(
        "--budget",
        type=BUDGET,
        default=BUDGET(DEFAULT_BUDGET),
        help=f"the whole search's time: {TIME_FORMS} (default {DEFAULT_BUDGET})",
    )
    traffic = parser.add_argument_group(
        "traffic", "what each user sends (default: the built-in prompts), or a trace's window"
    )
    traffic.add_argument("--input-tokens", type=TOKENS, help="each prompt's length in tokens")
    traffic.add_argument("--max-tokens", type=USERS, help="tokens each request generates")
    traffic.add_argument("--requests", type=USERS, help="requests each verification run sends")
    sent = traffic.add_mutually_exclusive_group()
    sent.add_argument(
        "--trace",
        metavar="FILE",
        help="replay a window of a recorded trace: the trace is the load (no --users)",
    )
    sent.add_argument(
        "--conversations-file", metavar="FILE", help="replay a conversations file (measured only)"
    )
    traffic.add_argument(
        "--trace-start",
        type=TRACE_POINT,
        metavar="TIME",
        help=f"with --trace: the window starts this far into it, as recorded ({TIME_FORMS})",
    )
    traffic.add_argument(
        "--trace-duration",
        type=TRACE_STRETCH,
        metavar="TIME",
        help="with --trace: only the rows that arrive within this long of its start "
        f"({TIME_FORMS}; 0: to its end)",
    )
    traffic.add_argument(
        "--trace-requests",
        type=TRACE_ROWS,
        metavar="N",
        help="with --trace: at most N rows of the window (0: every row)",
    )
    traffic.add_argument(
        "--time-scale",
        type=TIME_SCALE,
        metavar="X",
        help="with --trace: sent X times faster than recorded (2: in half the time)",
    )
    parser.add_argument("--model", help="GGUF model file (default: the default model)")
    parser.add_argument("--server-bin", help="llama-server binary to use")
    parser.add_argument(
        "--out",
        type=out_folder,
        help="folder for recommendation.json, pareto.png and the session "
        "(default: results/tune-DATE-TIME)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar, only the answer")
    parser.set_defaults(handler=cmd_tune)


def _traffic(args: argparse.Namespace) -> dict[str, Any]:
    traffic: dict[str, Any] = {}
    if args.input_tokens is not None:
        traffic["input_tokens"] = args.input_tokens
    if args.max_tokens is not None:
        traffic["max_tokens"] = args.max_tokens
    if args.requests is not None:
        traffic["requests"] = args.requests
    if args.trace:
        window = {setting: getattr(args, _dest(flag)) for flag, setting in WINDOW.items()}
        traffic.update(trace_traffic(args.trace, window))
    if args.conversations_file:
        traffic.update(
            kind="conversations", conversations_file=str(Path(args.conversations_file).resolve())
        )
    return traffic


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def _load(args: argparse.Namespace) -> int | None:
    """The users at once the flags give, or None with a trace, whose window is the load;
    users given with a trace, or neither, is one line."""
    given = (
        "--users"
        if args.users is not None
        else ("--registered" if args.registered is not None else None)
    )
    if args.trace:
        for flag, instead in (("--requests", "--trace-requests N"), ("--input-tokens", None)):
            if getattr(args, _dest(flag)) is not None:
                rows = f"; {instead} bounds them" if instead else ""
                raise WorkbenchError(
                    f"{flag} sets generated traffic: with --trace each row of the window is a "
                    f"request as long as it says{rows}"
                )
        if given:
            raise WorkbenchError(
                f"{given} sets generated traffic's load: with --trace the trace window is the "
                "load (its requests at once are estimated from it, then measured); leave it out"
            )
        return None
    if window := [flag for flag in WINDOW if getattr(args, _dest(flag)) is not None]:
        raise WorkbenchError(f"{window[0]} cuts a window of a trace: give --trace FILE too")
    if given is None:
        raise WorkbenchError(
            "give the load: --users N or --registered N, or --trace FILE (its window is the load)"
        )
    return peak_users(args.registered, args.online) if args.users is None else args.users


def request_of(args: argparse.Namespace) -> TuneRequest:
    """The tune the flags ask for; a bad SLO, or a load given twice or not at all, is one
    line."""
    slos = parse_slos(args.slo)
    users = _load(args)
    out = (
        Path(args.out)
        if args.out
        else Path("results") / datetime.now().strftime("tune-%Y%m%d-%H%M%S")
    )
    return TuneRequest(
        slos,
        users,
        args.model,
        _traffic(args),
        args.space,
        args.budget,
        out,
        args.server_bin,
        args.draft_model,
    )


def cmd_tune(args: argparse.Namespace, console: Console) -> int:
    request = request_of(args)
    if args.registered is not None:
        console.print(
            f"peak concurrent users = {args.registered} registered x {args.online:g} online "
            f"= {request.users}"
        )

    def on_signal(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        outcome = _follow(request, console, show_bar=console.is_terminal and not args.quiet)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if isinstance(outcome, BaseException):
        raise outcome
    recommendation, cancelled = outcome
    return _report(recommendation, request, console, cancelled)


def _follow(
    request: TuneRequest, console: Console, show_bar: bool
) -> tuple[Recommendation, bool] | BaseException:
    """Run the tune on a thread of its own, showing its progress; Ctrl-C (or SIGTERM) asks
    it to stop, and it returns what it found, its servers stopped."""
    cancel = threading.Event()
    latest: list[TuneProgress] = []
    outcome: list[Recommendation | BaseException] = []

    def work() -> None:
        try:
            outcome.append(tune(request, latest.append, cancel))
        except BaseException as exc:  # handed to the main thread, which prints it
            outcome.append(exc)

    thread = threading.Thread(target=work, name="tune", daemon=True)
    bar = Progress(
        TextColumn("[bold]{task.fields[phase]}"),
        BarColumn(),
        TextColumn("{task.fields[clock]}"),
        TextColumn("{task.description}"),
        console=console,
        transient=True,
        disable=not show_bar,
    )
    task = bar.add_task("starting", total=request.budget_s, phase="plan", clock="")
    said = ""
    thread.start()
    with bar:
        while thread.is_alive():
            try:
                thread.join(FOLLOW_S)
            except KeyboardInterrupt:
                if not cancel.is_set():
                    cancel.set()
                    console.print(
                        "[yellow]stopping: the servers are stopped, what was measured kept[/yellow]"
                    )
                continue
            if latest:
                now = latest[-1]
                bar.update(
                    task,
                    completed=min(now.elapsed_s, now.budget_s),
                    description=escape(now.text),
                    phase=now.phase,
                    clock=time_spent(now),
                )
                if not show_bar and now.text != said:
                    said = now.text
                    console.print(progress_words(now), markup=False, highlight=False)
    found = outcome[0]
    if isinstance(found, BaseException):
        return found
    return found, cancel.is_set()


def _report(r: Recommendation, request: TuneRequest, console: Console, cancelled: bool) -> int:
    folder = request.out_dir
    folder.mkdir(parents=True, exist_ok=True)
    console.print(tried_table(r))
    path = write_recommendation(r, folder)
    from workbench.ui.exports.pareto import write_pareto_chart  # Qt only for the chart

    chart = folder / "pareto.png"
    write_pareto_chart(r, chart)
    headline, *rest = verdict_words(r)
    colour = "green" if r.winner is not None and r.verified else "red"
    console.print(f"[{colour}]{escape(headline)}[/{colour}]", highlight=False, soft_wrap=True)
    console.print("\n".join(rest), markup=False, highlight=False, soft_wrap=True)
    if r.winner is not None and r.verified:
        console.print("serve with:")
        console.print(r.command_line or "", markup=False, highlight=False, soft_wrap=True)
    console.print(
        f"recommendation: {path}\nchart: {chart}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if cancelled:
        return EXIT_CANCELLED
    return 0 if r.verified else EXIT_NOT_VERIFIED


def tried_table(r: Recommendation) -> Table:
    """Each candidate ranked or run: its SLO figures, throughput, and where they come from."""
    table = Table(title="Candidates (measured: a verification run; predicted: the model)")
    table.add_column("candidate")
    table.add_column("source")
    for s in r.slos:
        table.add_column(f"{s.name} ms", justify="right")
    table.add_column("agg tok/s", justify="right")
    table.add_column("why not")
    shown = [t for t in r.tried if t.fits_memory and (t.measured is not None or t.predicted)]
    shown.sort(key=lambda t: (t.source != "measured", -(t.figure("agg_tok_s") or 0)))
    for t in shown:
        known = t.measured if t.measured is not None else t.predicted
        cells = ["-" if (v := value_ms(s, known)) is None else f"{v:.0f}" for s in r.slos]
        agg = t.figure("agg_tok_s")
        table.add_row(
            escape(t.label),
            t.source,
            *cells,
            "-" if agg is None else rounded(agg),
            escape(t.why_lost or ("the recommendation" if r.winner is t else "")),
        )
    return table
