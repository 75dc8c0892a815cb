"""Tables out of a session: the lab-compatible ``concurrency.csv``, a per-request CSV, JSON."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.engine.base.errors import OutputDirError
from workbench.engine.base.records import StartupFacts, request_numbers
from workbench.engine.base.untrusted import csv_cell
from workbench.engine.figures import vllm_names
from workbench.engine.figures.conversation_cache import turn_caches
from workbench.engine.figures.footprint import predicted_footprint_mib
from workbench.engine.figures.metrics import (
    REQUEST_FIGURES,
    SUMMARY_PARTS,
    Figure,
    Part,
    in_part,
)
from workbench.engine.figures.per_request import NS, request_metrics
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.store import Session


def _sd_column(f: Figure) -> str:
    return f"{f.column}_sd"


LATER_PARTS = (Part.STEADY, Part.REASONING, Part.CONVERSATION, Part.SPECULATIVE)
"""The parts that came after concurrency.csv's columns settled: written after them all, in
this order, each figure followed by its spread, so a reader that takes the columns by place
finds the older ones where they were."""


def concurrency_columns() -> list[str]:
    """``concurrency.csv``'s columns, from the catalogue: the lab's first, exactly; then
    which configuration, every other measured figure, the spreads across repeats, the
    server's set-up, the figures as ``vllm bench serve`` names them, and last those over the
    steady state with the over-saturation flag, TTFO, a conversations run's turns, a
    draft model's drafts and the figures added to a part later (E2E p99)."""
    figures = [f for f in in_part(Part.CONFIG, Part.RUN, Part.SERVER) if not f.late]

    def part(p: Part) -> list[str]:
        return [f.column for f in figures if f.part is p and not f.lab]

    lab = [f.column for f in figures if f.lab]
    spreads = [_sd_column(f) for f in figures if f.spread]
    server = part(Part.SERVER)
    columns = lab + part(Part.CONFIG) + part(Part.RUN) + spreads + server
    late = [f for f in in_part(*SUMMARY_PARTS) if f.late]
    later = [
        c
        for f in (*in_part(*LATER_PARTS), *late)
        for c in (f.column, _sd_column(f))[: 1 + f.spread]
    ]
    return columns + list(vllm_names.COLUMNS) + later


# The lab's columns, which every version of concurrency.csv begins with.
LAB_COLUMNS = [f.column for f in in_part(Part.CONFIG, Part.RUN, Part.SERVER) if f.lab]

REQUEST_COLUMNS = [
    "config",
    "label",
    "repeat",
    "request",
    "warmup",
    "ok",
    "error",
    "http_status",
    "slot",
    "t_intended_s",
    "t_ready_s",
    "t_submit_s",
    "t_first_token_s",
    "t_last_token_s",
    "t_done_s",
    *(f.column for f in REQUEST_FIGURES if not f.appended),
    "output_tokens",
    "token_source",
    "chunks",
    "finish_reason",
    "cache_hit",
    "cache_n",
    "prompt_n",
    "prompt_ms",
    "predicted_n",
    "predicted_ms",
    "prompt",
    *(f.column for f in REQUEST_FIGURES if f.appended),
    "reasoning_token_source",
    "conversation",
    "turn",
    "reprefilled_tokens",
    "worker",
    "trace_line",
]
"""``requests.csv``'s columns, in order, the one place that order is said (the JSON export's
requests follow it too). A column that came later goes last, so a reader that takes the
columns by place finds the older ones where they were."""


def _round(value: Any, digits: int = 4) -> Any:
    return round(value, digits) if isinstance(value, float) else value


def concurrency_row(s: ConfigSummary) -> dict[str, Any]:
    """One configuration's row: each figure by its catalogue rule (4 decimals)."""
    row: dict[str, Any] = {}
    for f in in_part(*SUMMARY_PARTS):
        row[f.column] = f.of(s)
        if f.spread:
            row[_sd_column(f)] = f.sd_of(s)
    for name in vllm_names.COLUMNS:
        row[name] = s.vllm_value(name)
    return {k: _round(v) for k, v in row.items()}


def request_rows(session: Session) -> list[dict[str, Any]]:
    origin = session.meta["clock_origin_ns"]

    def rel(t: int | None) -> float | None:
        return None if t is None else round((t - origin) / NS, 6)

    rows = []
    records = [r for config in session.configs for r in session.records(config.index)]
    numbers = request_numbers(records)
    labels = {config.index: config.label for config in session.configs}
    caches = turn_caches(records)
    for r in records:
        m = request_metrics(r)
        timings = r.timings or {}
        tokens, source = r.output_tokens
        values = {
            "config": r.config_index,
            "label": labels[r.config_index],
            "repeat": None if r.warmup else r.repeat + 1,
            "request": numbers.get(r.key),
            "warmup": r.warmup,
            "ok": r.ok,
            "error": r.error,
            "http_status": r.http_status,
            "slot": r.slot,
            "t_intended_s": rel(r.t_intended_ns),
            "t_ready_s": rel(r.t_ready_ns),
            "t_submit_s": rel(r.t_submit_ns),
            "t_first_token_s": rel(r.t_first_token_ns),
            "t_last_token_s": rel(r.t_last_token_ns),
            "t_done_s": rel(r.t_done_ns),
            **{f.column: f.value(m) for f in REQUEST_FIGURES},
            "output_tokens": tokens,
            "token_source": source,
            "chunks": len(r.chunks),
            "finish_reason": r.finish_reason,
            "cache_hit": m.cache_hit if m else None,
            "cache_n": timings.get("cache_n"),
            "prompt_n": timings.get("prompt_n"),
            "prompt_ms": timings.get("prompt_ms"),
            "predicted_n": timings.get("predicted_n"),
            "predicted_ms": timings.get("predicted_ms"),
            "prompt": r.prompt,
            "reasoning_token_source": m.reasoning_token_source if m else None,
            "conversation": r.conversation_id,
            "turn": r.turn,
            "reprefilled_tokens": c.reprefilled if (c := caches.get(r.key)) is not None else None,
            "worker": r.worker,
            "trace_line": r.trace_line,
        }
        rows.append({column: values[column] for column in REQUEST_COLUMNS})
    return rows


def write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            for row in rows:
                writer.writerow(
                    {k: "" if row.get(k) is None else csv_cell(row.get(k)) for k in columns}
                )
    except OSError as exc:
        raise OutputDirError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_concurrency_csv(path: Path, summaries: list[ConfigSummary]) -> None:
    write_csv(path, [concurrency_row(s) for s in summaries], concurrency_columns())


def write_requests_csv(path: Path, session: Session) -> None:
    write_csv(path, request_rows(session), REQUEST_COLUMNS)


def figure_definitions() -> list[dict[str, str]]:
    """What each of a configuration's ``figures`` means, from the catalogue, so that the JSON
    document explains itself."""
    return [
        {
            "key": f.column,
            "title": f.title,
            "unit": f.unit,
            "over_repeats": f.combine.value,
            "definition": f.definition,
        }
        for f in in_part(*SUMMARY_PARTS)
    ]


def session_document(session: Session) -> dict[str, Any]:
    """Everything in a session as one JSON-ready document (times in seconds from its start),
    with each configuration's figures as ``concurrency.csv`` has them and what they mean."""
    origin = session.meta["clock_origin_ns"]
    summaries = session.summaries()
    configs = []
    for config, summary in zip(session.configs, summaries, strict=True):
        configs.append(
            {
                "index": config.index,
                "label": config.label,
                "status": config.status,
                "error": config.error,
                "server": config.server,
                "workload": config.workload,
                "command": config.command,
                "log_path": config.log_path,
                "facts": config.facts.to_dict() if config.facts else {},
                "slots": config.slots,
                "summary": summary.to_dict(),
                "figures": concurrency_row(summary),
                "process_samples": [
                    {
                        "t_s": (p.t_ns - origin) / NS,
                        "rss_bytes": p.rss_bytes,
                        "cpu_percent": p.cpu_percent,
                    }
                    for p in session.samples("process_samples", config.index)
                ],
                "gpu_samples": [
                    {"t_s": (g.t_ns - origin) / NS, "gpu_bytes": g.gpu_bytes}
                    for g in session.samples("gpu_samples", config.index)
                ],
                "metrics_samples": [
                    {"t_s": (m.t_ns - origin) / NS, **m.values}
                    for m in session.samples("metrics_samples", config.index)
                ],
                "slots_samples": [
                    {"t_s": (s.t_ns - origin) / NS, "slots": s.slots}
                    for s in session.samples("slots_samples", config.index)
                ],
            }
        )
    meta = {k: v for k, v in session.meta.items() if k != "hardware_json"}
    meta["status"] = session.status
    return {
        "schema_version": session.schema_version,
        "session": meta,
        "hardware": session.hardware.to_dict(),
        "figures": figure_definitions(),
        "configs": configs,
        "requests": request_rows(session),
    }


def write_json(path: Path, session: Session) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(session_document(session), indent=1), encoding="utf-8")
    except OSError as exc:
        raise OutputDirError(f"cannot write {path}: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class MemoryCheck:
    label: str
    predicted_mib: float
    peak_rss_mib: float | None

    @property
    def error(self) -> float | None:
        """(measured - predicted) / measured: what the buffers leave out (runtime, code)."""
        if not self.peak_rss_mib:
            return None
        return (self.peak_rss_mib - self.predicted_mib) / self.peak_rss_mib


def memory_checks(session: Session) -> list[MemoryCheck]:
    """The server's own buffer figures (model + KV + compute) against its measured RSS."""
    checks = []
    for config in session.configs:
        predicted = predicted_footprint_mib(config.facts or StartupFacts())
        if predicted is None:
            continue
        rss = [p.rss_bytes for p in session.samples("process_samples", config.index) if p.rss_bytes]
        checks.append(MemoryCheck(config.label, predicted, max(rss) / 2**20 if rss else None))
    return checks
