"""NVIDIA AIPerf's per-request export, ``profile_export.jsonl``, with its summary
``profile_export_aiperf.json`` beside it (AIPerf 0.13, summary schema 1.4; the files in
tests/data/imports/aiperf were written by 0.13.0). Either file may be given: the other is
looked for in the same folder, under its own name.

Each line of the JSONL is one request: ``metadata.request_start_ns`` and ``request_end_ns``
(epoch nanoseconds), ``metadata.benchmark_phase`` (only ``profiling`` is measured; warm-up
records are left out), and ``metrics.<name> = {value, unit}``: ``time_to_first_token`` and
``request_latency`` in ms, ``inter_chunk_latency`` a list of gaps in ms (TTFT plus their sum
is the latency), and the server's token counts ``usage_prompt_tokens`` and
``usage_completion_tokens`` (AIPerf's own tokenizer counts, ``input_sequence_length`` and
``output_sequence_length``, are the fallback). A failed request has a top-level ``error``
(``code``, ``type``, ``message``) and no timing metrics. The summary holds the version
(``aiperf_version``), the model (``input_config.models.items[0].name``), the load
(``input_config.phases[0]``: ``concurrency`` or ``request_rate``) and each figure as
``{unit, avg, p50, p99, ...}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from workbench.engine.base.errors import ImportFileError
from workbench.engine.base.records import ImportSource
from workbench.engine.base.validation import validated
from workbench.engine.interop.files import bounded_lines, json_line, read_json
from workbench.engine.interop.imported import ImportedRequest, ImportedResult, ImportedRun
from workbench.engine.interop.values import (
    MAX_CHUNKS,
    MAX_CLOCK_S,
    MAX_ERROR,
    MAX_REQUESTS,
    Count,
    ErrorText,
    IsoDate,
    Milliseconds,
    Rate,
    Table,
    Text,
    figures,
)

TOOL = "AIPerf"
RECORDS = "profile_export.jsonl"
SUMMARY = "profile_export_aiperf.json"
STATISTICS = ("avg", "p50", "p90", "p99")
MS = 1000.0
NS = 10**9


def looks_like_aiperf_summary(doc: Any) -> bool:
    return isinstance(doc, dict) and "aiperf_version" in doc


class InMs(Table):
    value: Milliseconds | None = None
    unit: Literal["ms"]


class GapsInMs(Table):
    value: Annotated[list[Milliseconds], Field(max_length=MAX_CHUNKS)] | None = None
    unit: Literal["ms"]


class InTokens(Table):
    value: Count | None = None
    unit: Literal["tokens"]


class Metrics(Table):
    """The metrics a request's record keeps that the workbench reads: each ``{value, unit}``,
    its unit the one AIPerf writes."""

    time_to_first_token: InMs | None = None
    request_latency: InMs | None = None
    inter_chunk_latency: GapsInMs | None = None
    usage_prompt_tokens: InTokens | None = None
    input_sequence_length: InTokens | None = None  # AIPerf's own count: the fallback
    usage_completion_tokens: InTokens | None = None
    output_sequence_length: InTokens | None = None


EpochNs = Annotated[float, Field(ge=-MAX_CLOCK_S * NS, le=MAX_CLOCK_S * NS, allow_inf_nan=False)]


class RecordMetadata(Table):
    benchmark_phase: Text | None = "profiling"
    request_start_ns: EpochNs | None = None


class Failure(Table):
    code: int | None = None
    type: ErrorText | None = None
    message: ErrorText | None = None


class Record(Table):
    """One line of ``profile_export.jsonl``: one request."""

    metadata: RecordMetadata | None = None
    metrics: Metrics | None = None
    error: Failure | None = None


def _ms(found: InMs | None) -> float | None:
    return None if found is None or found.value is None else found.value / MS


def _tokens(*found: InTokens | None) -> int | None:
    return next((f.value for f in found if f is not None and f.value is not None), None)


def _request(record: Record) -> ImportedRequest | None:
    """One line's request; None for a record outside the measured phase."""
    meta = record.metadata or RecordMetadata()
    if meta.benchmark_phase != "profiling":
        return None
    metrics = record.metrics or Metrics()
    start = None if meta.request_start_ns is None else meta.request_start_ns / NS
    prompt = _tokens(metrics.usage_prompt_tokens, metrics.input_sequence_length)
    if (error := record.error) is not None:
        parts = (str(error.code or "")[:MAX_ERROR], error.type or "", error.message or "")
        return ImportedRequest(
            start_s=start,
            ttft_s=None,
            latency_s=None,
            prompt_tokens=prompt,
            error=" ".join(parts).strip() or "failed",
        )
    gaps = metrics.inter_chunk_latency
    return ImportedRequest(
        start_s=start,
        ttft_s=_ms(metrics.time_to_first_token),
        latency_s=_ms(metrics.request_latency),
        chunk_gaps_s=tuple(g / MS for g in gaps.value or ()) if gaps else (),
        prompt_tokens=prompt,
        output_tokens=_tokens(metrics.usage_completion_tokens, metrics.output_sequence_length),
    )


def _records(path: Path) -> list[ImportedRequest]:
    """Every measured request of the records file, each line validated; the file's requests
    and chunk times bounded."""
    found: list[ImportedRequest] = []
    chunks = 0
    for number, line in enumerate(bounded_lines(path), start=1):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        record = validated(Record, json_line(line, where), where, ImportFileError)
        request = _request(record)
        if request is None:
            continue
        found.append(request)
        chunks += len(request.chunk_gaps_s)
        if len(found) > MAX_REQUESTS:
            raise ImportFileError(f"{where}: over the {MAX_REQUESTS:,} requests a run may hold")
        if chunks > MAX_CHUNKS:
            raise ImportFileError(f"{where}: over the {MAX_CHUNKS:,} chunk times a file may hold")
    return found


class ModelItem(Table):
    name: Text | None = None


class Models(Table):
    items: list[ModelItem] | None = None


class Endpoint(Table):
    urls: list[Text | None] | None = None
    type: Text | None = None


class Phase(Table):
    kind: Text | None = None
    concurrency: Count | None = None
    request_rate: Rate | None = None


class InputConfig(Table):
    models: Models | None = None
    endpoint: Endpoint | None = None
    phases: list[Phase] | None = None


class Summary(Table):
    """What the workbench reads of ``profile_export_aiperf.json`` (its figures aside)."""

    aiperf_version: Text | None = None
    input_config: InputConfig | None = None
    start_time: IsoDate | None = None


def _summary(path: Path) -> tuple[Summary, dict[str, float]] | None:
    """The summary beside the records, and the figures it states; None without one."""
    document = read_json(path) if path.is_file() else None
    if document is None:
        return None
    if not looks_like_aiperf_summary(document):
        raise ImportFileError(f"{path.name}: not AIPerf's summary (no aiperf_version)")
    return validated(Summary, document, path.name, ImportFileError), _figures(document)


def _figures(summary: dict[str, Any]) -> dict[str, float]:
    """Each figure's average and percentiles, under AIPerf's names with its unit:
    ``time_to_first_token.p50 [ms]``."""
    stated: dict[str, Any] = {}
    for name, found in summary.items():
        if isinstance(found, dict) and isinstance(found.get("unit"), str):
            unit = found["unit"][:20]
            stated |= {f"{name}.{stat} [{unit}]": found.get(stat) for stat in STATISTICS}
    return figures(stated)


def _load(config: InputConfig) -> dict[str, Any]:
    phase = next((p for p in config.phases or () if p.kind == "profiling"), Phase())
    if phase.request_rate:
        return {"concurrency": phase.concurrency, "rate": phase.request_rate, "arrival": "poisson"}
    return {"concurrency": phase.concurrency}


def read_aiperf(path: Path) -> ImportedResult:
    """The run in ``path``'s folder: ``path`` is either of AIPerf's two files."""
    records_path = path if path.suffix == ".jsonl" else path.with_name(RECORDS)
    summary_path = path if path.suffix == ".json" else path.with_name(SUMMARY)
    if not records_path.is_file():
        raise ImportFileError(
            f"{path.name}: AIPerf's summary alone has no per-request times; keep {RECORDS} "
            "beside it"
        )
    requests = _records(records_path)
    beside = _summary(summary_path)
    notes = [] if beside else [f"no {SUMMARY} beside it: its load and version are not known"]
    summary, stated = beside or (Summary(), {})
    config = summary.input_config or InputConfig()
    items = (config.models.items if config.models else None) or [ModelItem()]
    endpoint = config.endpoint or Endpoint()
    run = ImportedRun(
        requests=tuple(sorted(requests, key=lambda r: r.start_s or 0.0)),
        endpoint="completion" if endpoint.type == "completions" else "chat",
        reported=stated,
        **_load(config),
    )
    return ImportedResult(
        source=ImportSource(TOOL, summary.aiperf_version or None, path.name),
        runs=(run,),
        model=items[0].name or None,
        base_url=(endpoint.urls or [None])[0] or None,
        notes=tuple(notes),
        recorded_at=summary.start_time,
    )
