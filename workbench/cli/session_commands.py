"""The commands that read recorded sessions: ``show``, ``export``, ``import`` (other tools'
results as sessions), ``sessions``, ``compare`` and ``verdicts``. Charts come from the
window's chart code, drawn offscreen, so Qt is imported only when a chart is asked for."""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from workbench.cli.bounds import CHART_SIZE, DPI
from workbench.cli.exit_codes import EXIT_ERROR
from workbench.cli.paths import SESSION_HELP, existing_folder, out_folder, session_file
from workbench.cli.tables import (
    add_table_flags,
    cache_line,
    comparison_table,
    hardware_line,
    memory_table,
    print_error,
    print_prediction,
    print_sessions,
    reported_table,
    requests_table,
    results_table,
    session_line,
    verdict_line,
)
from workbench.cli.watch_commands import add_slo_flag, compare_kept, print_kept, show_watch
from workbench.engine.analysis.compare import compare_sessions, to_markdown
from workbench.engine.analysis.export import (
    memory_checks,
    write_concurrency_csv,
    write_csv,
    write_json,
    write_requests_csv,
)
from workbench.engine.analysis.library import data_folder, scan
from workbench.engine.analysis.perfetto import (
    ALIGN_START,
    ALIGN_WALL,
    ALIGNS,
    EXTENSION,
    write_trace,
)
from workbench.engine.analysis.verdicts import cache_verdicts, lab_verdicts
from workbench.engine.base.errors import SessionError, WorkbenchError
from workbench.engine.base.states import NoticeLevel
from workbench.engine.base.words import plural
from workbench.engine.figures.machine_load import describe as describe_machine
from workbench.engine.interop.formats import KNOWN_FORMATS, import_file, one_per_run
from workbench.engine.interop.vllm_result import write_vllm_results
from workbench.engine.store import open_session
from workbench.engine.watch.export import write_tasks_csv
from workbench.engine.watch.export import write_trace as write_watch_trace
from workbench.engine.watch.record import SUFFIX, kept_in, read
from workbench.engine.watch.summary import summarize
from workbench.engine.watch.trace_out import write_trace as write_requests_trace

VLLM_JSON = "vllm-json"
PERFETTO = "perfetto"
TRACE = "trace"  # a kept watch's requests as a Mooncake trace
FILE_FORMATS = (VLLM_JSON, PERFETTO)  # --format's files, not charts
CHART_FORMATS = ("png", "svg", "pdf")


# -- parsers ----------------------------------------------------------------------------------
def add_show(sub: Any) -> None:
    show = sub.add_parser("show", help="print the tables of a saved session")
    show.add_argument("session", type=session_file, help=SESSION_HELP)
    show.add_argument("--requests", action="store_true", help="also list every request")
    add_slo_flag(show, kept=True)
    add_table_flags(show)
    show.set_defaults(handler=cmd_show)


def add_export(sub: Any) -> None:
    export = sub.add_parser(
        "export", help="write a session's tables (CSV, JSON), charts and queue Gantt"
    )
    export.add_argument(
        "sessions",
        nargs="+",
        metavar="SESSION",
        type=session_file,
        help=f"{SESSION_HELP}; several only with --format {PERFETTO} (one trace of them all)",
    )
    export.add_argument("--csv", help="per-configuration CSV (the lab's columns first)")
    export.add_argument("--requests-csv", help="per-request CSV")
    export.add_argument(
        "--predicted-csv",
        help="the run's stored prediction as the per-configuration CSV (its columns)",
    )
    export.add_argument("--json", help="the whole session as JSON")
    export.add_argument("--charts", type=out_folder, help="a folder for the session's charts")
    export.add_argument(
        "--gantt",
        metavar="DIR",
        type=out_folder,
        help="a folder for the queue Gantt: rows per request and lanes per slot as PNG and SVG, "
        "and gantt.html (interactive, self-contained)",
    )
    for fmt in CHART_FORMATS:
        export.add_argument(
            f"--{fmt}",
            metavar="DIR",
            type=out_folder,
            help=f"a folder for the session's charts as {fmt.upper()}",
        )
    export.add_argument(
        "--out",
        metavar="DIR",
        type=out_folder,
        default=".",
        help=f"with --format {VLLM_JSON}: the folder for vllm bench serve's result files, one "
        f"per configuration; with --format {PERFETTO}: for the trace, NAME{EXTENSION} (the "
        "first session's name, +N for N more) (default: here)",
    )
    export.add_argument(
        "--align",
        choices=ALIGNS,
        help=f"with --format {PERFETTO} and several sessions: place them by the wall clock each "
        f"started at ({ALIGN_WALL}, the default) or each at its own start ({ALIGN_START}: "
        "sessions recorded hours or days apart side by side)",
    )
    _add_chart_options(
        export,
        also=f"; {VLLM_JSON}: vllm bench serve's result files; {PERFETTO}: a Chrome/Perfetto "
        "trace (ui.perfetto.dev, chrome://tracing)",
    )
    export.set_defaults(handler=cmd_export)


def add_import(sub: Any) -> None:
    imported = sub.add_parser(
        "import",
        help=f"turn other tools' result files into read-only sessions ({KNOWN_FORMATS})",
    )
    imported.add_argument(
        "files", nargs="+", metavar="FILE", help="result files of the tools above, one or more"
    )
    imported.add_argument(
        "--out",
        type=out_folder,
        default="results",
        help="folder for the new sessions (default: results/)",
    )
    add_table_flags(imported)
    imported.set_defaults(handler=cmd_import)


def add_sessions(sub: Any) -> None:
    sessions = sub.add_parser("sessions", help="list the sessions in folders")
    sessions.add_argument(
        "folders",
        nargs="*",
        type=existing_folder,
        help="folders to look in, with their subfolders "
        "(default: results/ and the app's data folder)",
    )
    sessions.set_defaults(handler=cmd_sessions)


def add_compare(sub: Any) -> None:
    compare = sub.add_parser(
        "compare", help="sessions side by side (e.g. from two machines), or kept watches"
    )
    compare.add_argument(
        "sessions", nargs="+", type=session_file, help=f"session files, or kept watches ({SUFFIX})"
    )
    compare.add_argument(
        "--relative",
        action="store_true",
        help="each session's figures relative to its 1-slot configuration",
    )
    compare.add_argument("--csv", help="write the table as CSV")
    compare.add_argument("--markdown", help="write the table (and warnings) as Markdown")
    compare.add_argument(
        "--out", type=out_folder, help="write a report folder: charts, tables, report.md/.html"
    )
    _add_chart_options(compare)
    compare.set_defaults(handler=cmd_compare)


def add_verdicts(sub: Any) -> None:
    verdicts = sub.add_parser("verdicts", help="judge the lab's hypotheses on a session")
    verdicts.add_argument("session", type=session_file, help=SESSION_HELP)
    verdicts.set_defaults(handler=cmd_verdicts)


def _add_chart_options(parser: argparse.ArgumentParser, also: str = "") -> None:
    parser.add_argument(
        "--format",
        default="png",
        help=f"chart formats, comma-separated: png, svg, pdf (default: png){also}",
    )
    parser.add_argument(
        "--size",
        type=CHART_SIZE,
        default="1200x800",
        help=f"chart size WIDTHxHEIGHT in pixels, from {CHART_SIZE.min_width}x"
        f"{CHART_SIZE.min_height} to {CHART_SIZE.max_side}x{CHART_SIZE.max_side} (1200x800)",
    )
    parser.add_argument(
        "--dpi",
        type=DPI,
        default=150,
        help=f"a PNG's resolution (its printed size), {DPI.low:g} to {DPI.high:g} (150); a PDF "
        "is vector, its page the chart's size at the screen's resolution",
    )


def _chart_options(args: argparse.Namespace) -> Any:
    from workbench.ui.exports.report import ChartOptions

    asked = _formats(args)
    formats = tuple(f for f in asked if f not in FILE_FORMATS) or ("png",)
    unknown = [f for f in formats if f not in CHART_FORMATS]
    if unknown or not asked:
        raise WorkbenchError(f"--format takes png, svg and/or pdf, got {args.format!r}")
    width, height = args.size
    return ChartOptions(width, height, args.dpi, tuple(dict.fromkeys(("png", *formats))))


def _formats(args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(f.strip().lower() for f in args.format.split(",") if f.strip())


def _export_watch(args: argparse.Namespace, console: Console) -> int:
    """``export`` of one kept watch: its tasks as CSV (``--csv``) and its trace (``--format
    perfetto``); a session's other outputs are no watch's."""
    given = (
        ("--requests-csv", args.requests_csv),
        ("--predicted-csv", args.predicted_csv),
        ("--json", args.json),
        ("--charts", args.charts),
        ("--gantt", args.gantt),
        *((f"--{fmt}", getattr(args, fmt)) for fmt in CHART_FORMATS),
    )
    asked = set(_formats(args)) - {"png"}  # the charts' default format: no watch's
    if len(args.sessions) > 1 or any(v for _, v in given) or asked - {PERFETTO, TRACE}:
        raise WorkbenchError(
            f"a watch ({SUFFIX}) exports alone: its tasks with --csv FILE, its Perfetto "
            f"trace with --format {PERFETTO}, its requests as a Mooncake trace with --format "
            f"{TRACE} [--out DIR]"
        )
    if not (args.csv or asked):
        raise WorkbenchError(
            f"say what to write: --csv FILE and/or --format {PERFETTO} and/or {TRACE}"
        )
    path = Path(args.sessions[0])
    if args.csv:
        count = write_tasks_csv(Path(args.csv), path)
        console.print(f"wrote {args.csv} ({plural(count, 'task')})", markup=False)
    if PERFETTO in asked:
        trace, count = write_watch_trace(path, Path(args.out))
        console.print(f"wrote {trace} ({plural(count, 'trace event')})", markup=False)
    if TRACE in asked:
        out = Path(args.out) / (path.name.removesuffix(SUFFIX) + ".trace.jsonl")
        count = write_requests_trace(path, out)
        console.print(
            f"wrote {out} ({plural(count, 'row')}): arrivals estimated from the queue's rises, "
            "lengths as the polls saw them (an answer not seen to its end: the median of those "
            'that were; arrival = "trace", predict, tune --trace take it)',
            markup=False,
        )
        unseen = summarize(read(path).watched).unseen
        if unseen is not None and round(unseen.tasks):
            console.print(
                f"  ≈ {unseen.tasks:,.0f} tasks no poll saw are not in it (estimated from the "
                "token counters): the traffic was heavier than the trace",
                markup=False,
            )
    return 0


# -- commands ---------------------------------------------------------------------------------
def cmd_show(args: argparse.Namespace, console: Console) -> int:
    if args.session.endswith(SUFFIX):
        return show_watch(Path(args.session), console, args.slo)
    if args.slo:
        raise WorkbenchError(
            f"--slo judges a kept watch ({SUFFIX}); a session's SLOs: `workbench slo SESSION`"
        )
    with open_session(args.session) as session:
        console.print(session_line(session.meta, session.status), highlight=False)
        source = session.import_source()
        if source is not None:
            console.print(source.describe(), highlight=False, markup=False)
        console.print(hardware_line(session.hardware), highlight=False, markup=False)
        summaries = session.summaries()
        console.print(results_table(summaries, "Results", args.results_columns))
        for verdict in cache_verdicts(summaries):
            console.print(cache_line(verdict), highlight=False)
        try:
            prediction = session.predictions()
        except SessionError as exc:  # the rest of the session still reads
            console.print(
                f"[yellow]warning:[/yellow] {escape(str(exc))}", highlight=False, soft_wrap=True
            )
            prediction = None
        if prediction is not None:
            print_prediction(console, prediction, summaries)
        if source is not None:
            console.print(reported_table(session, source))
        for config in session.configs:
            if config.error:
                text = escape(f"{config.label}: {config.error}")
                console.print(f"[red]{text}[/red]", highlight=False)
        for config in session.configs:  # what else used the machine (schema 11 on)
            for repeat, observed in sorted(session.observations(config.index).items()):
                if observed.machine is not None:
                    where = f"{config.label} repeat {repeat + 1}"
                    text = f"machine load, {where}: {describe_machine(observed.machine)}"
                    console.print(text, markup=False, highlight=False, soft_wrap=True)
        checks = memory_checks(session)
        if checks:
            console.print(memory_table(checks))
        for notice in session.notices():
            if notice.level is NoticeLevel.WARNING:
                console.print(
                    f"[yellow]warning:[/yellow] {escape(notice.text or '')}", highlight=False
                )
        if args.requests:
            console.print(requests_table(session))
    return 0


def cmd_export(args: argparse.Namespace, console: Console) -> int:
    if any(path.endswith(SUFFIX) for path in args.sessions):
        return _export_watch(args, console)
    by_format = [(fmt, getattr(args, fmt)) for fmt in CHART_FORMATS if getattr(args, fmt)]
    asked = _formats(args)
    unknown = [f for f in asked if f not in (*CHART_FORMATS, *FILE_FORMATS)]
    if unknown or not asked:
        raise WorkbenchError(
            f"--format takes png, svg, pdf, {VLLM_JSON} and/or {PERFETTO}, got {args.format!r}"
        )
    vllm = VLLM_JSON in asked
    tables = args.csv or args.json or args.requests_csv or args.predicted_csv
    one_session = tables or args.charts or args.gantt or by_format or vllm
    if not (one_session or PERFETTO in asked):
        raise WorkbenchError(
            "say what to write: --csv FILE, --requests-csv FILE, --predicted-csv FILE, "
            "--json FILE, --charts DIR, --gantt DIR, --png/--svg/--pdf DIR and/or "
            f"--format {VLLM_JSON} or {PERFETTO} [--out DIR]"
        )
    if one_session and len(args.sessions) > 1:
        raise WorkbenchError(
            f"export writes one session's tables, charts and files: give several sessions "
            f"only with --format {PERFETTO} alone (`workbench compare` sets sessions side by side)"
        )
    if args.align and PERFETTO not in asked:
        raise WorkbenchError(f"--align places the sessions of --format {PERFETTO}: give it too")
    if PERFETTO in asked:
        with contextlib.ExitStack() as stack:
            sessions = [stack.enter_context(open_session(p)) for p in args.sessions]
            path, count = write_trace(sessions, Path(args.out), args.align or ALIGN_WALL)
        console.print(f"wrote {path} ({plural(count, 'trace event')})", markup=False)
        if not one_session:
            return 0
    with open_session(args.sessions[0]) as session:
        if vllm:
            files = write_vllm_results(session, Path(args.out))
            console.print(f"wrote {plural(len(files), 'vllm bench serve result')} to {args.out}:")
            for path in files:
                console.print(f"  {path.name}", markup=False)
        if args.csv:
            write_concurrency_csv(Path(args.csv), session.summaries())
            console.print(f"wrote {args.csv}", markup=False)
        if args.requests_csv:
            write_requests_csv(Path(args.requests_csv), session)
            console.print(f"wrote {args.requests_csv}", markup=False)
        if args.predicted_csv:
            prediction = session.predictions()
            if prediction is None or not prediction.configs:
                raise WorkbenchError(
                    f"{session.path.name} stored no prediction: a run predicts itself from "
                    "the calibrations stored on its machine (`workbench calibrate`)"
                )
            predicted = [c.summary for c in prediction.configs]
            write_concurrency_csv(Path(args.predicted_csv), predicted)
            console.print(f"wrote {args.predicted_csv}", markup=False)
        if args.json:
            write_json(Path(args.json), session)
            console.print(f"wrote {args.json}", markup=False)
        # --charts DIR (in each of --format) and each --png/--svg/--pdf DIR: each chart is
        # drawn once for all of them.
        targets = [(Path(args.charts), None)] if args.charts else []
        targets += [(Path(folder), fmt) for fmt, folder in by_format]
        if targets:
            from workbench.ui.exports.report import draw_charts

            options = _chart_options(args)
            places = [(f, x) for f, fmt in targets for x in ([fmt] if fmt else options.formats)]
            count = len(draw_charts([session], places, options))
            for folder, fmt in targets:
                what = f"{fmt.upper()} charts" if fmt else "charts"
                console.print(f"wrote {count} {what} to {folder}", markup=False)
        if args.gantt:
            from workbench.ui.exports.gantt_export import write_gantt

            options = _chart_options(args)
            options = replace(options, formats=tuple(dict.fromkeys((*options.formats, "svg"))))
            files = write_gantt(session, Path(args.gantt), options)
            names = ", ".join(p.name for p in files)
            console.print(f"wrote the Gantt to {args.gantt}: {names}", markup=False)
    return 0


def cmd_import(args: argparse.Namespace, console: Console) -> int:
    """Each file its own session; a file that cannot be read is said and the rest go on."""
    failed = 0
    for given in one_per_run([Path(name) for name in args.files]):
        try:
            path = import_file(given, Path(args.out))
        except WorkbenchError as exc:
            failed += 1
            print_error(str(exc))
            continue
        with open_session(path) as session:
            source = session.import_source()
            what = source.describe() if source else "imported"
            console.print(f"wrote {path}: {what}", markup=False, soft_wrap=True)
            title = escape(path.name)
            console.print(results_table(session.summaries(), title, args.results_columns))
    return EXIT_ERROR if failed else 0


def cmd_sessions(args: argparse.Namespace, console: Console) -> int:
    folders = [Path(f) for f in args.folders] or [Path("results"), data_folder()]
    infos, watches = scan(folders), kept_in(folders)
    if not infos and not watches:
        console.print(f"no sessions in {', '.join(map(str, folders))}", markup=False)
        return 0
    if infos:
        print_sessions(console, infos)
    if watches:
        print_kept(console, watches)
    return 0


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    watches = [p.endswith(SUFFIX) for p in args.sessions]
    if any(watches):
        if not all(watches):
            raise WorkbenchError(
                f"compare kept watches ({SUFFIX}) with kept watches, sessions with sessions"
            )
        if args.relative or args.out or args.markdown:
            raise WorkbenchError(f"kept watches ({SUFFIX}) compare as a table and --csv only")
        return compare_kept([Path(p) for p in args.sessions], args.csv, console)
    with contextlib.ExitStack() as stack:
        sessions = [stack.enter_context(open_session(p)) for p in args.sessions]
        comparison = compare_sessions(sessions, relative=args.relative)
    console.print(comparison_table(comparison, args.relative))
    for warning in comparison.warnings:
        console.print(f"[yellow]not like for like:[/yellow] {escape(warning)}", highlight=False)
    if args.csv:
        write_csv(
            Path(args.csv), comparison.rows(), ["configuration", "metric", *comparison.columns]
        )
        console.print(f"wrote {args.csv}", markup=False)
    if args.out:
        from workbench.ui.exports.report import write_report

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


def cmd_verdicts(args: argparse.Namespace, console: Console) -> int:
    with open_session(args.session) as session:
        verdicts = lab_verdicts(session.summaries())
        console.print(f"{session.meta['name']} ({session.status})", markup=False)
    for verdict in verdicts:
        console.print(verdict_line(verdict))
        for line in verdict.numbers:
            console.print(f"    {line}", markup=False, highlight=False)
    return 0
