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

import json
from pathlib import Path
from typing import Any

from workbench.engine.base.errors import ImportFileError
from workbench.engine.base.records import ImportSource
from workbench.engine.interop.checked import MAX_ERROR, Fields, figures
from workbench.engine.interop.files import bounded_lines, read_json
from workbench.engine.interop.imported import ImportedRequest, ImportedResult, ImportedRun

TOOL = "AIPerf"
RECORDS = "profile_export.jsonl"
SUMMARY = "profile_export_aiperf.json"
STATISTICS = ("avg", "p50", "p90", "p99")
MS = 1000.0


def looks_like_aiperf_summary(doc: Any) -> bool:
    return isinstance(doc, dict) and "aiperf_version" in doc


def _metric(check: Fields, metrics: dict[str, Any], name: str, unit: str, where: str) -> Any:
    """``metrics[name]["value"]``, its unit checked (None when the record lacks it)."""
    found = metrics.get(name)
    if found is None:
        return None
    if not isinstance(found, dict) or found.get("unit") != unit:
        raise check.error(f"{where}.metrics.{name}", f"should be a value in {unit}")
    return found.get("value")


def _request(check: Fields, record: Any, where: str) -> ImportedRequest | None:
    """One line's request; None for a record outside the measured phase."""
    record = check.mapping(record, where)
    meta = check.mapping(record.get("metadata"), f"{where}.metadata")
    if meta.get("benchmark_phase", "profiling") != "profiling":
        return None
    metrics = check.mapping(record.get("metrics"), f"{where}.metrics")
    at = f"{where}.metadata.request_start_ns"
    start_ns = check.number(meta.get("request_start_ns"), at)
    start = None if start_ns is None else check.clock(start_ns / 1e9, f"{at} / 1e9")

    def count(*names: str) -> int | None:
        for name in names:
            value = check.count(_metric(check, metrics, name, "tokens", where), f"{where}.{name}")
            if value is not None:
                return value
        return None

    prompt = count("usage_prompt_tokens", "input_sequence_length")
    error = record.get("error")
    if error is not None:
        error = check.mapping(error, f"{where}.error")
        parts = (str(error.get("code") or ""), error.get("type"), error.get("message"))
        text = " ".join(check.text(part, f"{where}.error", MAX_ERROR) for part in parts).strip()
        return ImportedRequest(
            start_s=start, ttft_s=None, latency_s=None, prompt_tokens=prompt, error=text or "failed"
        )
    ttft = check.seconds(_metric(check, metrics, "time_to_first_token", "ms", where), where)
    latency = check.seconds(_metric(check, metrics, "request_latency", "ms", where), where)
    gaps = _metric(check, metrics, "inter_chunk_latency", "ms", where)
    return ImportedRequest(
        start_s=start,
        ttft_s=None if ttft is None else ttft / MS,
        latency_s=None if latency is None else latency / MS,
        chunk_gaps_s=tuple(g / MS for g in check.gaps(gaps or [], f"{where}.inter_chunk_latency")),
        prompt_tokens=prompt,
        output_tokens=count("usage_completion_tokens", "output_sequence_length"),
    )


def _records(path: Path, check: Fields) -> list[ImportedRequest]:
    found = []
    for n, line in enumerate(bounded_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise check.error(f"line {n}", f"is not JSON ({exc})") from None
        request = _request(check, record, f"line {n}")
        if request is not None:
            found.append(request)
        check.requests(len(found), RECORDS)
    return found


def _summary(path: Path) -> dict[str, Any] | None:
    summary = read_json(path) if path.is_file() else None
    if summary is not None and not looks_like_aiperf_summary(summary):
        raise ImportFileError(f"{path.name}: not AIPerf's summary (no aiperf_version)")
    return summary


def _figures(summary: dict[str, Any]) -> dict[str, float]:
    """Each figure's average and percentiles, under AIPerf's names with its unit:
    ``time_to_first_token.p50 [ms]``."""
    stated: dict[str, Any] = {}
    for name, found in summary.items():
        if isinstance(found, dict) and isinstance(found.get("unit"), str):
            unit = found["unit"][:20]
            stated |= {f"{name}.{stat} [{unit}]": found.get(stat) for stat in STATISTICS}
    return figures(stated)


def _load(check: Fields, summary: dict[str, Any]) -> dict[str, Any]:
    config = check.mapping(summary.get("input_config"), "input_config")
    phases = check.listed(config.get("phases") or [], "input_config.phases")
    phase = next((p for p in phases if isinstance(p, dict) and p.get("kind") == "profiling"), {})
    concurrency = check.count(phase.get("concurrency"), "input_config.phases[].concurrency")
    rate = check.number(phase.get("request_rate"), "input_config.phases[].request_rate")
    if rate:
        return {"concurrency": concurrency, "rate": rate, "arrival": "poisson"}
    return {"concurrency": concurrency}


def read_aiperf(path: Path) -> ImportedResult:
    """The run in ``path``'s folder: ``path`` is either of AIPerf's two files."""
    records_path = path if path.suffix == ".jsonl" else path.with_name(RECORDS)
    summary_path = path if path.suffix == ".json" else path.with_name(SUMMARY)
    check = Fields(records_path.name)
    if not records_path.is_file():
        raise ImportFileError(
            f"{path.name}: AIPerf's summary alone has no per-request times; keep {RECORDS} "
            "beside it"
        )
    requests = _records(records_path, check)
    summary = _summary(summary_path)
    notes = [] if summary else [f"no {SUMMARY} beside it: its load and version are not known"]
    summary = summary or {}
    config = check.mapping(summary.get("input_config"), "input_config")
    models = check.mapping(config.get("models"), "input_config.models").get("items")
    first = check.listed(models or [{}], "input_config.models.items")[0]
    model = check.text(check.mapping(first, "input_config.models.items[0]").get("name"), "model")
    endpoint = check.mapping(config.get("endpoint"), "input_config.endpoint")
    urls = check.listed(endpoint.get("urls") or [""], "input_config.endpoint.urls")
    url = check.text(urls[0], "input_config.endpoint.urls[0]")
    run = ImportedRun(
        requests=tuple(sorted(requests, key=lambda r: r.start_s or 0.0)),
        endpoint="completion" if endpoint.get("type") == "completions" else "chat",
        reported=_figures(summary),
        **_load(check, summary),
    )
    version = check.text(summary.get("aiperf_version"), "aiperf_version")
    return ImportedResult(
        source=ImportSource(TOOL, version or None, path.name),
        runs=(run,),
        model=model or None,
        base_url=url or None,
        notes=tuple(notes),
        recorded_at=check.moment(summary.get("start_time"), "start_time"),
    )
