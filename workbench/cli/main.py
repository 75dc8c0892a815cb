"""``workbench``: run experiments headless, show and export sessions."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from workbench import __version__
from workbench.cli.progress import ProgressState
from workbench.cli.tables import hardware_line, results_table
from workbench.engine.analysis.compare import compare_sessions, to_markdown
from workbench.engine.analysis.export import (
    memory_checks,
    write_concurrency_csv,
    write_csv,
    write_json,
    write_requests_csv,
)
from workbench.engine.analysis.library import data_folder, scan
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.experiment import load_experiment
from workbench.engine.events import (
    ConfigFinished,
    ConfigStarted,
    Notice,
    ServerReady,
    Subscription,
)
from workbench.engine.figures.metrics import figure
from workbench.engine.run.runner import ExperimentRunner, RunOptions, RunResult
from workbench.engine.store.session import open_session
from workbench.ui.options import add_gui_arguments

EXIT_ERROR = 1  # bad input, a failed run, or an error the message names
EXIT_REQUESTS_FAILED = 3  # every configuration ran, but some requests failed
EXIT_CONFIG_FAILED = 4  # a configuration failed (its server did not start, or died)
EXIT_CANCELLED = 130
STOP_SIGNALS = tuple(
    sig for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)) if sig is not None
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="Measure how a local LLM server behaves under concurrent load.",
    )
    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

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

    show = sub.add_parser("show", help="print the tables of a saved session")
    show.add_argument("session")
    show.add_argument("--requests", action="store_true", help="also list every request")

    export = sub.add_parser("export", help="write a session's tables as CSV / JSON")
    export.add_argument("session")
    export.add_argument("--csv", help="per-configuration CSV (the lab's columns first)")
    export.add_argument("--requests-csv", help="per-request CSV")
    export.add_argument("--json", help="the whole session as JSON")
    export.add_argument("--charts", help="a folder for the session's charts")
    for fmt in ("png", "svg", "pdf"):
        export.add_argument(
            f"--{fmt}", metavar="DIR", help=f"a folder for the session's charts as {fmt.upper()}"
        )
    _add_chart_options(export)

    sessions = sub.add_parser("sessions", help="list the sessions in folders")
    sessions.add_argument(
        "folders",
        nargs="*",
        help="folders to look in, with their subfolders "
        "(default: results/ and the app's data folder)",
    )

    compare = sub.add_parser("compare", help="sessions side by side (e.g. from two machines)")
    compare.add_argument("sessions", nargs="+")
    compare.add_argument(
        "--relative",
        action="store_true",
        help="each session's figures relative to its 1-slot configuration",
    )
    compare.add_argument("--csv", help="write the table as CSV")
    compare.add_argument("--markdown", help="write the table (and warnings) as Markdown")
    compare.add_argument("--out", help="write a report folder: charts, tables, report.md/.html")
    _add_chart_options(compare)

    plan = sub.add_parser("plan", help="how many slots fit in memory, for a model")
    plan.add_argument("model", help="GGUF model file")
    plan.add_argument("--ctx", default="4096,8192,16384", help="contexts, comma-separated")
    plan.add_argument("--slots", default="1,2,4,8", help="slot counts, comma-separated")
    plan.add_argument("--kv-type", default="f16", help="KV cache type for K and V (f16, q8_0...)")
    plan.add_argument("--unified", action="store_true", help="one KV pool for all slots (-kvu)")
    plan.add_argument(
        "--gpu",
        action="store_true",
        help="plan for the first NVIDIA GPU's memory (NVML or nvidia-smi) instead of RAM",
    )
    plan.add_argument(
        "--memory-gib",
        type=float,
        help="memory to plan for (default: this machine's available RAM)",
    )
    plan.add_argument(
        "--overhead-mib",
        type=float,
        default=128.0,
        help="compute buffers and runtime beyond weights and KV (128)",
    )
    plan.add_argument(
        "--need",
        type=int,
        default=0,
        help="tokens a request needs (prompt + max tokens): warn below it",
    )

    slo = sub.add_parser("slo", help="goodput against SLOs, and the slot count to run")
    slo.add_argument("session")
    slo.add_argument("--ttft", type=float, help="TTFT limit in s (per request and p50)")
    slo.add_argument("--ttft-p90", type=float, help="TTFT p90 limit in s")
    slo.add_argument("--decode", type=float, help="minimum per-request decode tok/s")
    slo.add_argument("--e2e-p90", type=float, help="end-to-end latency p90 limit in s")
    slo.add_argument("--registered", type=int, help="registered users (planning arithmetic)")
    slo.add_argument(
        "--online", type=float, default=0.05, help="share of registered users online at peak (0.05)"
    )

    roof = sub.add_parser("roofline", help="decode speed against the memory-bandwidth bound")
    roof.add_argument("session")
    roof.add_argument(
        "--bandwidth-gbs",
        type=float,
        help="memory bandwidth in GB/s (default: measured once on this machine)",
    )
    roof.add_argument("--remeasure", action="store_true", help="measure the bandwidth again")

    verdicts = sub.add_parser("verdicts", help="judge the lab's hypotheses on a session")
    verdicts.add_argument("session")

    gui = sub.add_parser("gui", help="the desktop workbench")
    add_gui_arguments(gui)
    return parser


def _add_chart_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        default="png",
        help="chart formats, comma-separated: png, svg, pdf (default: png)",
    )
    parser.add_argument("--size", default="1200x800", help="chart size in pixels (1200x800)")
    parser.add_argument("--dpi", type=int, default=150, help="PNG/PDF resolution (150)")


def _chart_options(args: argparse.Namespace) -> Any:
    from workbench.ui.options import window_size
    from workbench.ui.report import ChartOptions

    formats = tuple(f.strip().lower() for f in args.format.split(",") if f.strip())
    unknown = [f for f in formats if f not in ("png", "svg", "pdf")]
    if unknown or not formats:
        raise WorkbenchError(f"--format takes png, svg and/or pdf, got {args.format!r}")
    width, height = window_size(args.size)
    return ChartOptions(width, height, args.dpi, tuple(dict.fromkeys(("png", *formats))))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=160)
    errors = Console(stderr=True)
    try:
        command = COMMANDS.get(args.command)
        if command is not None:
            return command(args, console)
        from workbench.ui.app import run_gui

        return run_gui(args)
    except WorkbenchError as exc:
        errors.print(f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False)
        return EXIT_ERROR
    except KeyboardInterrupt:  # Ctrl-C before or after the run itself (prepare, CSV writing)
        errors.print("interrupted")
        return EXIT_CANCELLED


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    def on_signal(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # SIGTERM and SIGHUP (a closed terminal) end the run like Ctrl-C, from the start: a
    # signal while preparing must say so, not end the process in silence.
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, *STOP_SIGNALS)}
    try:
        return _run(args, console)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(args: argparse.Namespace, console: Console) -> int:
    experiment = load_experiment(args.experiment)
    if args.model:
        experiment = experiment.with_overrides(server={"model": args.model})
    out_dir = Path(args.out)
    if args.api_key_env and not args.base_url:
        raise WorkbenchError("--api-key-env is for an external server: give --base-url too")
    options = RunOptions(
        out_dir,
        base_url=args.base_url,
        server_bin=args.server_bin,
        api_key_env=args.api_key_env,
    )
    runner = ExperimentRunner(experiment, options)
    runner.prepare()
    events = runner.bus.subscribe()
    state = ProgressState()
    console.print(
        f"[bold]{escape(experiment.name)}[/bold]: {len(runner.configs)} configuration(s); "
        f"session {escape(str(runner.session_path))}",
        highlight=False,
    )
    show_live = console.is_terminal and not args.quiet
    runner.start()
    try:
        if show_live:
            with Live(state.render(), console=console, auto_refresh=False) as live:
                _follow(runner, events, state, console, live)
        else:
            _follow(runner, events, state, console, None)
    finally:
        # Stopping must finish however often the user presses Ctrl-C: while the streams
        # are cancelled and the servers stopped, further signals only say so.
        def already_stopping(signum: int, frame: object) -> None:
            console.print("[yellow]already stopping: the session is being closed[/yellow]")

        for sig in (signal.SIGINT, *STOP_SIGNALS):
            signal.signal(sig, already_stopping)
        if runner.running:
            runner.cancel()
        result = runner.wait(60.0)
        runner.bus.unsubscribe(events)
    if result is None:
        raise WorkbenchError("the run did not stop within 60 s after it was cancelled")
    if not show_live:
        console.print(results_table(result.summaries, title=experiment.name))
    with open_session(result.session_path) as session:
        csv_path = out_dir / "concurrency.csv"
        requests_path = out_dir / "requests.csv"
        write_concurrency_csv(csv_path, session.summaries())
        write_requests_csv(requests_path, session)
    console.print(
        f"session: {result.session_path}\ntables: {csv_path}, {requests_path}",
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
    runner: ExperimentRunner,
    events: Subscription,
    state: ProgressState,
    console: Console,
    live: Live | None,
) -> None:
    """Fold events into the display until the run ends; Ctrl-C cancels the run."""
    cancelled = False
    while True:
        try:
            finished = not runner.running
            now = time.monotonic()
            for event in events.drain():
                state.apply(event, now)
                line = event_line(event)
                if line and (live is None or isinstance(event, Notice)):
                    console.print(line, highlight=False)
            if live is not None:
                live.update(state.render(now), refresh=True)
            if finished:
                return
            time.sleep(0.1)
        except KeyboardInterrupt:
            if not cancelled:
                console.print(
                    "[yellow]stopping: cancelling streams and servers; "
                    "the session keeps what finished[/yellow]"
                )
            cancelled = True
            runner.cancel()


def event_line(event: object) -> str | None:
    """One line of plain progress for a terminal that is not interactive (CI logs, pipes)."""
    match event:
        case ConfigStarted(config=config):
            return f"config {config.index + 1}: {escape(config.label)}"
        case ServerReady(facts=facts) if facts:
            return (
                f"  server ready: n_slots={facts.get('n_slots')} "
                f"n_ctx_slot={facts.get('n_ctx_slot')} kv_unified={facts.get('kv_unified')}"
            )
        case ConfigFinished(summary=summary) if summary is not None:
            agg = figure("agg_tok_s")
            rate = agg.of(summary)
            return (
                f"  {summary.status}: {summary.value('ok') or 0}/{summary.value('requests') or 0}"
                f" requests ok" + (f", {agg.text(rate)} {agg.unit} aggregate" if rate else "")
            )
        case Notice(level=level, text=text):
            style = "red" if level == "error" else "yellow"
            return f"[{style}]{level}:[/{style}] {escape(text)}"
    return None


def cmd_show(args: argparse.Namespace, console: Console) -> int:
    with open_session(args.session) as session:
        meta = session.meta
        console.print(
            f"[bold]{escape(meta['name'])}[/bold]  {meta['created_at']}  status: "
            f"[{'green' if session.status == 'complete' else 'yellow'}]{session.status}"
            f"[/]  mode: {meta['mode']}"
            + (f" {escape(meta['base_url'])}" if meta["base_url"] else ""),
            highlight=False,
        )
        console.print(hardware_line(session.hardware), highlight=False, markup=False)
        console.print(results_table(session.summaries(), title="Results"))
        for config in session.configs:
            if config.error:
                text = escape(f"{config.label}: {config.error}")
                console.print(f"[red]{text}[/red]", highlight=False)
        checks = memory_checks(session)
        if checks:
            memory = Table(
                title="Memory: the server's buffers against its measured RSS",
                title_justify="left",
                header_style="bold",
            )
            for name in ("config", "model + KV + compute MiB", "peak RSS MiB", "unaccounted"):
                memory.add_column(name, justify="left" if name == "config" else "right")
            for check in checks:
                memory.add_row(
                    Text(check.label),
                    f"{check.predicted_mib:.0f}",
                    "-" if check.peak_rss_mib is None else f"{check.peak_rss_mib:.0f}",
                    "-" if check.error is None else f"{check.error:.0%}",
                )
            console.print(memory)
        for _, level, text in session.notices():
            if level == "warning":
                console.print(f"[yellow]warning:[/yellow] {escape(text)}", highlight=False)
        if args.requests:
            from workbench.cli.tables import requests_table

            console.print(requests_table(session))
    return 0


def cmd_sessions(args: argparse.Namespace, console: Console) -> int:
    folders = [Path(f) for f in args.folders] or [Path("results"), data_folder()]
    infos = scan(folders)
    if not infos:
        console.print(f"no sessions in {', '.join(map(str, folders))}", markup=False)
        return 0
    table = Table(title="Sessions", title_justify="left", header_style="bold")
    for name in (
        "created",
        "name",
        "status",
        "mode",
        "hardware",
        "backend",
        "model",
        "configurations",
        "file",
    ):
        table.add_column(name)
    for info in infos:
        if info.error:
            table.add_row(
                "-",
                "-",
                Text("unreadable", style="red"),
                "",
                Text(info.error),
                "",
                "",
                "",
                Text(str(info.path)),
            )
            continue
        style = {"complete": "green", "incomplete": "yellow"}.get(info.status, "red")
        label = info.name + (f" ({info.notes.label})" if info.notes.label else "")
        if info.notes.tags:
            label += " [" + ", ".join(info.notes.tags) + "]"
        table.add_row(
            info.created_at,
            Text(label),
            Text(info.status, style=style),
            info.mode,
            Text(info.hardware),
            info.backend,
            Text(info.model),
            Text(", ".join(info.configs)),
            Text(str(info.path)),
        )
    console.print(table)
    return 0


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    with contextlib.ExitStack() as stack:
        sessions = [stack.enter_context(open_session(p)) for p in args.sessions]
        comparison = compare_sessions(sessions, relative=args.relative)
    table = Table(
        title="Comparison" + (" (relative to 1 slot)" if args.relative else ""),
        title_justify="left",
        header_style="bold",
    )
    table.add_column("configuration")
    table.add_column("metric")
    for column in comparison.columns:
        table.add_column(Text(column), justify="right")
    previous = None
    for row in comparison.rows():
        label = row["configuration"] if row["configuration"] != previous else ""
        previous = row["configuration"]
        table.add_row(
            Text(label),
            row["metric"],
            *[comparison.cell_text(row, c) for c in comparison.columns],
        )
    console.print(table)
    for warning in comparison.warnings:
        console.print(f"[yellow]not like for like:[/yellow] {escape(warning)}", highlight=False)
    if args.csv:
        write_csv(
            Path(args.csv), comparison.rows(), ["configuration", "metric", *comparison.columns]
        )
        console.print(f"wrote {args.csv}", markup=False)
    if args.out:
        from workbench.ui.report import write_report

        with contextlib.ExitStack() as stack:
            sessions = [stack.enter_context(open_session(p)) for p in args.sessions]
            report = write_report(sessions, Path(args.out), _chart_options(args), args.relative)
        console.print(f"wrote {report} (and report.html, charts/, comparison.csv)", markup=False)
    if args.markdown:
        try:
            Path(args.markdown).write_text(to_markdown(comparison), encoding="utf-8")
        except OSError as exc:
            raise WorkbenchError(f"cannot write {args.markdown}: {exc.strerror or exc}") from None
        console.print(f"wrote {args.markdown}", markup=False)
    return 0


def _int_list(text: str, name: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise WorkbenchError(
            f"{name} takes whole numbers separated by commas, got {text!r}"
        ) from None
    if not values:
        raise WorkbenchError(f"{name} needs at least one value")
    return values


def cmd_plan(args: argparse.Namespace, console: Console) -> int:
    import psutil

    from workbench.engine.analysis.planner import plan, read_model_facts

    ctxs, slots = _int_list(args.ctx, "--ctx"), _int_list(args.slots, "--slots")
    if any(s == 0 or s < -1 for s in slots) or any(c <= 0 for c in ctxs):
        raise WorkbenchError("--slots must be >= 1 (or -1 for auto) and --ctx > 0")
    model = read_model_facts(args.model)
    if args.memory_gib:
        available, where = int(args.memory_gib * 2**30), "given"
    elif args.gpu:
        from workbench.engine.measure.hardware import nvidia_gpus

        gpus = nvidia_gpus()
        if not gpus:
            raise WorkbenchError(
                "--gpu: no NVIDIA GPU found (neither NVML nor nvidia-smi "
                "answered); give the memory with --memory-gib"
            )
        available, where = int(gpus[0]["memory_bytes"]), f"VRAM of {gpus[0]['name']}"
    else:
        available, where = psutil.virtual_memory().available, "free RAM"
    rows = plan(
        model,
        ctxs,
        slots,
        available,
        unified=args.unified,
        type_k=args.kv_type,
        type_v=args.kv_type,
        overhead_mib=args.overhead_mib,
        need_tokens=args.need,
    )
    per_token_kib = model.kv_bytes_per_token(args.kv_type, args.kv_type) / 1024
    console.print(
        f"{model.name} ({model.architecture}, {model.quantization}): {model.layers} layers, "
        f"{max(model.kv_heads)} KV heads x {model.head_k}, weights "
        f"{model.tensor_bytes / 2**20:.0f} MiB, KV {per_token_kib:.1f} KiB per token "
        f"({args.kv_type}); memory to plan for: {available / 2**30:.1f} GiB ({where})",
        markup=False,
        highlight=False,
    )
    table = Table(header_style="bold")
    for name in (
        "ctx",
        "slots",
        "KV",
        "ctx per request",
        "KV MiB",
        "total MiB",
        "fits?",
        "warning",
    ):
        table.add_column(name, justify="left" if name in ("fits?", "warning") else "right")
    styles = {"fits": "green", "tight": "yellow", "does not fit": "red"}
    for r in rows:
        table.add_row(
            str(r.ctx),
            str(r.slots),
            "unified" if r.unified else "per slot",
            str(r.ctx_per_request),
            f"{r.kv_mib:.1f}",
            f"{r.total_mib:.0f}",
            Text(r.fit, style=styles[r.fit]),
            Text(r.warning),
        )
    console.print(table)
    return 0


def cmd_slo(args: argparse.Namespace, console: Console) -> int:
    from workbench.engine.analysis.slo import (
        SHOWN,
        Slo,
        goodput,
        machines_needed,
        peak_users,
        recommend,
    )

    try:
        slo = Slo(args.ttft, args.ttft_p90, args.decode, args.e2e_p90)
    except ValueError:
        raise WorkbenchError(
            "give at least one SLO: --ttft, --ttft-p90, --decode, --e2e-p90"
        ) from None
    with open_session(args.session) as session:
        results = goodput(session, slo)
    console.print(f"SLO: {slo.describe()}", markup=False)
    peak = peak_users(args.registered, args.online) if args.registered else None
    table = Table(header_style="bold")
    for name in (
        "config",
        "slots",
        "concurrency",
        "good / requests",
        *(figure(key).header for key in SHOWN),
        "meets SLO",
        "users served",
        "why not",
    ):
        table.add_column(name, justify="left" if name in ("config", "why not") else "right")
    for r in results:
        served = r.concurrency if r.acceptable else 0
        users = str(served)
        if peak is not None and served:
            users += f" ({machines_needed(peak, served)} machines for {peak})"
        table.add_row(
            Text(r.label),
            str(r.slots),
            str(r.concurrency),
            f"{r.good}/{r.requests}",
            *(figure(key).text(getattr(r, key)) for key in SHOWN),
            Text("yes" if r.acceptable else "no", style="green" if r.acceptable else "red"),
            users,
            Text("; ".join(r.reasons)),
        )
    console.print(table)
    if peak is not None:
        console.print(
            f"peak concurrent users = {args.registered} registered x {args.online:g} "
            f"online = {peak}",
            markup=False,
        )
    console.print(f"recommendation: {recommend(results).text}", markup=False)
    return 0


def cmd_roofline(args: argparse.Namespace, console: Console) -> int:
    from workbench.engine.analysis.roofline import session_roofline

    report = session_roofline(args.session, args.bandwidth_gbs, refresh=args.remeasure)
    rows = report.rows
    console.print(
        f"memory bandwidth: {report.bandwidth / 1e9:.1f} GB/s ({report.how})", markup=False
    )
    if report.recorded_on:
        console.print(
            f"[yellow]the session was recorded on {escape(report.recorded_on)}: give its "
            "bandwidth with --bandwidth-gbs for a fair bound[/yellow]"
        )
    table = Table(header_style="bold")
    for name in (
        "config",
        "slots",
        "batch",
        "weights MiB",
        "KV in use MiB/seq",
        "bound tok/s",
        "decode tok/s",
        "of bound",
    ):
        table.add_column(name, justify="left" if name == "config" else "right")
    for r in rows:
        table.add_row(
            Text(r.label),
            str(r.slots),
            str(r.batch),
            f"{r.weights_mib:.0f}",
            f"{r.kv_in_use_mib:.2f}",
            f"{r.bound_tok_s:.0f}",
            "-" if r.decode_tok_s is None else f"{r.decode_tok_s:.1f}",
            "-" if r.share is None else f"{r.share:.0%}",
        )
    console.print(table)
    if not rows:
        console.print("no configuration logged its buffer sizes (external server?)")
    return 0


def cmd_verdicts(args: argparse.Namespace, console: Console) -> int:
    from workbench.engine.analysis.verdicts import lab_verdicts

    with open_session(args.session) as session:
        verdicts = lab_verdicts(session.summaries())
        console.print(f"{session.meta['name']} ({session.status})", markup=False)
    styles = {"supported": "green", "not supported": "red", "inconclusive": "yellow"}
    for verdict in verdicts:
        console.print(
            Text(f"{verdict.verdict.upper()}", style=f"bold {styles[verdict.verdict]}")
            + Text(f"  {verdict.hypothesis}")
        )
        for line in verdict.numbers:
            console.print(f"    {line}", markup=False, highlight=False)
    return 0


def cmd_export(args: argparse.Namespace, console: Console) -> int:
    by_format = [(fmt, getattr(args, fmt)) for fmt in ("png", "svg", "pdf") if getattr(args, fmt)]
    if not (args.csv or args.json or args.requests_csv or args.charts or by_format):
        raise WorkbenchError(
            "say what to write: --csv FILE, --requests-csv FILE, --json FILE, --charts DIR "
            "and/or --png/--svg/--pdf DIR"
        )
    with open_session(args.session) as session:
        if args.csv:
            write_concurrency_csv(Path(args.csv), session.summaries())
            console.print(f"wrote {args.csv}", markup=False)
        if args.requests_csv:
            write_requests_csv(Path(args.requests_csv), session)
            console.print(f"wrote {args.requests_csv}", markup=False)
        if args.json:
            write_json(Path(args.json), session)
            console.print(f"wrote {args.json}", markup=False)
        targets = [(Path(args.charts), None)] if args.charts else []
        targets += [(Path(folder), fmt) for fmt, folder in by_format]
        if targets:
            from workbench.ui.report import write_charts

            for folder, fmt in targets:
                options = _chart_options(args)
                if fmt is not None:
                    options = replace(options, formats=(fmt,))
                written = write_charts([session], folder, options)
                what = f"{fmt.upper()} charts" if fmt else "charts"
                console.print(f"wrote {len(written)} {what} to {folder}", markup=False)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace, Console], int]] = {
    "run": cmd_run,
    "show": cmd_show,
    "export": cmd_export,
    "sessions": cmd_sessions,
    "compare": cmd_compare,
    "plan": cmd_plan,
    "verdicts": cmd_verdicts,
    "slo": cmd_slo,
    "roofline": cmd_roofline,
}

if __name__ == "__main__":
    sys.exit(main())
