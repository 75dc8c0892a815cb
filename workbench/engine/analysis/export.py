"""Tables out of a session: the lab-compatible ``concurrency.csv``, a per-request CSV, JSON."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.engine.base.errors import OutputDirError
from workbench.engine.base.escaping import csv_cell
from workbench.engine.base.records import RequestRecord, StartupFacts, request_numbers
from workbench.engine.figures import vllm_names
from workbench.engine.figures.conversation_cache import TurnCache, turn_caches
from workbench.engine.figures.footprint import predicted_footprint_mib
from workbench.engine.figures.metrics import (
    REQUEST_FIGURES,
    SUMMARY_PARTS,
    Figure,
    Part,
    in_part,
)
from workbench.engine.figures.per_request import NS, RequestMetrics, request_metrics
from workbench.engine.figures.stalls import RequestStalls, causes, session_stalls
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.store import Session


def _sd_column(f: Figure) -> str:
    return f"{f.column}_sd"


LATER_PARTS = (Part.STEADY, Part.REASONING, Part.CONVERSATION, Part.SPECULATIVE, Part.STALLS)
"""The parts that came after concurrency.csv's columns settled: written after them all, in
this order, each figure followed by its spread, so a reader that takes the columns by place
finds the older ones where they were."""


def concurrency_columns() -> list[str]:
    """``concurrency.csv``'s columns, from the catalogue: the lab's first, exactly; then
    which configuration, every other measured figure, the spreads across repeats, the
    server's set-up, the figures as ``vllm bench serve`` names them, and last those over the
    steady state with the over-saturation flag, TTFO, a conversations run's turns, a
    draft model's drafts and the figures added later (E2E p99, ..., the stalls)."""
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
        for f in (*(f for f in in_part(*LATER_PARTS) if not f.late), *late)
        for c in (f.column, _sd_column(f))[: 1 + f.spread]
    ]
    return columns + list(vllm_names.COLUMNS) + later


# The lab's columns, which every version of concurrency.csv begins with.
LAB_COLUMNS = [f.column for f in in_part(Part.CONFIG, Part.RUN, Part.SERVER) if f.lab]


@dataclass(frozen=True)
class _Request:
    """What one row of ``requests.csv`` is made of: a record, its figures, and what the
    session says around it (its configuration's label, its number, its turn's cache)."""

    record: RequestRecord
    metrics: RequestMetrics | None
    label: str
    number: int | None
    cache: TurnCache | None
    origin_ns: int
    stalls: RequestStalls | None = None
    stalled_by: str | None = None  # what stalled it: request numbers, ``unknown``, ``none``

    def since_start(self, t_ns: int | None) -> float | None:
        return None if t_ns is None else round((t_ns - self.origin_ns) / NS, 6)


@dataclass(frozen=True)
class RequestColumn:
    """One column of ``requests.csv``: its name and how a request's value is read."""

    name: str
    value: Callable[[_Request], Any]


def _stamp(name: str, attr: str) -> RequestColumn:
    """A raw timestamp, in seconds since the session's clock origin."""
    return RequestColumn(name, lambda r: r.since_start(getattr(r.record, attr)))


def _timing(name: str) -> RequestColumn:
    """A value of the server's own ``timings``, as it sent it."""
    return RequestColumn(name, lambda r: (r.record.timings or {}).get(name))


def _figures(*keys: str) -> list[RequestColumn]:
    """The catalogue's per-request figures, each under its column and in its unit."""
    by_key = {f.key: f for f in REQUEST_FIGURES}
    return [
        RequestColumn(by_key[k].column, lambda r, f=by_key[k]: f.value(r.metrics)) for k in keys
    ]


def _cache_hit(r: _Request) -> Any:
    return r.metrics.cache_hit if r.metrics else None


def _reasoning_source(r: _Request) -> Any:
    return r.metrics.reasoning_token_source if r.metrics else None


def _reprefilled(r: _Request) -> int | None:
    return r.cache.reprefilled if r.cache is not None else None


def _stalls(read: Callable[[RequestStalls], Any]) -> Callable[[_Request], Any]:
    """A figure of the request's stalls (empty where it was not judged, or failed)."""

    def value(r: _Request) -> Any:
        if r.stalls is None or r.stalls.stalls is None:
            return None
        return _round(read(r.stalls), 6)

    return value


REQUEST_TABLE: tuple[RequestColumn, ...] = (
    RequestColumn("config", lambda r: r.record.config_index),
    RequestColumn("label", lambda r: r.label),
    RequestColumn("repeat", lambda r: None if r.record.warmup else r.record.repeat + 1),
    RequestColumn("request", lambda r: r.number),
    RequestColumn("warmup", lambda r: r.record.warmup),
    RequestColumn("ok", lambda r: r.record.ok),
    RequestColumn("error", lambda r: r.record.error),
    RequestColumn("http_status", lambda r: r.record.http_status),
    RequestColumn("slot", lambda r: r.record.slot),
    _stamp("t_intended_s", "t_intended_ns"),
    _stamp("t_ready_s", "t_ready_ns"),
    _stamp("t_submit_s", "t_submit_ns"),
    _stamp("t_first_token_s", "t_first_token_ns"),
    _stamp("t_last_token_s", "t_last_token_ns"),
    _stamp("t_done_s", "t_done_ns"),
    *_figures(
        "ttft_s", "e2e_s", "tpot_s", "decode_tok_s", "queue_wait_s", "prefill_s", "dispatch_s",
        "connect_s", "prompt_tokens", "prefill_tok_s", "ttft_from_intended_s",
        "e2e_from_intended_s",
    ),
    RequestColumn("output_tokens", lambda r: r.record.output_tokens[0]),
    RequestColumn("token_source", lambda r: r.record.output_tokens[1]),
    RequestColumn("chunks", lambda r: len(r.record.chunks)),
    RequestColumn("finish_reason", lambda r: r.record.finish_reason),
    RequestColumn("cache_hit", _cache_hit),
    _timing("cache_n"),
    _timing("prompt_n"),
    _timing("prompt_ms"),
    _timing("predicted_n"),
    _timing("predicted_ms"),
    RequestColumn("prompt", lambda r: r.record.prompt),
    *_figures("ttfo_s", "reasoning_tokens"),
    RequestColumn("reasoning_token_source", _reasoning_source),
    RequestColumn("conversation", lambda r: r.record.conversation_id),
    RequestColumn("turn", lambda r: r.record.turn),
    RequestColumn("reprefilled_tokens", _reprefilled),
    RequestColumn("worker", lambda r: r.record.worker),
    RequestColumn("trace_line", lambda r: r.record.trace_line),
    RequestColumn("stalls", _stalls(lambda s: len(s.stalls or ()))),
    RequestColumn("stall_max_s", _stalls(lambda s: s.longest_s)),
    RequestColumn("stalled_s", _stalls(lambda s: s.stalled_s)),
    RequestColumn("stalled_by", lambda r: r.stalled_by),
    RequestColumn("ttft_held_s", lambda r: _round(r.stalls.ttft_held_s, 6) if r.stalls else None),
)  # fmt: skip
"""``requests.csv``'s columns, in order: the one place each column and its place are said
(the JSON export's requests follow it too). A column added later goes last, so a reader
that takes the columns by place finds the older ones where they were; a per-request figure
of the catalogue is named here at its place."""

REQUEST_COLUMNS = [c.name for c in REQUEST_TABLE]


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
    records = [r for config in session.configs for r in session.records(config.index)]
    numbers = request_numbers(records)
    labels = {config.index: config.label for config in session.configs}
    caches = turn_caches(records)
    stalls = session_stalls(records)
    origin = session.meta["clock_origin_ns"]
    rows = []
    for record in records:
        found = stalls.get(record.key)
        request = _Request(
            record,
            request_metrics(record),
            labels[record.config_index],
            numbers.get(record.key),
            caches.get(record.key),
            origin,
            found,
            " ".join(causes(found.stalls, numbers)) if found and found.stalls else None,
        )
        rows.append({c.name: c.value(request) for c in REQUEST_TABLE})
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
    write_csv(path, request_rows(session), [c.name for c in REQUEST_TABLE])


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
