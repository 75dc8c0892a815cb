"""Rich tables for results, shared by ``run`` (live) and ``show`` (from a session)."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from workbench.engine.analysis import ConfigSummary


def _num(value: Any, digits: int = 2, sd: Any = None) -> str:
    if value is None:
        return "-"
    text = f"{value:.{digits}f}" if isinstance(value, float) else str(value)
    if isinstance(sd, float):
        text += f" ±{sd:.{digits}f}"
    return text


def results_table(summaries: list[ConfigSummary], title: str = "Results") -> Table:
    """The lab's table (slots, total s, agg tok/s, TTFT p50/max, decode tok/s) and more."""
    table = Table(title=title, title_justify="left", header_style="bold")
    for name in (
        "config",
        "slots",
        "ctx",
        "n_ctx_slot",
        "conc",
        "total s",
        "agg tok/s",
        "TTFT p50 s",
        "TTFT max s",
        "decode tok/s",
        "queue p50 s",
        "queue max s",
        "TPOT p50 ms",
        "ITL p99 ms",
        "failed",
        "cache hits",
    ):
        table.add_column(name, justify="left" if name == "config" else "right")
    for s in summaries:
        m, sd = s.mean, s.sd
        failed = s.value("failed")
        table.add_row(
            Text(s.label + ("" if s.status == "ok" else f" [{s.status}]")),
            str(s.slots),
            str(s.ctx),
            _num(s.n_ctx_slot),
            str(s.concurrency),
            _num(m.get("makespan_s"), 2, sd.get("makespan_s")),
            _num(m.get("agg_tok_s"), 1, sd.get("agg_tok_s")),
            _num(m.get("ttft_p50_s"), 3, sd.get("ttft_p50_s")),
            _num(m.get("ttft_max_s"), 3, sd.get("ttft_max_s")),
            _num(m.get("decode_tok_s"), 1, sd.get("decode_tok_s")),
            _num(s.value("queue_wait_p50_s"), 3),
            _num(s.value("queue_wait_max_s"), 3),
            _num(s.value("tpot_p50_ms"), 2),
            _num(s.value("itl_p99_ms"), 2),
            f"[red]{failed}[/red]" if failed else _num(failed),
            _num(s.value("cache_hits")),
        )
    return table


def hardware_line(hw: dict[str, Any]) -> str:
    ram = hw.get("ram_bytes")
    gpus = ", ".join(g.get("name", "?") for g in hw.get("gpus") or [])
    parts = [
        hw.get("apple_chip") or hw.get("cpu_model") or "?",
        f"{hw.get('cpu_physical_cores')}C/{hw.get('cpu_logical_cores')}T",
        f"{ram / 2**30:.0f} GiB RAM" if ram else "",
        hw.get("os", ""),
        f"GPU: {gpus}" if gpus else "",
        hw.get("llama_server_build", ""),
    ]
    return " | ".join(p for p in parts if p)


def requests_table(session: Any) -> Table:
    """Every request of a session, one row each."""
    from workbench.engine.export import request_rows

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
