"""``vllm bench serve``'s result file, both ways.

The shape is the one ``vllm bench serve --save-result --save-detailed`` writes
(``vllm/benchmarks/serve.py``, ``benchmark()`` and ``main_async()``): settings at the top
(``model_id``, ``backend``, ``request_rate``, ``burstiness``, ``max_concurrency``), the summary
(``duration``, ``completed``, ``request_throughput``, ``mean_ttft_ms``, ``p99_itl_ms``, ...)
and, with ``--save-detailed``, one list per request field: ``start_times`` (seconds of the
client's ``perf_counter``; exported: from the session's start), ``ttfts``, ``latencies`` (s),
``itls`` (a list of gaps in s per request), ``input_lens``, ``output_lens``,
``generated_texts`` and ``errors`` ("" when it succeeded). The file does not record vLLM's version.

Exported files carry the same keys and units, one file per configuration (per repeat where a
configuration has several), so vLLM's own plotting and comparison scripts read them.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from workbench.engine.analysis.library import model_file_name
from workbench.engine.base.errors import OutputDirError
from workbench.engine.base.records import ImportSource, RequestRecord
from workbench.engine.figures.per_request import NS, prompt_tokens, request_metrics
from workbench.engine.figures.per_run import makespan_s
from workbench.engine.figures.vllm_names import COUNTS, THROUGHPUTS, vllm_figures
from workbench.engine.interop.checked import MAX_ANSWER, MAX_ERROR, Fields, figures
from workbench.engine.interop.imported import ImportedRequest, ImportedResult, ImportedRun
from workbench.engine.store import ConfigRow, Session

TOOL = "vllm bench serve"
PER_REQUEST = ("ttfts", "itls", "latencies", "input_lens", "output_lens", "errors")
# The summary's names besides the statistics (``mean_ttft_ms``, ...): ours, and vLLM's others.
SUMMARY = {
    *COUNTS,
    *THROUGHPUTS,
    "duration",
    "failed",
    "request_goodput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
}
STATISTIC = re.compile(r"(mean|median|std|p\d+(\.\d+)?)_[a-z_]+_ms")
CHAT_BACKENDS = ("openai-chat",)
VLLM_DATE = "%Y%m%d-%H%M%S"  # vLLM's ``date`` field: local time, no zone


def looks_like_vllm(doc: Any) -> bool:
    return isinstance(doc, dict) and "request_throughput" in doc and "completed" in doc


def read_vllm(doc: dict[str, Any], file_name: str) -> ImportedResult:
    check = Fields(file_name)
    if not all(key in doc for key in PER_REQUEST):
        missing = ", ".join(k for k in PER_REQUEST if k not in doc)
        raise check.error(
            "is a vllm bench serve summary without per-request times",
            f"(no {missing}): run it with --save-result --save-detailed",
        )
    n = check.requests(len(check.listed(doc["ttfts"], "ttfts")), "ttfts")
    lists = {key: check.listed(doc[key], key, n) for key in PER_REQUEST}
    starts = check.listed(doc["start_times"], "start_times", n) if "start_times" in doc else None
    texts = check.listed(doc.get("generated_texts") or [""] * n, "generated_texts", n)
    requests = []
    for i in range(n):
        error = check.text(lists["errors"][i], f"errors[{i}]", MAX_ERROR)
        failed = bool(error)
        requests.append(
            ImportedRequest(
                start_s=check.clock(starts[i], f"start_times[{i}]") if starts else None,
                ttft_s=None if failed else check.seconds(lists["ttfts"][i], f"ttfts[{i}]"),
                latency_s=check.seconds(lists["latencies"][i], f"latencies[{i}]"),
                chunk_gaps_s=() if failed else check.gaps(lists["itls"][i], f"itls[{i}]"),
                prompt_tokens=check.count(lists["input_lens"][i], f"input_lens[{i}]"),
                output_tokens=None
                if failed
                else check.count(lists["output_lens"][i], f"output_lens[{i}]"),
                text=check.text(texts[i], f"generated_texts[{i}]", MAX_ANSWER),
                error=error or None,
            )
        )
    rate = doc.get("request_rate", "inf")
    rate = None if rate in ("inf", None) else check.number(rate, "request_rate")
    burstiness = check.number(doc.get("burstiness", 1.0), "burstiness") or 1.0
    concurrency = check.count(doc.get("max_concurrency"), "max_concurrency")
    backend = check.text(doc.get("backend") or doc.get("endpoint_type"), "backend")
    stated = figures({k: v for k, v in doc.items() if k in SUMMARY or STATISTIC.fullmatch(k)})
    run = ImportedRun(
        requests=tuple(requests),
        concurrency=concurrency or None,
        rate=rate if rate and math.isfinite(rate) else None,
        arrival="burst" if not rate else ("poisson" if burstiness == 1.0 else "gamma"),
        burstiness=burstiness,
        endpoint="chat" if backend in CHAT_BACKENDS else "completion",
        name=check.text(doc.get("label"), "label"),
        reported=stated,
    )
    return ImportedResult(
        source=ImportSource(TOOL, None, file_name),
        runs=(run,),
        model=check.text(doc.get("model_id"), "model_id") or None,
        recorded_at=check.moment(doc.get("date"), "date", VLLM_DATE),
    )


# -- export -----------------------------------------------------------------------------------
def _peaks(records: list[RequestRecord]) -> tuple[float, int]:
    """vLLM's ``max_output_tokens_per_s`` (chunks counted in one-second buckets from the
    first send) and ``max_concurrent_requests`` (the most in flight at once), over the
    successful requests."""
    done = [r for r in records if request_metrics(r) is not None]
    if not done:
        return 0.0, 0
    begin = min(r.t_submit_ns or 0 for r in done)
    buckets: dict[int, int] = {}
    for r in done:
        for chunk in r.chunks:
            second = (chunk.t_ns - begin) // NS
            buckets[second] = buckets.get(second, 0) + 1
    # Departures before arrivals at the same instant: half-open intervals, as vLLM counts.
    edges = sorted(
        [(r.t_submit_ns or 0, 1) for r in done] + [(r.t_last_token_ns or 0, -1) for r in done]
    )
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return float(max(buckets.values(), default=0)), peak


def _vllm_date(created_at: Any) -> str:
    """When the session ran, as vLLM dates a result (local time, to the second)."""
    try:
        when = datetime.fromisoformat(str(created_at))
    except ValueError:
        return datetime.now().strftime(VLLM_DATE)
    return (when.astimezone() if when.tzinfo else when).strftime(VLLM_DATE)


def vllm_document(
    session: Session, config: ConfigRow, records: list[RequestRecord]
) -> dict[str, Any]:
    """One run (the measured requests of one repeat) as vLLM's result file."""
    workload = config.workload
    measured = [r for r in records if not r.warmup]
    named = vllm_figures(
        [m for r in measured if (m := request_metrics(r)) is not None], makespan_s(measured)
    )
    origin = session.meta["clock_origin_ns"]
    rows = []
    for r in measured:
        m = request_metrics(r)
        rows.append(
            {
                "input_lens": prompt_tokens(r) or 0,
                "output_lens": m.output_tokens if m else 0,
                "ttfts": m.ttft_s if m else 0.0,
                "itls": m.itl_s if m else [],
                # A failed request's time to its end: vLLM leaves it out of every figure,
                # and the makespan needs it back.
                "latencies": m.e2e_s if m else _seconds(r.t_submit_ns, r.t_done_ns),
                "start_times": ((r.t_submit_ns or 0) - origin) / NS,
                "generated_texts": r.text,
                "errors": "" if r.ok else (r.error or "failed"),
            }
        )
    peak_tokens, peak_requests = _peaks(measured)
    rate = workload.get("rate") if workload.get("arrival") != "burst" else None
    # The model as the requests named it, else the file the workbench gave its server: a
    # re-imported file then names the model, not "default" (read back as an unknown model).
    model = workload.get("model_name") or "default"
    if model == "default" and session.managed:
        model = model_file_name(str(config.server.get("model") or "default"))
    return {
        "date": _vllm_date(session.meta.get("created_at")),
        "endpoint_type": "openai-chat" if workload.get("endpoint") == "chat" else "openai",
        "backend": "openai-chat" if workload.get("endpoint") == "chat" else "openai",
        "label": config.label,
        "model_id": model,
        "tokenizer_id": model,
        "num_prompts": len(measured),
        "request_rate": rate or "inf",
        "burstiness": workload.get("burstiness", 1.0),
        "max_concurrency": workload.get("concurrency") or None,
        "duration": makespan_s(measured) or 0.0,
        "failed": sum(not r.ok for r in measured),
        "request_goodput": None,
        **{k: (0.0 if v is None else v) for k, v in named.items()},
        **{key: [row[key] for row in rows] for key in (rows[0] if rows else {})},
        "max_output_tokens_per_s": peak_tokens,
        "max_concurrent_requests": peak_requests,
        "workbench_session": session.path.name,
    }


def _seconds(start_ns: int | None, end_ns: int | None) -> float:
    return 0.0 if start_ns is None or end_ns is None else (end_ns - start_ns) / NS


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=-]+", "_", text).strip("_") or "config"


def write_vllm_results(session: Session, folder: Path) -> list[Path]:
    """One vLLM result file per configuration (per repeat, where it has several) in
    ``folder``; returns their paths."""
    written = []
    stem = session.path.name.removesuffix(".sqlite").removesuffix(".session")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for config in session.configs:
            records = session.records(config.index)
            repeats = sorted({r.repeat for r in records if not r.warmup})
            for repeat in repeats:
                mine = [r for r in records if r.repeat == repeat and not r.warmup]
                suffix = f"-r{repeat + 1}" if len(repeats) > 1 else ""
                path = folder / f"{stem}-{config.index}-{_slug(config.label)}{suffix}.json"
                document = vllm_document(session, config, mine)
                path.write_text(json.dumps(document, indent=1), encoding="utf-8")
                written.append(path)
    except OSError as exc:
        raise OutputDirError(f"cannot write to {folder}: {exc.strerror or exc}") from None
    return written
