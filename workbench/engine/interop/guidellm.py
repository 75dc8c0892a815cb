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

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from workbench.engine.base.errors import ImportFileError
from workbench.engine.base.records import ImportSource
from workbench.engine.base.validation import validated
from workbench.engine.interop.imported import ImportedRequest, ImportedResult, ImportedRun
from workbench.engine.interop.values import (
    MAX_REQUESTS,
    MAX_SECONDS,
    Answer,
    Clock,
    Count,
    Epoch,
    ErrorText,
    PerRequest,
    Seconds,
    Table,
    Text,
    epoch_date,
    figures,
)

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


class Timings(Table):
    first_token_iteration: Clock | None = None
    last_token_iteration: Clock | None = None


class Info(Table):
    timings: Timings | None = None
    error: ErrorText | None = None


class Request(Table):
    """One request: epoch seconds for its start and end, and its first and last token's."""

    request_start_time: Clock | None = None
    request_end_time: Clock | None = None
    info: Info | None = None
    prompt_tokens: Count | None = None
    output_tokens: Count | None = None
    output: Answer | None = None

    @property
    def timings(self) -> Timings:
        return (self.info.timings if self.info else None) or Timings()

    @property
    def finished(self) -> float | None:
        """When its answer ended: its last token, else (an answer not streamed) its end."""
        last = self.timings.last_token_iteration
        return last if last is not None else self.request_end_time


class Succeeded(Request):
    @model_validator(mode="after")
    def _after_its_start(self) -> Succeeded:
        start = self.request_start_time
        for what, moment in (
            ("first token", self.timings.first_token_iteration),
            ("end", self.finished),
        ):
            if start is not None and moment is not None and not 0 <= moment - start <= MAX_SECONDS:
                raise ValueError(f"has its {what} {moment - start:g} s after its start")
        return self


class Groups(Table):
    successful: Annotated[list[Succeeded], PerRequest] | None = None
    errored: Annotated[list[Request], PerRequest] | None = None
    incomplete: Annotated[list[Request], PerRequest] | None = None

    @model_validator(mode="after")
    def _requests_bounded(self) -> Groups:
        if (held := sum(len(getattr(self, group) or ()) for group in GROUPS)) > MAX_REQUESTS:
            raise ValueError(f"holds {held:,} requests, over the {MAX_REQUESTS:,} a run may")
        return self


class Strategy(Table):
    """The run's load: ``synchronous``, ``concurrent`` (``streams``), ``throughput``, or
    ``constant`` and ``poisson`` at a ``rate``."""

    type_: Literal["synchronous", "concurrent", "throughput", "constant", "poisson"]
    streams: Count | None = None
    max_concurrency: Count | None = None
    rate: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = Field(
        None, validate_default=True
    )

    @field_validator("rate")
    @classmethod
    def _rate_where_it_sets_the_load(cls, rate: float | None, info: ValidationInfo) -> Any:
        if rate is None and info.data.get("type_") in ("constant", "poisson"):
            raise ValueError(f"is missing: a {info.data['type_']} strategy sends at a rate")
        return rate

    def load(self) -> dict[str, Any]:
        """The run's load in ``ImportedRun``'s fields."""
        match self.type_:
            case "synchronous":
                return {"concurrency": 1}
            case "concurrent":
                return {"concurrency": self.streams}
            case "throughput":
                return {"concurrency": self.max_concurrency}
        arrival = "fixed" if self.type_ == "constant" else "poisson"
        return {"concurrency": self.max_concurrency, "rate": self.rate, "arrival": arrival}


class BenchmarkConfig(Table):
    strategy: Strategy


class Benchmark(Table):
    """One load level."""

    config: BenchmarkConfig
    start_time: Epoch | None = None
    requests: Groups | None = None
    metrics: dict[str, Any] | None = None
    duration: Seconds | None = None


class Backend(Table):
    model: Text | None = None
    target: Text | None = None
    request_format: Text | None = None


class Spec(Table):
    backend: Backend | None = None


class Config(Table):
    spec: Spec | None = None


class Metadata(Table):
    guidellm_version: Text | None = None


class BenchmarksFile(Table):
    """What the workbench reads of ``benchmarks.json``."""

    metadata: Metadata
    benchmarks: list[Benchmark]
    config: Config | None = None


def _request(found: Request, group: str) -> ImportedRequest:
    start, end = found.request_start_time, found.request_end_time
    if group != "successful" or start is None or found.finished is None:
        error = (found.info.error if found.info else None) or ""
        if group == "incomplete":
            error = error or "incomplete: still running when the benchmark ended"
        return ImportedRequest(
            start_s=start,
            ttft_s=None,
            latency_s=None if end is None or start is None else max(0.0, end - start),
            prompt_tokens=found.prompt_tokens,
            error=error or f"{group}, with no time for its end",
        )
    # A whole answer (not streamed) has no token times: it ends at its end.
    first = found.timings.first_token_iteration
    return ImportedRequest(
        start_s=start,
        ttft_s=None if first is None else first - start,
        latency_s=found.finished - start,
        prompt_tokens=found.prompt_tokens,
        output_tokens=found.output_tokens,
        text=found.output or "",
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
    found: BenchmarksFile = validated(BenchmarksFile, doc, file_name, ImportFileError)
    backend = (found.config and found.config.spec and found.config.spec.backend) or Backend()
    route = backend.request_format or ""
    endpoint = "completion" if route.endswith("/v1/completions") else "chat"
    runs = []
    for i, benchmark in enumerate(found.benchmarks):
        groups = benchmark.requests or Groups()
        requests = [
            _request(request, group) for group in GROUPS for request in getattr(groups, group) or ()
        ]
        requests.sort(key=lambda r: r.start_s if r.start_s is not None else float("inf"))
        stated = _figures(benchmark.metrics)
        if benchmark.duration is not None:
            stated["duration"] = benchmark.duration
        strategy = benchmark.config.strategy
        runs.append(
            ImportedRun(
                requests=tuple(requests),
                name=f"benchmark {i + 1} ({strategy.type_})",
                reported=stated,
                endpoint=endpoint,
                **strategy.load(),
            )
        )
    started = [b.start_time for b in found.benchmarks if b.start_time is not None]
    version = found.metadata.guidellm_version
    return ImportedResult(
        source=ImportSource(TOOL, version or None, file_name),
        runs=tuple(runs),
        model=backend.model or None,
        base_url=backend.target or None,
        notes=(NO_ITL,),
        recorded_at=epoch_date(min(started)) if started else None,
    )
