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
from workbench.engine.interop.checked import Fields
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
    if not isinstance(record, dict) or not isinstance(record.get("metadata"), dict):
        raise check.error(where, "has no metadata")
    meta = record["metadata"]
    if meta.get("benchmark_phase", "profiling") != "profiling":
        return None
    metrics = record.get("metrics") if isinstance(record.get("metrics"), dict) else {}
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
        if not isinstance(error, dict):
            raise check.error(f"{where}.error", "should be an object")
        text = " ".join(
            check.text(error.get(k) if k != "code" else str(error.get(k) or ""), f"{where}.error")
            for k in ("code", "type", "message")
        ).strip()
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
        except ValueError as exc:
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
    figures = {}
    for name, found in summary.items():
        if not isinstance(found, dict) or not isinstance(found.get("unit"), str):
            continue
        for stat in STATISTICS:
            value = found.get(stat)
            if isinstance(value, int | float) and not isinstance(value, bool):
                figures[f"{name}.{stat} [{found['unit']}]"] = float(value)
    return figures


def _load(check: Fields, summary: dict[str, Any]) -> dict[str, Any]:
    config = summary.get("input_config") if isinstance(summary.get("input_config"), dict) else {}
    phases = config.get("phases") if isinstance(config.get("phases"), list) else []
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
    config = summary.get("input_config") if isinstance(summary.get("input_config"), dict) else {}
    models = config.get("models", {}).get("items") if isinstance(config.get("models"), dict) else []
    model = models[0].get("name") if models and isinstance(models[0], dict) else None
    endpoint = config.get("endpoint") if isinstance(config.get("endpoint"), dict) else {}
    urls = endpoint.get("urls") if isinstance(endpoint.get("urls"), list) else []
    run = ImportedRun(
        requests=tuple(sorted(requests, key=lambda r: r.start_s or 0.0)),
        endpoint="completion" if endpoint.get("type") == "completions" else "chat",
        reported=_figures(summary),
        **_load(check, summary),
    )
    version = summary.get("aiperf_version")
    return ImportedResult(
        source=ImportSource(TOOL, version if isinstance(version, str) else None, path.name),
        runs=(run,),
        model=model if isinstance(model, str) else None,
        base_url=urls[0] if urls and isinstance(urls[0], str) else None,
        notes=tuple(notes),
    )
