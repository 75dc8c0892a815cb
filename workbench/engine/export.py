"""Tables out of a session: the lab-compatible ``concurrency.csv``, a per-request CSV, JSON."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.engine.analysis import NS, ConfigSummary, request_metrics
from workbench.engine.errors import OutputDirError
from workbench.engine.session import Session

# The lab's columns come first, exactly; the rest are ours.
LAB_COLUMNS = [
    "slots",
    "ctx",
    "n_ctx_slot",
    "concurrency",
    "max_tokens",
    "total_s",
    "agg_tok_s",
    "ttft_p50_s",
    "ttft_max_s",
    "decode_tok_s",
]
EXTRA_COLUMNS = [
    "label",
    "status",
    "repeats",
    "requests",
    "failed",
    "cache_hits",
    "output_tokens",
    "ttft_p90_s",
    "ttft_p99_s",
    "tpot_p50_ms",
    "tpot_p90_ms",
    "tpot_p99_ms",
    "itl_p50_ms",
    "itl_p90_ms",
    "itl_p99_ms",
    "itl_max_ms",
    "e2e_p50_s",
    "e2e_p90_s",
    "queue_wait_p50_s",
    "queue_wait_max_s",
    "total_s_sd",
    "agg_tok_s_sd",
    "ttft_p50_s_sd",
    "ttft_max_s_sd",
    "decode_tok_s_sd",
    "n_slots",
    "kv_unified",
    "cont_batching",
    "token_source",
]
CONCURRENCY_COLUMNS = LAB_COLUMNS + EXTRA_COLUMNS

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
    "t_submit_s",
    "t_first_token_s",
    "t_last_token_s",
    "t_done_s",
    "ttft_s",
    "e2e_s",
    "tpot_ms",
    "decode_tok_s",
    "queue_wait_s",
    "prefill_s",
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
]


def _round(value: Any, digits: int = 4) -> Any:
    return round(value, digits) if isinstance(value, float) else value


def concurrency_row(s: ConfigSummary) -> dict[str, Any]:
    row: dict[str, Any] = {
        "slots": s.slots,
        "ctx": s.ctx,
        "n_ctx_slot": s.n_ctx_slot,
        "concurrency": s.concurrency,
        "max_tokens": s.max_tokens,
        "total_s": s.mean.get("makespan_s"),
        "agg_tok_s": s.mean.get("agg_tok_s"),
        "ttft_p50_s": s.mean.get("ttft_p50_s"),
        "ttft_max_s": s.mean.get("ttft_max_s"),
        "decode_tok_s": s.mean.get("decode_tok_s"),
        "label": s.label,
        "status": s.status,
        "repeats": len(s.runs),
        "n_slots": s.n_slots,
        "kv_unified": s.kv_unified,
        "cont_batching": s.cont_batching,
        "token_source": "+".join(sorted({r.token_source for r in s.runs})),
    }
    for name in (
        "requests",
        "failed",
        "cache_hits",
        "output_tokens",
        "ttft_p90_s",
        "ttft_p99_s",
        "tpot_p50_ms",
        "tpot_p90_ms",
        "tpot_p99_ms",
        "itl_p50_ms",
        "itl_p90_ms",
        "itl_p99_ms",
        "itl_max_ms",
        "e2e_p50_s",
        "e2e_p90_s",
        "queue_wait_p50_s",
        "queue_wait_max_s",
    ):
        row[name] = s.value(name)
    for name in ("ttft_p50_s", "ttft_max_s", "agg_tok_s", "decode_tok_s"):
        row[f"{name}_sd"] = s.sd.get(name)
    row["total_s_sd"] = s.sd.get("makespan_s")
    return {k: _round(v) for k, v in row.items()}


def request_rows(session: Session) -> list[dict[str, Any]]:
    origin = session.meta["clock_origin_ns"]

    def rel(t: int | None) -> float | None:
        return None if t is None else round((t - origin) / NS, 6)

    rows = []
    for config in session.configs:
        for r in session.records(config.index):
            m = request_metrics(r)
            timings = r.timings or {}
            tokens, source = r.output_tokens
            rows.append(
                {
                    "config": config.index,
                    "label": config.label,
                    "repeat": r.repeat,
                    "request": r.index,
                    "warmup": r.warmup,
                    "ok": r.ok,
                    "error": r.error,
                    "http_status": r.http_status,
                    "slot": r.slot,
                    "t_submit_s": rel(r.t_submit_ns),
                    "t_first_token_s": rel(r.t_first_token_ns),
                    "t_last_token_s": rel(r.t_last_token_ns),
                    "t_done_s": rel(r.t_done_ns),
                    "ttft_s": m and _round(m.ttft_s, 6),
                    "e2e_s": m and _round(m.e2e_s, 6),
                    "tpot_ms": (m and m.tpot_s is not None and _round(m.tpot_s * 1000, 4)) or None,
                    "decode_tok_s": m and _round(m.decode_tok_s, 3),
                    "queue_wait_s": m and _round(m.queue_wait_s, 6),
                    "prefill_s": m and _round(m.prefill_s, 6),
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
                }
            )
    return rows


def write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            for row in rows:
                writer.writerow({k: "" if row.get(k) is None else row.get(k) for k in columns})
    except OSError as exc:
        raise OutputDirError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_concurrency_csv(path: Path, summaries: list[ConfigSummary]) -> None:
    write_csv(path, [concurrency_row(s) for s in summaries], CONCURRENCY_COLUMNS)


def write_requests_csv(path: Path, session: Session) -> None:
    write_csv(path, request_rows(session), REQUEST_COLUMNS)


def session_document(session: Session) -> dict[str, Any]:
    """Everything in a session as one JSON-ready document (times in seconds from its start)."""
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
                "facts": config.facts,
                "slots": config.slots,
                "summary": summary.to_dict(),
                "process_samples": [
                    {"t_s": (t - origin) / NS, "rss_bytes": rss, "cpu_percent": cpu}
                    for _, t, rss, cpu in session.samples("process_samples", config.index)
                ],
                "gpu_samples": [
                    {"t_s": (t - origin) / NS, "gpu_bytes": gpu}
                    for _, t, gpu in session.samples("gpu_samples", config.index)
                ],
                "metrics_samples": [
                    {"t_s": (t - origin) / NS, **json.loads(values)}
                    for _, t, values in session.samples("metrics_samples", config.index)
                ],
                "slots_samples": [
                    {"t_s": (t - origin) / NS, "slots": json.loads(slots)}
                    for _, t, slots in session.samples("slots_samples", config.index)
                ],
            }
        )
    meta = {k: v for k, v in session.meta.items() if k != "hardware_json"}
    meta["status"] = session.status
    return {
        "schema_version": session.schema_version,
        "session": meta,
        "hardware": session.hardware,
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
        facts = config.facts
        parts = [facts.get(k) for k in ("model_buffer_mib", "kv_buffer_mib", "compute_buffer_mib")]
        if not all(isinstance(p, int | float) for p in parts):
            continue
        rss = [r for _, _, r, _ in session.samples("process_samples", config.index) if r]
        checks.append(
            MemoryCheck(config.label, float(sum(parts)), max(rss) / 2**20 if rss else None)
        )
    return checks
