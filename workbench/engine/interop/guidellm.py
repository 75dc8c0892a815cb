"""GuideLLM's ``benchmarks.json`` (``guidellm run --output kind=json``), as written by
GuideLLM 0.8 (``metadata.version`` 2; tests/data/imports/guidellm was written by 0.8.1).

Each of ``benchmarks[]`` is one load level (``config.strategy``: ``synchronous``,
``concurrent`` with its ``streams``, ``throughput``, ``constant`` or ``poisson`` at a ``rate``)
with its requests in ``requests.successful``, ``errored`` and ``incomplete``. A request keeps
epoch seconds: ``request_start_time``, ``info.timings.first_token_iteration`` and
``last_token_iteration``, ``request_end_time``; its token counts (``prompt_tokens``,
``output_tokens``, from the server's usage), its text (``output``) and, when it failed,
``info.error``. It keeps no time per token: ITL cannot be derived, only its per-request mean
is in the file (among the file's own figures). A benchmark's summary, ``metrics.<name>``, has
a distribution per request group; the successful requests' are kept.
"""

from __future__ import annotations

from typing import Any

from workbench.engine.base.records import ImportSource
from workbench.engine.interop.checked import MAX_ANSWER, MAX_ERROR, Fields, figures
from workbench.engine.interop.imported import ImportedRequest, ImportedResult, ImportedRun

TOOL = "GuideLLM"
GROUPS = ("successful", "errored", "incomplete")
STATISTICS = ("mean", "median", "p90", "p99")
NO_ITL = (
    "GuideLLM keeps no time per token, only the first and the last: ITL cannot be derived "
    "(its per-request mean is among the file's own figures); TPOT and E2E can"
)


def looks_like_guidellm(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("benchmarks"), list)
        and isinstance(doc.get("metadata"), dict)
        and "guidellm_version" in doc["metadata"]
    )


def _load(check: Fields, strategy: Any, where: str) -> dict[str, Any]:
    """The run's load in ``ImportedRun``'s fields, from GuideLLM's strategy."""
    strategy = check.mapping(strategy, where)
    kind = strategy.get("type_")
    limit = check.count(strategy.get("max_concurrency"), f"{where}.max_concurrency")
    match kind:
        case "synchronous":
            return {"concurrency": 1}
        case "concurrent":
            return {"concurrency": check.count(strategy.get("streams"), f"{where}.streams")}
        case "throughput":
            return {"concurrency": limit}
        case "constant" | "poisson":
            rate = check.number(strategy.get("rate"), f"{where}.rate", optional=False)
            if not rate or rate <= 0:
                raise check.error(f"{where}.rate", f"is {rate}, not a rate")
            arrival = "fixed" if kind == "constant" else "poisson"
            return {"concurrency": limit, "rate": rate, "arrival": arrival}
    raise check.error(f"{where}.type_", f"is {str(kind)[:40]!r}, a strategy not known here")


def _request(check: Fields, found: Any, where: str, group: str) -> ImportedRequest:
    found = check.mapping(found, where)
    info = check.mapping(found.get("info"), f"{where}.info")
    timings = check.mapping(info.get("timings"), f"{where}.info.timings")
    start = check.clock(found.get("request_start_time"), f"{where}.request_start_time")
    end = check.clock(found.get("request_end_time"), f"{where}.request_end_time")
    first = check.clock(timings.get("first_token_iteration"), f"{where}...first_token_iteration")
    last = check.clock(timings.get("last_token_iteration"), f"{where}...last_token_iteration")
    prompt = check.count(found.get("prompt_tokens"), f"{where}.prompt_tokens")

    def since_start(moment: float | None, what: str) -> float | None:
        if moment is None or start is None:
            return None
        return check.seconds(moment - start, f"{where}: its {what}, after its start,")

    if group != "successful" or start is None or (last is None and end is None):
        error = check.text(info.get("error"), f"{where}.info.error", MAX_ERROR)
        if group == "incomplete":
            error = error or "incomplete: still running when the benchmark ended"
        return ImportedRequest(
            start_s=start,
            ttft_s=None,
            latency_s=None if end is None or start is None else max(0.0, end - start),
            prompt_tokens=prompt,
            error=error or f"{group}, with no time for its end",
        )
    # A whole answer (not streamed) has no token times: it ends at its end.
    return ImportedRequest(
        start_s=start,
        ttft_s=since_start(first, "first token"),
        latency_s=since_start(last if last is not None else end, "last token"),
        prompt_tokens=prompt,
        output_tokens=check.count(found.get("output_tokens"), f"{where}.output_tokens"),
        text=check.text(found.get("output"), f"{where}.output", MAX_ANSWER),
    )


def _figures(metrics: Any) -> dict[str, float]:
    """The successful requests' mean, median, p90 and p99 of each distribution, under
    GuideLLM's names (``time_to_first_token_ms.median``; a name without a unit is in s or
    per s, as GuideLLM has it)."""
    stated: dict[str, Any] = {}
    for name, groups in (metrics if isinstance(metrics, dict) else {}).items():
        found = groups.get("successful") if isinstance(groups, dict) else None
        if not isinstance(found, dict) or not found.get("count"):
            continue
        percentiles = found.get("percentiles") if isinstance(found.get("percentiles"), dict) else {}
        values = {"mean": found.get("mean"), "median": found.get("median")}
        values |= {p: percentiles.get(p) for p in ("p90", "p99")}
        stated |= {f"{name}.{stat}": values.get(stat) for stat in STATISTICS}
    return figures(stated)


def read_guidellm(doc: dict[str, Any], file_name: str) -> ImportedResult:
    check = Fields(file_name)
    spec = check.mapping(check.mapping(doc.get("config"), "config").get("spec"), "config.spec")
    backend = check.mapping(spec.get("backend"), "config.spec.backend")
    route = check.text(backend.get("request_format"), "config.spec.backend.request_format")
    endpoint = "completion" if route.endswith("/v1/completions") else "chat"
    runs = []
    started = []
    for i, benchmark in enumerate(check.listed(doc["benchmarks"], "benchmarks")):
        where = f"benchmarks[{i}]"
        benchmark = check.mapping(benchmark, where)
        if (moment := check.moment(benchmark.get("start_time"), f"{where}.start_time")) is not None:
            started.append(moment)
        groups = check.mapping(benchmark.get("requests"), f"{where}.requests")
        config = check.mapping(benchmark.get("config"), f"{where}.config")
        strategy = config.get("strategy")
        load = _load(check, strategy, f"{where}.config.strategy")
        found = [
            _request(check, request, f"{where}.requests.{group}[{k}]", group)
            for group in GROUPS
            for k, request in enumerate(
                check.listed(groups.get(group) or [], f"{where}.requests.{group}")
            )
        ]
        check.requests(len(found), f"{where}.requests")
        found.sort(key=lambda r: r.start_s if r.start_s is not None else float("inf"))
        kind = strategy.get("type_") if isinstance(strategy, dict) else "?"
        stated = _figures(benchmark.get("metrics"))
        duration = check.seconds(benchmark.get("duration"), f"{where}.duration")
        if duration is not None:
            stated["duration"] = duration
        runs.append(
            ImportedRun(
                requests=tuple(found),
                name=f"benchmark {i + 1} ({kind})",
                reported=stated,
                endpoint=endpoint,
                **load,
            )
        )
    version = check.text(doc["metadata"].get("guidellm_version"), "metadata.guidellm_version")
    return ImportedResult(
        source=ImportSource(TOOL, version or None, file_name),
        runs=tuple(runs),
        model=check.text(backend.get("model"), "config.spec.backend.model") or None,
        base_url=check.text(backend.get("target"), "config.spec.backend.target") or None,
        notes=(NO_ITL,),
        recorded_at=min(started, default=None),
    )
