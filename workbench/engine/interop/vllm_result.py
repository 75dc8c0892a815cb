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
import re
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, ValidationInfo, field_validator

from workbench.engine.analysis.library import model_file_name
from workbench.engine.base.errors import ImportFileError, OutputDirError
from workbench.engine.base.records import ImportSource, RequestRecord
from workbench.engine.base.validation import MAX_TEXT, validated
from workbench.engine.config.workloads import RequestsWorkload, SentRequests
from workbench.engine.figures.per_request import NS, prompt_tokens, request_metrics
from workbench.engine.figures.per_run import makespan_s
from workbench.engine.figures.vllm_names import COUNTS, THROUGHPUTS, vllm_figures
from workbench.engine.interop.imported import ImportedRequest, ImportedResult, ImportedRun
from workbench.engine.interop.values import (
    MAX_CHUNKS,
    Answer,
    Clock,
    Count,
    ErrorText,
    Gaps,
    Number,
    PerRequest,
    Rate,
    Seconds,
    Table,
    Text,
    figures,
)
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


def _dated(text: str) -> str:
    try:
        return datetime.strptime(text[:MAX_TEXT], VLLM_DATE).isoformat(timespec="seconds")
    except ValueError:
        raise ValueError("must be a date as vLLM writes it (20261130-101500)") from None


def _inf_is_none(rate: Any) -> Any:
    return None if rate == "inf" else rate


class VllmResult(Table):
    """What the workbench reads of a vLLM result file: one list per request field, each as
    long as ``ttfts``, and the run's settings."""

    ttfts: Annotated[list[Seconds | None], PerRequest]
    itls: Annotated[list[Gaps], PerRequest]
    latencies: Annotated[list[Seconds | None], PerRequest]
    input_lens: Annotated[list[Count | None], PerRequest]
    output_lens: Annotated[list[Count | None], PerRequest]
    errors: Annotated[list[ErrorText | None], PerRequest]  # "" (or null): it succeeded
    start_times: Annotated[list[Clock | None], PerRequest] | None = None
    generated_texts: Annotated[list[Answer | None], PerRequest] | None = None
    request_rate: Annotated[Rate | None, BeforeValidator(_inf_is_none)] = None  # "inf": burst
    burstiness: Number | None = None
    max_concurrency: Count | None = None
    backend: Text | None = None
    endpoint_type: Text | None = None
    label: Text | None = None
    model_id: Text | None = None
    date: Annotated[str, AfterValidator(_dated)] | None = None  # local time, no zone

    @field_validator("itls", "latencies", "input_lens", "output_lens", "errors", "start_times")
    @classmethod
    def _one_per_request(cls, found: list[Any] | None, info: ValidationInfo) -> list[Any] | None:
        return _one_each(found, info)

    @field_validator("generated_texts")
    @classmethod
    def _one_text_per_request(cls, found: list[Any] | None, info: ValidationInfo) -> Any:
        return _one_each(found or None, info)  # an empty list: no texts kept

    @field_validator("itls")
    @classmethod
    def _chunks_bounded(cls, itls: list[list[float]]) -> list[list[float]]:
        if (chunks := sum(map(len, itls))) > MAX_CHUNKS:
            raise ValueError(f"holds {chunks:,} chunk times, over the {MAX_CHUNKS:,} a file may")
        return itls


def _one_each(found: list[Any] | None, info: ValidationInfo) -> list[Any] | None:
    requests = len(info.data.get("ttfts", found or []))
    if found is not None and len(found) != requests:
        raise ValueError(f"has {len(found)} entries for {requests} requests")
    return found


def read_vllm(doc: dict[str, Any], file_name: str) -> ImportedResult:
    if not all(key in doc for key in PER_REQUEST):
        missing = ", ".join(k for k in PER_REQUEST if k not in doc)
        raise ImportFileError(
            f"{file_name}: is a vllm bench serve summary without per-request times "
            f"(no {missing}): run it with --save-result --save-detailed"
        )
    found: VllmResult = validated(VllmResult, doc, file_name, ImportFileError)
    starts = found.start_times or [None] * len(found.ttfts)
    texts = found.generated_texts or [None] * len(found.ttfts)
    requests = []
    for i, error in enumerate(found.errors):
        failed = bool(error)
        requests.append(
            ImportedRequest(
                start_s=starts[i],
                ttft_s=None if failed else found.ttfts[i],
                latency_s=found.latencies[i],
                chunk_gaps_s=() if failed else tuple(found.itls[i]),
                prompt_tokens=found.input_lens[i],
                output_tokens=None if failed else found.output_lens[i],
                text=texts[i] or "",
                error=error or None,
            )
        )
    rate = found.request_rate
    burstiness = found.burstiness or 1.0
    backend = found.backend or found.endpoint_type
    stated = figures({k: v for k, v in doc.items() if k in SUMMARY or STATISTIC.fullmatch(k)})
    run = ImportedRun(
        requests=tuple(requests),
        concurrency=found.max_concurrency or None,
        rate=rate or None,
        arrival="burst" if not rate else ("poisson" if burstiness == 1.0 else "gamma"),
        burstiness=burstiness,
        endpoint="chat" if backend in CHAT_BACKENDS else "completion",
        name=found.label or "",
        reported=stated,
    )
    return ImportedResult(
        source=ImportSource(TOOL, None, file_name),
        runs=(run,),
        model=found.model_id or None,
        recorded_at=found.date,
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
    workload = config.run_config.workload
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
    paced = isinstance(workload, RequestsWorkload) and workload.arrival != "burst"
    # The model as the requests named it, else the file the workbench gave its server: a
    # re-imported file then names the model, not "default" (read back as an unknown model).
    model = workload.model_name or "default"
    if model == "default" and session.managed:
        model = model_file_name(config.run_config.server.model or "default")
    chat = workload.endpoint == "chat"
    return {
        "date": _vllm_date(session.meta.get("created_at")),
        "endpoint_type": "openai-chat" if chat else "openai",
        "backend": "openai-chat" if chat else "openai",
        "label": config.label,
        "model_id": model,
        "tokenizer_id": model,
        "num_prompts": len(measured),
        "request_rate": (workload.rate if paced else None) or "inf",
        "burstiness": workload.burstiness if isinstance(workload, RequestsWorkload) else 1.0,
        "max_concurrency": (
            workload.concurrency or None if isinstance(workload, SentRequests) else None
        ),
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
