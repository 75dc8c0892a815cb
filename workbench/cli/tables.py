"""Rich tables for results, shared by ``run`` (live) and ``show`` (from a session)."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from workbench.engine.figures.metrics import View, shown_in
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.measure.hardware import machine_name


def _num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def results_table(summaries: list[ConfigSummary], title: str = "Results") -> Table:
    """The terminal's figures of the catalogue: the lab's (slots, total s, agg tok/s, TTFT
    p50/max, decode tok/s, with ± sd across repeats) first, then more."""
    table = Table(title=title, title_justify="left", header_style="bold")
    columns = shown_in(View.TERMINAL)
    for figure in columns:
        table.add_column(figure.header, justify="left" if figure.key == "label" else "right")
    for s in summaries:
        cells: list[Text | str] = []
        for figure in columns:
            text = figure.cell(s, with_sd=True)
            if figure.key == "label":
                cells.append(Text(text + "".join(f" [{flag}]" for flag in s.flags)))
            elif figure.key == "failed" and figure.of(s):
                cells.append(f"[red]{text}[/red]")
            else:
                cells.append(text)
        table.add_row(*cells)
    return table


def hardware_line(hw: dict[str, Any]) -> str:
    ram = hw.get("ram_bytes")
    gpus = ", ".join(g.get("name", "?") for g in hw.get("gpus") or [])
    parts = [
        machine_name(hw),
        f"{hw.get('cpu_physical_cores')}C/{hw.get('cpu_logical_cores')}T",
        f"{ram / 2**30:.0f} GiB RAM" if ram else "",
        hw.get("os", ""),
        f"GPU: {gpus}" if gpus else "",
        hw.get("llama_server_build", ""),
    ]
    return " | ".join(p for p in parts if p)


def requests_table(session: Any) -> Table:
    """Every request of a session, one row each."""
    from workbench.engine.analysis.export import request_rows

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
