"""Everything the commands print that is more than a sentence: rich tables and the lines
that describe a record (a session, a model, an event), so each command only gathers its data
and prints what these return. ``results_table`` is shared by ``run`` (live) and ``show``
(from a session)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from workbench.engine.analysis.compare import Comparison
from workbench.engine.analysis.export import MemoryCheck, request_rows
from workbench.engine.analysis.library import SessionInfo
from workbench.engine.analysis.planner import ModelFacts, PlanRow
from workbench.engine.analysis.roofline import RooflineRow
from workbench.engine.analysis.slo import SHOWN, ConfigGoodput, machines_needed
from workbench.engine.analysis.verdicts import Verdict
from workbench.engine.base.records import Hardware, ImportSource
from workbench.engine.events import ConfigFinished, ConfigStarted, Notice, ServerReady
from workbench.engine.figures.metrics import View, figure, shown_in
from workbench.engine.figures.summaries import ConfigSummary

# The width to lay tables out at when neither a terminal nor ``COLUMNS`` says one (a log, a
# pipe in CI): rich's own 80 would wrap the lab's table more than a log reader's window needs.
DEFAULT_WIDTH = 120


def output_console() -> Console:
    """The console the commands print to: as wide as the terminal (stdout's, or stdin's or
    stderr's when stdout is piped) or ``COLUMNS``, as rich finds them, else ``DEFAULT_WIDTH``."""
    if os.environ.get("COLUMNS", "").isdigit() or _terminal_width():
        return Console()
    return Console(width=DEFAULT_WIDTH)


def _terminal_width() -> int:
    """The width of the first of stdin, stdout and stderr that is a terminal (rich's own
    order), 0 when none is."""
    for fd in (0, 1, 2):
        try:
            return os.get_terminal_size(fd).columns
        except (OSError, ValueError):
            continue
    return 0


def _num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def results_table(summaries: list[ConfigSummary], title: str = "Results") -> Table:
    """The terminal's figures of the catalogue: the lab's (slots, total s, agg tok/s, TTFT
    p50/max, decode tok/s, with ± sd across repeats) first, then more."""
    table = Table(title=title, title_justify="left", header_style="bold")
    columns = shown_in(View.TERMINAL)
    for column in columns:
        table.add_column(column.header, justify="left" if column.key == "label" else "right")
    for s in summaries:
        cells: list[Text | str] = []
        for column in columns:
            text = column.cell(s, with_sd=True)
            if column.key == "label":
                cells.append(Text(text + "".join(f" [{flag}]" for flag in s.flags)))
            elif column.key == "failed" and column.of(s):
                cells.append(f"[red]{text}[/red]")
            else:
                cells.append(text)
        table.add_row(*cells)
    return table


def hardware_line(hw: Hardware) -> str:
    if hw == Hardware():
        return "machine: not recorded"
    ram = hw.ram_bytes
    gpus = ", ".join(g.name or "?" for g in hw.gpus)
    cores = hw.cpu_physical_cores, hw.cpu_logical_cores
    parts = [
        hw.machine_name,
        f"{cores[0]}C/{cores[1]}T" if all(cores) else "",
        f"{ram / 2**30:.0f} GiB RAM" if ram else "",
        hw.os or "",
        f"GPU: {gpus}" if gpus else "",
        hw.llama_server_build or "",
    ]
    return " | ".join(p for p in parts if p)


def requests_table(session: Any) -> Table:
    """Every request of a session, one row each."""
    table = Table(title="Requests", title_justify="left", header_style="bold")
    columns = (
        "config",
        "repeat",
        "request",
        "ok",
        "ttft_s",
        "queue_wait_s",
        "e2e_s",
        "output_tokens",
        "decode_tok_s",
        "cache_hit",
        "error",
    )
    for name in columns:
        table.add_column(name, justify="left" if name in ("error",) else "right")
    for row in request_rows(session):
        if row["warmup"]:
            continue
        table.add_row(
            *[
                _num(row[c], 3)
                if isinstance(row[c], float)
                else Text(str(row[c] if row[c] is not None else "-"))
                for c in columns
            ]
        )
    return table


# -- run ------------------------------------------------------------------------------------
def run_line(name: str, n_configs: int, session_path: Path | None) -> str:
    """What ``workbench run`` is about to do, printed once the run is prepared."""
    return (
        f"[bold]{escape(name)}[/bold]: {n_configs} configuration(s); "
        f"session {escape(str(session_path))}"
    )


def event_line(event: object) -> str | None:
    """One line of plain progress for a terminal that is not interactive (CI logs, pipes)."""
    match event:
        case ConfigStarted(config=config):
            return f"config {config.index + 1}: {escape(config.label)}"
        case ServerReady(facts=facts):
            return (
                f"  server ready: n_slots={facts.n_slots} "
                f"n_ctx_slot={facts.n_ctx_slot} kv_unified={facts.kv_unified}"
            )
        case ConfigFinished(summary=summary) if summary is not None:
            agg = figure("agg_tok_s")
            rate = agg.of(summary)
            line = (
                f"  {summary.status}: {summary.value('ok') or 0}/{summary.value('requests') or 0}"
                f" requests ok" + (f", {agg.text(rate)} {agg.unit} aggregate" if rate else "")
            )
            if why := summary.not_same_task:
                line += f"\n  [red]not the same task:[/red] {escape(why)}"
            return line
        case Notice(level=level, text=text):
            style = "red" if level == "error" else "yellow"
            return f"[{style}]{level}:[/{style}] {escape(text)}"
    return None


# -- sessions -------------------------------------------------------------------------------
def session_line(meta: dict[str, Any], status: str) -> str:
    """A session's name, date, status and mode, the first line of ``show``."""
    return (
        f"[bold]{escape(meta['name'])}[/bold]  {meta['created_at']}  status: "
        f"[{'green' if status == 'complete' else 'yellow'}]{status}"
        f"[/]  mode: {meta['mode']}" + (f" {escape(meta['base_url'])}" if meta["base_url"] else "")
    )


def reported_table(session: Any, source: ImportSource) -> Table:
    """An imported file's own figures, under its names, one column per configuration: kept
    apart from the results above, which the workbench derived from the file's times."""
    reported = [session.reported_figures(c.index) for c in session.configs]
    table = Table(title=escape(f"As {source.tool} reported them ({source.file_name})"))
    table.add_column("figure")
    for config in session.configs:
        table.add_column(escape(config.label), justify="right")
    for name in dict.fromkeys(n for figures in reported for n in figures):
        values = [figures.get(name) for figures in reported]
        shown = [int(v) if v is not None and v.is_integer() else v for v in values]
        table.add_row(escape(name), *(_num(v, 3) for v in shown))
    return table


def memory_table(checks: list[MemoryCheck]) -> Table:
    """The server's buffer figures against its measured memory, one row per configuration."""
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
    return memory


def sessions_table(infos: list[SessionInfo]) -> Table:
    """The sessions found in folders, an unreadable one named with its error."""
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
    return table


def comparison_table(comparison: Comparison, relative: bool) -> Table:
    """Sessions side by side: a row per configuration and metric, a column per session."""
    table = Table(
        title="Comparison" + (" (relative to 1 slot)" if relative else ""),
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
    return table


def verdict_line(verdict: Verdict) -> Text:
    """A hypothesis and whether the session supports it, in the verdict's colour."""
    styles = {"supported": "green", "not supported": "red", "inconclusive": "yellow"}
    return Text(f"{verdict.verdict.upper()}", style=f"bold {styles[verdict.verdict]}") + Text(
        f"  {verdict.hypothesis}"
    )


# -- capacity -------------------------------------------------------------------------------
def model_line(model: ModelFacts, kv_type: str, available: int, where: str) -> str:
    """What the plan is made of: the model's shape, its KV cost per token, the memory."""
    per_token_kib = model.kv_bytes_per_token(kv_type, kv_type) / 1024
    return (
        f"{model.name} ({model.architecture}, {model.quantization}): {model.layers} layers, "
        f"{max(model.kv_heads)} KV heads x {model.head_k}, weights "
        f"{model.tensor_bytes / 2**20:.0f} MiB, KV {per_token_kib:.1f} KiB per token "
        f"({kv_type}); memory to plan for: {available / 2**30:.1f} GiB ({where})"
    )


def plan_table(rows: list[PlanRow]) -> Table:
    """Each context and slot count: the KV cache, the total, and whether it fits."""
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
    return table


def slo_table(results: list[ConfigGoodput], peak: int | None) -> Table:
    """Goodput per configuration against the SLO, and the users each one serves (with the
    machines a ``peak`` of concurrent users needs)."""
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
    return table


def roofline_table(rows: list[RooflineRow]) -> Table:
    """Measured decode speed against the bound memory bandwidth sets, per configuration."""
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
    return table
