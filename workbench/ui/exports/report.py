"""A report folder: the comparison charts (PNG, and SVG/PDF on request), the table as CSV and
Markdown, and a Markdown and an HTML page that embed them with each session's hardware and
settings. The charts are drawn by the same ``MetricChart`` as in the window, on white."""

from __future__ import annotations

import contextlib
import html
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyqtgraph as pg
from PySide6.QtWidgets import QApplication

from workbench.engine.analysis.compare import chart_data, compare_sessions, to_markdown
from workbench.engine.analysis.export import write_csv
from workbench.engine.analysis.library import session_models
from workbench.engine.analysis.verdicts import lab_verdicts
from workbench.engine.base.errors import OutputDirError, SessionError
from workbench.engine.base.escaping import markdown
from workbench.engine.base.records import StartupFacts
from workbench.engine.config.settings import show_value
from workbench.engine.config.workloads import SentRequests
from workbench.engine.figures.metrics import Figure, Part, View, shown_in
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.predict.run_prediction import prediction_notes
from workbench.engine.predict.sweep import against_header, against_rows
from workbench.engine.store import Session
from workbench.ui.theme.palette import theme_data
from workbench.ui.theme.qt_theme import apply_theme, theme
from workbench.ui.views.charts import MetricChart, discard, export_widget


@dataclass(frozen=True)
class ChartOptions:
    width: int = 1200
    height: int = 800
    dpi: int = 150
    formats: tuple[str, ...] = ("png",)


def headless_app() -> QApplication:
    """A QApplication for drawing charts, offscreen when there is no display; one made here
    gets the light theme. The window's own app is returned as it is."""
    existing = QApplication.instance()
    if existing is not None:
        return existing  # type: ignore[return-value]
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    app = QApplication([])
    apply_theme(app, "light")
    return app


@contextlib.contextmanager
def on_white() -> Iterator[QApplication]:
    """Charts made inside are drawn in the light theme's plot colours (reports are read on
    white); the colours in force before, the window's, are put back after."""
    app = headless_app()
    keys = ("background", "foreground")
    before = {key: pg.getConfigOption(key) for key in keys}
    colors = theme("light").colors
    pg.setConfigOptions(background=colors["plot_background"], foreground=colors["plot_foreground"])
    try:
        yield app
    finally:
        pg.setConfigOptions(**before)


def write_charts(
    sessions: list[Session], out_dir: Path, options: ChartOptions, relative: bool = False
) -> list[tuple[str, Path]]:
    """(title, path) for each chart written, in the first of ``options.formats`` (the
    other formats sit beside it)."""
    places = [(out_dir, fmt) for fmt in options.formats]
    return [(title, paths[0]) for title, paths in draw_charts(sessions, places, options, relative)]


def draw_charts(
    sessions: list[Session],
    places: list[tuple[Path, str]],
    options: ChartOptions,
    relative: bool = False,
) -> list[tuple[str, list[Path]]]:
    """Each chart drawn once and written to every (folder, format) of ``places``: its title
    and the paths, in the order of ``places``. ``options.formats`` is not read."""
    written = []
    with on_white():
        for data in chart_data(sessions, relative):
            chart = MetricChart()
            chart.show_data(data)
            paths = [
                export_widget(
                    chart,
                    folder / f"{data.key}.{fmt}",
                    options.width,
                    options.height,
                    options.dpi,
                )
                for folder, fmt in places
            ]
            written.append((data.title, paths))
            discard(chart)
    return written


def _fingerprint(session: Session) -> list[tuple[str, str]]:
    hw = session.hardware
    ram = hw.ram_bytes
    gpus = (
        ", ".join(f"{g.name} ({(g.memory_bytes or 0) / 2**30:.0f} GiB)" for g in hw.gpus) or "none"
    )
    backends = sorted({c.facts.backend for c in session.configs if c.facts and c.facts.backend})
    source = session.import_source()
    if source is not None:  # another tool's file: it names no machine
        return [
            ("source", source.describe()),
            ("recorded", str(session.meta.get("created_at"))),
            ("file", str(session.path)),
        ]
    return [
        ("machine", hw.machine_name),
        ("cores", f"{hw.cpu_physical_cores} physical, {hw.cpu_logical_cores} logical"),
        ("memory", f"{ram / 2**30:.1f} GiB" if ram else "?"),
        ("OS", hw.os or "?"),
        ("GPUs", gpus),
        ("llama.cpp", hw.llama_server_build or "?"),
        ("backend", "/".join(backends) or "?"),
        ("recorded", str(session.meta.get("created_at"))),
        ("status", session.status),
        ("file", str(session.path)),
    ]


SERVER_DEFAULT = "server default"


def _settings(session: Session) -> list[tuple[str, str]]:
    """The first configuration's settings as a reader needs them: the model by its file's
    name (the name its requests gave, for a server the workbench did not start), a value
    left to the server said so (with what the server stated, where it did), concurrency as
    the requests were sent (0 in the file means all at once: as many as the requests), and
    the server's settings only where the workbench started the server (else they were not
    the server's)."""
    first = session.configs[0] if session.configs else None
    if first is None:
        return []
    server, workload = first.run_config.server, first.run_config.workload
    stated = first.facts or StartupFacts()
    rows = [
        ("configurations", ", ".join(c.label for c in session.configs)),
        ("model", ", ".join(session_models(session))),
    ]
    if session.managed:
        unified = server.kv_unified if server.kv_unified is not None else stated.kv_unified
        rows += [
            ("ctx", show_value(server.ctx)),
            ("cont_batching", show_value(server.cont_batching)),
            (
                "kv_unified",
                SERVER_DEFAULT
                if unified is None
                else show_value(unified)
                + (" (the server's default)" if server.kv_unified is None else ""),
            ),
            ("threads", SERVER_DEFAULT if server.threads is None else show_value(server.threads)),
        ]
    concurrency = show_value(workload.effective_concurrency)
    if isinstance(workload, SentRequests) and not workload.concurrency:
        concurrency += " (all at once)"
    rows += [
        ("requests", show_value(workload.per_repeat)),
        ("concurrency", concurrency),
        *(
            (name, show_value(getattr(workload, name)))
            for name in ("arrival", "max_tokens", "prompts", "repeats", "ignore_eos")
            if hasattr(workload, name)  # a conversation has no arrival: each turn follows
        ),
    ]
    return rows


# The figures a configuration has only in some runs, each part a table of its own beside the
# session's verdicts, as ``workbench show`` prints them.
OPTIONAL_PARTS = (
    (Part.STEADY, "Steady state"),
    (Part.REASONING, "Reasoning"),
    (Part.CONVERSATION, "Conversations"),
)


def optional_tables(summaries: Sequence[ConfigSummary]) -> list[tuple[str, tuple[Figure, ...]]]:
    """The steady-state, reasoning and conversation figures ``workbench show`` prints for
    ``summaries``, by part: none of a part where no configuration has a value of it."""
    shown = shown_in(View.TERMINAL, having=summaries)
    tables = [(title, tuple(f for f in shown if f.part is part)) for part, title in OPTIONAL_PARTS]
    return [(title, figures) for title, figures in tables if figures]


def definitions(sessions: Sequence[Session] = ()) -> list[tuple[Figure, str]]:
    """Each figure the report shows (its table and charts, the steady-state, reasoning and
    conversation figures beside the verdicts) with its unit, repeat rule and definition, from
    the catalogue: a reader of the report needs no other document."""
    summaries = [s for session in sessions for s in session.summaries()]
    optional = tuple(f for _, figures in optional_tables(summaries) for f in figures)
    return [
        (f, f"{f.unit + '; ' if f.unit else ''}over repeats: {f.combine.value}")
        for f in shown_in(View.COMPARISON, View.CHART) + optional
    ]


def trust_lines(session: Session) -> list[str]:
    """Per configuration, why its numbers may be the client's as much as the server's
    (client-limited, a cross-check off by over 5 %) or another process's (a busy machine, or
    one whose load is unknown), why they grow with the run's length
    (over-saturated) or not the task the others did (requests that did not fit a slot), or
    one line saying none is."""
    summaries = session.summaries()
    lines = [f"{summary.label}: {note}" for summary in summaries for note in summary.trust_notes]
    if lines:
        return lines
    # Vouch for the machine only where its load was measured (and every check is quiet).
    unmeasured = [s.label for s in summaries if not all(r.machine_recorded for r in s.runs)]
    machine = (
        f"machine load not recorded for {', '.join(unmeasured)} (a session from before "
        "schema 11, or imported): whether other processes shaped the numbers is unknown"
        if unmeasured
        else "no other process busied the machine"
    )
    return [
        "every configuration: dispatch delay p99 within 5 ms, measuring loop not saturated, "
        "no queue growing without bound, cross-checks with the server within 5 % (where the "
        f"session recorded them); {machine}"
    ]


PREDICTED = "Predicted / measured (error)"


def prediction_part(session: Session) -> tuple[list[list[str]], list[str]] | None:
    """A session's stored prediction against what it measured, as ``workbench show`` prints
    it: the table's rows (``against_header``'s columns) and the lines below it, or why it
    cannot be read; None for a session that made none."""
    try:
        prediction = session.predictions()
    except SessionError as exc:
        return [], [str(exc)]
    if prediction is None:
        return None
    predicted = [c.summary for c in prediction.configs]
    return against_rows(predicted, session.summaries()), prediction_notes(prediction)


def write_report(
    sessions: list[Session],
    out_dir: Path,
    options: ChartOptions | None = None,
    relative: bool = False,
) -> Path:
    """Write the report folder; returns the Markdown page's path."""
    options = options or ChartOptions()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"cannot write to {out_dir}: {exc.strerror or exc}") from None
    comparison = compare_sessions(sessions, relative)
    charts = write_charts(sessions, out_dir / "charts", options, relative)
    write_csv(
        out_dir / "comparison.csv",
        comparison.rows(),
        ["configuration", "metric", *comparison.columns],
    )
    table_md = to_markdown(comparison)
    (out_dir / "comparison.md").write_text(table_md, encoding="utf-8")
    (out_dir / "comparison.json").write_text(
        json.dumps(
            {
                "columns": comparison.columns,
                "relative": relative,
                "warnings": comparison.warnings,
                "rows": comparison.rows(),
            },
            indent=1,
        ),
        encoding="utf-8",
    )
    title = "Concurrency Workbench report: " + " vs ".join(s.meta["name"] for s in sessions)
    md = [f"# {markdown(title)}", ""]
    if comparison.warnings:
        md += ["**Not a like-for-like comparison:**", ""]
        md += [f"- {markdown(w)}" for w in comparison.warnings] + [""]
    md += ["## Charts", ""]
    md += [f"![{t}](charts/{p.name})" for t, p in charts] + [""]
    md += ["## Results", "", table_md]
    predictions = [
        (column, part)
        for session, column in zip(sessions, comparison.columns, strict=True)
        if (part := prediction_part(session)) is not None
    ]
    if predictions:
        md += [f"## {PREDICTED}", ""]
    for column, (rows, notes) in predictions:
        md += [f"### {markdown(column)}", ""]
        if rows:
            md += ["| " + " | ".join(markdown(h) for h in against_header()) + " |"]
            md.append("|---" * len(against_header()) + "|")
            md += ["| " + " | ".join(markdown(c) for c in row) + " |" for row in rows] + [""]
        md += [f"- {markdown(line)}" for line in notes] + [""]
    md += ["## Definitions", ""]
    md += [f"- **{f.title}** ({how}): {f.definition}" for f, how in definitions(sessions)] + [""]
    md += ["## Can these numbers be trusted?", ""]
    for session, column in zip(sessions, comparison.columns, strict=True):
        md += [f"### {markdown(column)}", ""]
        md += [f"- {markdown(line)}" for line in trust_lines(session)] + [""]
    md += ["## Verdicts", ""]
    for session, column in zip(sessions, comparison.columns, strict=True):
        md += [f"### {markdown(column)}", ""]
        summaries = session.summaries()
        for verdict in lab_verdicts(summaries):
            md.append(f"- **{verdict.verdict}**: {markdown(verdict.hypothesis)}")
            md += [f"  - {markdown(line)}" for line in verdict.numbers]
        md.append("")
        for title, figures in optional_tables(summaries):
            md += [f"**{title}**", ""]
            md += ["| configuration | " + " | ".join(markdown(f.heading) for f in figures) + " |"]
            md.append("|---" * (len(figures) + 1) + "|")
            for s in summaries:
                md.append(
                    f"| {markdown(s.label)} | " + " | ".join(f.cell(s) for f in figures) + " |"
                )
            md.append("")
    md += ["## Sessions", ""]
    for session, column in zip(sessions, comparison.columns, strict=True):
        md += [f"### {markdown(column)}", "", "| | |", "|---|---|"]
        rows = _fingerprint(session) + _settings(session)
        md += [f"| {markdown(k)} | {markdown(v)} |" for k, v in rows] + [""]
    report = out_dir / "report.md"
    report.write_text("\n".join(md), encoding="utf-8")
    (out_dir / "report.html").write_text(
        _html(title, comparison, charts, sessions, predictions), encoding="utf-8"
    )
    return report


def _html(
    title: str,
    comparison: Any,
    charts: list[tuple[str, Path]],
    sessions: list[Session],
    predictions: list[tuple[str, tuple[list[list[str]], list[str]]]],
) -> str:
    e = html.escape
    page = theme_data()["report_page"]
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;"
        f"color:{page['text']}}}table{{border-collapse:collapse;margin:1em 0}}"
        f"td,th{{border:1px solid {page['rule']};padding:4px 8px;text-align:right}}"
        "td:first-child,th:first-child{text-align:left}"
        f"img{{max-width:100%;border:1px solid {page['image_border']}}}"
        f".warn{{background:{page['warning']};padding:8px}}</style></head><body>",
        f"<h1>{e(title)}</h1>",
    ]
    if comparison.warnings:
        parts.append(
            "<div class='warn'><b>Not a like-for-like comparison:</b><ul>"
            + "".join(f"<li>{e(w)}</li>" for w in comparison.warnings)
            + "</ul></div>"
        )
    parts.append("<h2>Charts</h2>")
    parts += [f"<figure><img src='charts/{e(p.name)}' alt='{e(t)}'></figure>" for t, p in charts]
    parts.append(
        "<h2>Results</h2><table><tr><th>configuration</th><th>metric</th>"
        + "".join(f"<th>{e(c)}</th>" for c in comparison.columns)
        + "</tr>"
    )
    for row in comparison.rows():
        cells = [comparison.cell_text(row, c) for c in comparison.columns]
        parts.append(
            f"<tr><td>{e(row['configuration'])}</td><td>{e(row['metric'])}</td>"
            + "".join(f"<td>{c}</td>" for c in cells)
            + "</tr>"
        )
    parts.append("</table>")
    if predictions:
        parts.append(f"<h2>{e(PREDICTED)}</h2>")
    for column, (rows, notes) in predictions:
        parts.append(f"<h3>{e(column)}</h3>")
        if rows:
            parts.append(
                "<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in against_header()) + "</tr>"
            )
            parts += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows]
            parts.append("</table>")
        parts.append("<ul>" + "".join(f"<li>{e(line)}</li>" for line in notes) + "</ul>")
    parts.append("<h2>Definitions</h2><ul>")
    parts += [
        f"<li><b>{e(f.title)}</b> ({e(how)}): {e(f.definition)}</li>"
        for f, how in definitions(sessions)
    ]
    parts.append("</ul><h2>Can these numbers be trusted?</h2>")
    for session, column in zip(sessions, comparison.columns, strict=True):
        parts.append(f"<h3>{e(column)}</h3><ul>")
        parts += [f"<li>{e(line)}</li>" for line in trust_lines(session)]
        parts.append("</ul>")
    parts.append("<h2>Verdicts</h2>")
    for session, column in zip(sessions, comparison.columns, strict=True):
        parts.append(f"<h3>{e(column)}</h3><ul>")
        summaries = session.summaries()
        for verdict in lab_verdicts(summaries):
            numbers = "".join(f"<li>{e(n)}</li>" for n in verdict.numbers)
            parts.append(
                f"<li><b>{e(verdict.verdict)}</b>: {e(verdict.hypothesis)}<ul>{numbers}</ul></li>"
            )
        parts.append("</ul>")
        for title, figures in optional_tables(summaries):
            parts.append(
                f"<p><b>{e(title)}</b></p><table><tr><th>configuration</th>"
                + "".join(f"<th>{e(f.heading)}</th>" for f in figures)
                + "</tr>"
            )
            parts += [
                f"<tr><td>{e(s.label)}</td>"
                + "".join(f"<td>{e(f.cell(s))}</td>" for f in figures)
                + "</tr>"
                for s in summaries
            ]
            parts.append("</table>")
    parts.append("<h2>Sessions</h2>")
    for session, column in zip(sessions, comparison.columns, strict=True):
        parts.append(f"<h3>{e(column)}</h3><table>")
        parts += [
            f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>"
            for k, v in _fingerprint(session) + _settings(session)
        ]
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)
