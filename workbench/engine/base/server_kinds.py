"""The servers the workbench recognises by their ``/metrics``, and what their names mean.

llama.cpp, vLLM and SGLang each export Prometheus text under names of their own for the same
few facts: requests running, requests waiting, the share of the KV cache in use, and token
counters. This is the one place those names are written down, so that the window's plots, the
cross-checks, the external server's probe and the mock server all read the same facts.

Where each set comes from (read in the servers' own source):

- llama.cpp: ``tools/server`` (the ``llamacpp:`` metrics of the build the workbench ships:
  ``requests_processing``, ``requests_deferred``, ``prompt_tokens_total`` "excluding cached
  tokens", ``prompt_tokens_cached_total`` (the cached part), ``prompt_seconds_total``,
  ``tokens_predicted_total`` and ``tokens_predicted_seconds_total`` (measured in
  ``tests/engine/watch/test_unseen_real.py``: the prompt counters grow by a task's whole
  prompt and the seconds it took when its prompt is done, the others by its whole answer
  and the seconds it took when it ends); with a draft model, ``spec_decode_num_drafts_total``,
  ``spec_decode_num_draft_tokens_total`` and ``spec_decode_num_accepted_tokens_total``,
  measured in ``tests/engine/server/test_speculative_real.py``). Current builds report no KV
  use in ``/metrics`` (the window reads it per slot from ``/slots``); older ones had
  ``llamacpp:kv_cache_usage_ratio`` ("KV-cache usage. 1 means 100 percent usage", its server
  README).
- vLLM: ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``): ``vllm:num_requests_running``,
  ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc`` ("1 means 100 percent usage",
  a fraction despite its name; ``vllm:gpu_cache_usage_perc`` before 0.9), the counters
  ``vllm:prompt_tokens``, ``vllm:generation_tokens``, ``vllm:request_success`` and
  (``vllm/v1/spec_decode/metrics.py``) ``vllm:spec_decode_num_drafts``,
  ``vllm:spec_decode_num_draft_tokens`` and ``vllm:spec_decode_num_accepted_tokens``,
  exposed with ``_total``. Every series carries ``model_name`` and ``engine`` labels, one per
  engine.
- SGLang: ``python/sglang/srt/metrics/collector.py`` (``SchedulerMetricsCollector``,
  ``TokenizerMetricsCollector``), with ``--enable-metrics``: ``sglang:num_running_reqs``,
  ``sglang:num_queue_reqs``, ``sglang:token_usage`` (the share of the KV pool's tokens in use),
  ``sglang:prompt_tokens_total``, ``sglang:generation_tokens_total``,
  ``sglang:num_requests_total``; labelled ``model_name`` (and rank labels). The ``sglang_``
  spellings some dashboards use come from a router or a Prometheus store, not the server.

Their own latency histograms (``latencies``), read apart from the instant values
(``parse_histograms``): vLLM's ``vllm:request_queue_time_seconds``,
``vllm:time_to_first_token_seconds``, ``vllm:inter_token_latency_seconds``
(``vllm:time_per_output_token_seconds`` before it) and ``vllm:e2e_request_latency_seconds``
(``vllm/v1/metrics/loggers.py``); SGLang's ``sglang:queue_time_seconds``,
``sglang:time_to_first_token_seconds``, ``sglang:inter_token_latency_seconds``
(``sglang:time_per_output_token_seconds`` before it) and
``sglang:e2e_request_latency_seconds`` (``collector.py``). llama.cpp exports none.

Series of one name with different labels (several engines or ranks) are one figure: counts
add up, a share of the KV cache is their mean.

The catalogue is in ``base``, not beside the server code: the figures (the cross-checks, the
speculative counters) read it and sit below ``server``, and the sampler in ``measure`` (which
never imports ``server``) parses ``/metrics`` with it, so the lowest layer is the one place
all of them may import.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

# Families that are no one instant's value: a histogram's buckets are most of a vLLM or
# SGLang /metrics (hundreds of series), and would make every stored sample tens of kB.
SKIPPED_TYPES = frozenset({"histogram", "gaugehistogram", "summary"})


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text to ``{name: value}``, a labelled series as ``name{label=value,...}``.
    Gauges and counters only: histograms and summaries are left out, and so is a counter's
    creation time (``_created``)."""
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.type in SKIPPED_TYPES:
            continue
        for sample in family.samples:
            key = sample.name
            if key.endswith("_created"):
                continue
            if sample.labels:
                key += "{" + ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items())) + "}"
            values[key] = float(sample.value)
    return values


Buckets = dict[float, float]
"""A histogram's cumulative counts by upper bound (``le``; ``inf`` for ``+Inf``)."""

MAX_BUCKETS = 256  # a histogram of more is no latency histogram a server writes


def parse_histograms(text: str) -> dict[str, Buckets]:
    """Prometheus text's histograms, each by its family name, its series of other labels
    (several engines or ranks) added up bucket by bucket."""
    found: dict[str, Buckets] = {}
    for family in text_string_to_metric_families(text):
        if family.type != "histogram":
            continue
        buckets = found.setdefault(family.name, {})
        for sample in family.samples:
            if not sample.name.endswith("_bucket") or "le" not in sample.labels:
                continue
            le = float(sample.labels["le"])
            if le in buckets or len(buckets) < MAX_BUCKETS:
                buckets[le] = buckets.get(le, 0.0) + float(sample.value)
    return {name: b for name, b in found.items() if b}


def _series(values: Mapping[str, float], name: str) -> list[float]:
    """Every series of ``name``: the bare one, or each labelled one."""
    if name in values:
        return [values[name]]
    prefix = name + "{"
    return [v for k, v in values.items() if k.startswith(prefix)]


def _first(
    values: Mapping[str, float], names: Iterable[str], combine: Callable[[list[float]], float]
) -> float | None:
    for name in names:
        if found := _series(values, name):
            return combine(found)
    return None


def total(values: Mapping[str, float], names: Iterable[str]) -> float | None:
    """The sum of the first of ``names`` present (a count, or a counter), labelled series
    included; None when none is."""
    return _first(values, names, sum)


def share(values: Mapping[str, float], names: Iterable[str]) -> float | None:
    """The mean of the first of ``names`` present: a share (of a KV cache) is not added up
    across engines."""
    return _first(values, names, statistics.fmean)


@dataclass(frozen=True)
class ServerLoad:
    """What one ``/metrics`` sample says about the server's load; None where it does not."""

    running: float | None
    waiting: float | None
    kv_usage: float | None  # the share of the KV cache in use, 0 to 1


@dataclass(frozen=True)
class ServerKind:
    """A server family and the Prometheus names it gives each fact under (the current name
    first, older ones after)."""

    key: str  # as the mock server's --metrics takes it
    name: str  # as the window and notices say it
    owned_by: str  # what its /v1/models says a model is owned by
    running: tuple[str, ...]
    waiting: tuple[str, ...]
    kv_usage: tuple[str, ...]
    prompt_tokens: tuple[str, ...]
    output_tokens: tuple[str, ...]
    requests: tuple[str, ...]  # a counter of finished requests
    slots: bool  # it has llama.cpp's /slots and /props
    metrics_switch: str  # how its /metrics is turned on, when it is not by default
    # the counter of prompt tokens found in the cache, where ``prompt_tokens`` leaves them out,
    # and of the seconds the prompts and the answers took, each task's own added up
    cached_tokens: tuple[str, ...] = ()
    prompt_seconds: tuple[str, ...] = ()
    output_seconds: tuple[str, ...] = ()
    # speculative decoding's counters (``speculative``): drafts verified, tokens drafted and
    # drafted tokens accepted
    drafts: tuple[str, ...] = ()
    draft_tokens: tuple[str, ...] = ()
    accepted_tokens: tuple[str, ...] = ()
    # its own latency histograms (``parse_histograms``' family names), each fact's current
    # name first: the queue, TTFT, the inter-token latency and E2E
    latencies: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def names(self) -> frozenset[str]:
        return frozenset(
            (
                *self.running,
                *self.waiting,
                *self.kv_usage,
                *self.prompt_tokens,
                *self.output_tokens,
                *self.requests,
                *self.cached_tokens,
                *self.prompt_seconds,
                *self.output_seconds,
            )
        )

    def load(self, values: Mapping[str, float]) -> ServerLoad:
        return ServerLoad(
            total(values, self.running),
            total(values, self.waiting),
            share(values, self.kv_usage),
        )

    def gives(self, values: Mapping[str, float]) -> tuple[str, ...]:
        """Which of the plotted facts its /metrics gives, in words."""
        load = self.load(values)
        return tuple(
            text
            for text, value in (
                ("requests running", load.running),
                ("requests waiting", load.waiting),
                ("KV-cache use", load.kv_usage),
            )
            if value is not None
        )


LLAMACPP = ServerKind(
    key="llamacpp",
    name="llama.cpp",
    owned_by="llamacpp",
    running=("llamacpp:requests_processing",),
    waiting=("llamacpp:requests_deferred",),
    kv_usage=("llamacpp:kv_cache_usage_ratio",),
    prompt_tokens=("llamacpp:prompt_tokens_total",),
    output_tokens=("llamacpp:tokens_predicted_total",),
    requests=(),
    slots=True,
    metrics_switch="--metrics",
    cached_tokens=("llamacpp:prompt_tokens_cached_total",),
    prompt_seconds=("llamacpp:prompt_seconds_total",),
    output_seconds=("llamacpp:tokens_predicted_seconds_total",),
    drafts=("llamacpp:spec_decode_num_drafts_total",),
    draft_tokens=("llamacpp:spec_decode_num_draft_tokens_total",),
    accepted_tokens=("llamacpp:spec_decode_num_accepted_tokens_total",),
)
VLLM = ServerKind(
    key="vllm",
    name="vLLM",
    owned_by="vllm",
    running=("vllm:num_requests_running",),
    waiting=("vllm:num_requests_waiting",),
    kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    prompt_tokens=("vllm:prompt_tokens_total",),
    output_tokens=("vllm:generation_tokens_total",),
    requests=("vllm:request_success_total",),
    slots=False,
    metrics_switch="",
    drafts=("vllm:spec_decode_num_drafts_total",),
    draft_tokens=("vllm:spec_decode_num_draft_tokens_total",),
    accepted_tokens=("vllm:spec_decode_num_accepted_tokens_total",),
    latencies=(
        ("queue", ("vllm:request_queue_time_seconds",)),
        ("ttft", ("vllm:time_to_first_token_seconds",)),
        ("itl", ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")),
        ("e2e", ("vllm:e2e_request_latency_seconds",)),
    ),
)
SGLANG = ServerKind(
    key="sglang",
    name="SGLang",
    owned_by="sglang",
    running=("sglang:num_running_reqs",),
    waiting=("sglang:num_queue_reqs",),
    kv_usage=("sglang:token_usage",),
    prompt_tokens=("sglang:prompt_tokens_total",),
    output_tokens=("sglang:generation_tokens_total",),
    requests=("sglang:num_requests_total",),
    slots=False,
    metrics_switch="--enable-metrics",
    latencies=(
        ("queue", ("sglang:queue_time_seconds",)),
        ("ttft", ("sglang:time_to_first_token_seconds",)),
        ("itl", ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds")),
        ("e2e", ("sglang:e2e_request_latency_seconds",)),
    ),
)
KINDS = (LLAMACPP, VLLM, SGLANG)

# Each counter, whichever server gave it: one server's /metrics has one kind's names.
PROMPT_COUNTERS = tuple(name for kind in KINDS for name in kind.prompt_tokens)
OUTPUT_COUNTERS = tuple(name for kind in KINDS for name in kind.output_tokens)
REQUEST_COUNTERS = tuple(name for kind in KINDS for name in kind.requests)
DRAFT_COUNTERS = tuple(name for kind in KINDS for name in kind.drafts)
DRAFT_TOKEN_COUNTERS = tuple(name for kind in KINDS for name in kind.draft_tokens)
ACCEPTED_TOKEN_COUNTERS = tuple(name for kind in KINDS for name in kind.accepted_tokens)


def detect(values: Mapping[str, float]) -> ServerKind | None:
    """The kind whose names this /metrics sample has, or None."""
    present = {key.partition("{")[0] for key in values}
    return next((kind for kind in KINDS if kind.names & present), None)


def by_owner(owned_by: object) -> ServerKind | None:
    """The kind a /v1/models ``owned_by`` names, for a server whose /metrics is off."""
    return next((kind for kind in KINDS if kind.owned_by == owned_by), None)


def describe(kind: ServerKind | None, gives: tuple[str, ...], slots: bool) -> str:
    """What the window can show of this server, in one line: which kind it is, what its
    /metrics gives, and whether it has /slots."""
    slot_text = (
        "/slots gives busy slots and each slot's context use"
        if slots
        else "no /slots (no slot lanes or per-slot context)"
    )
    if kind is None:
        return (
            "server kind not recognised (llama.cpp, vLLM and SGLang are): /metrics gives "
            f"no requests or KV-cache series the workbench reads; {slot_text}"
        )
    if gives:
        metrics_text = "/metrics gives " + ", ".join(gives)
    else:
        switch = f" (start it with {kind.metrics_switch})" if kind.metrics_switch else ""
        metrics_text = f"no /metrics series the workbench reads{switch}"
    return f"{kind.name} detected: {metrics_text}; {slot_text}"
