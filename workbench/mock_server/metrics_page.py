"""The mock's ``/metrics`` page, as llama.cpp, vLLM or SGLang writes it.

The names come from the server-kind catalogue (``engine/base/server_kinds.py``), the one
place they are written down; what is kept here is how each server writes its page: the HELP
text of each fact, the labels on every series, how a number is written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from workbench.engine.base.server_kinds import LLAMACPP, SGLANG, VLLM, ServerKind

MODEL = "mock"
BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 40.0)
"""The mock's latency histograms' upper bounds (seconds), ``+Inf`` after them."""


@dataclass
class Histogram:
    """One latency histogram as a server keeps it: counts by bucket, their sum."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    total: float = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[next((k for k, le in enumerate(BUCKETS) if seconds <= le), len(BUCKETS))] += 1
        self.total += seconds


@dataclass
class Counters:
    """What /metrics reports, so the plots and the cross-checks against server counts can be
    tested: streams in flight (``processing``: those holding a slot, and without
    ``--queue`` those beyond the slots too), requests waiting for a slot (only with
    ``--queue``), the tokens the streams hold in the KV cache (prompt and output so far),
    token counters, finished requests by finish reason, and (for vLLM and SGLang) the
    latency histograms of the finished: the wait in the queue (0 for a request that found a
    slot free), TTFT, the inter-token latency and E2E."""

    prompt_tokens: int = 0
    tokens_predicted: int = 0
    cached_tokens: int = 0  # none: the mock keeps no cache
    prompt_seconds: float = 0.0  # the finished requests' prompts and answers took, as
    output_seconds: float = 0.0  # llama.cpp counts them when a task ends
    processing: int = 0
    waiting: int = 0
    held_tokens: int = 0
    finished: Counter[str] = field(default_factory=Counter)
    latencies: dict[str, Histogram] = field(
        default_factory=lambda: {fact: Histogram() for fact in ("queue", "ttft", "itl", "e2e")}
    )


def _go_float(value: float) -> str:
    """A number as prometheus_client (vLLM's and SGLang's exporter) writes it: ``2.0``."""
    return repr(float(value))


@dataclass(frozen=True)
class Exposition:
    """How one kind of server writes its /metrics: the HELP text of each fact (keyed by the
    ``ServerKind`` field that names it), the labels on every series (in its order), how it
    writes a number, whether it reports KV-cache use, the finish reasons its request counter
    is split by (each series there from the start), and whether a counter shows a series only
    once it has counted (a labelled prometheus_client counter never incremented has none)."""

    kind: ServerKind
    help: dict[str, str]
    labels: tuple[tuple[str, str], ...]
    number: Callable[[float], str]
    kv_usage: bool
    finish_reasons: tuple[str, ...] = ()
    counted_only: bool = False

    def page(self, counters: Counters, kv_pool_tokens: int) -> str:
        """/metrics as this server writes it: the streams running, the requests waiting for
        a slot, and the KV cache (``kv_pool_tokens`` in all) holding each running stream's
        prompt and output so far."""
        c = counters
        rows: list[tuple[str, str, list[tuple[dict[str, str], float]]]] = [
            ("running", "gauge", [({}, c.processing)]),
            ("waiting", "gauge", [({}, c.waiting)]),
        ]
        if self.kv_usage:
            rows.append(("kv_usage", "gauge", [({}, min(1.0, c.held_tokens / kv_pool_tokens))]))
        rows += [
            ("prompt_tokens", "counter", [({}, c.prompt_tokens)]),
            ("output_tokens", "counter", [({}, c.tokens_predicted)]),
        ]
        rows += [
            (fact, "counter", [({}, getattr(c, fact))])
            for fact in ("cached_tokens", "prompt_seconds", "output_seconds")
            if getattr(self.kind, fact)  # the servers that count it
        ]
        if self.kind.requests and self.finish_reasons:
            split = [({"finished_reason": r}, c.finished[r]) for r in self.finish_reasons]
            rows.append(("requests", "counter", split))
        elif self.kind.requests:
            rows.append(("requests", "counter", [({}, c.finished.total())]))
        lines = []
        for fact, type_, series in rows:
            name = getattr(self.kind, fact)[0]  # the current name: older ones come after
            lines += [f"# HELP {name} {self.help[fact]}", f"# TYPE {name} {type_}"]
            for extra, value in series:
                if self.counted_only and type_ == "counter" and not value:
                    continue
                pairs = ",".join(f'{k}="{v}"' for k, v in (*self.labels, *extra.items()))
                labels = f"{{{pairs}}}" if pairs else ""
                lines.append(f"{name}{labels} {self.number(value)}")
        for fact, names in self.kind.latencies:
            lines += self._histogram(names[0], c.latencies[fact])
        return "\n".join(lines) + "\n"

    def _histogram(self, name: str, h: Histogram) -> list[str]:
        """A histogram family as prometheus_client writes it: cumulative buckets, count, sum."""
        lines = [
            f"# HELP {name} Histogram of {name.partition(':')[2]}.",
            f"# TYPE {name} histogram",
        ]
        labels = ",".join(f'{k}="{v}"' for k, v in self.labels)
        cumulative = 0
        for le, count in zip((*BUCKETS, "+Inf"), h.counts, strict=True):
            cumulative += count
            bound = le if isinstance(le, str) else repr(float(le))
            lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {self.number(cumulative)}')
        lines.append(f"{name}_count{{{labels}}} {self.number(cumulative)}")
        lines.append(f"{name}_sum{{{labels}}} {self.number(h.total)}")
        return lines


# Recorded from the servers' own source (see ``server_kinds`` for the files): llama.cpp's
# ``# HELP llamacpp:<name> <help>`` / ``# TYPE`` / bare ``llamacpp:<name> <value>`` lines
# (a C++ stream's number); vLLM's and SGLang's prometheus_client exposition, vLLM labelled
# model_name and engine (its request counter also finished_reason), SGLang model_name (as its
# production-metrics documentation shows it).
EXPOSITIONS = {
    LLAMACPP.key: Exposition(
        LLAMACPP,
        {
            "running": "Number of requests processing",
            "waiting": "Number of requests deferred",
            "prompt_tokens": "Number of prompt tokens processed, excluding cached tokens",
            "output_tokens": "Number of generation tokens processed",
            "cached_tokens": "Number of prompt tokens reused from the cache",
            "prompt_seconds": "Total time spent processing prompts",
            "output_seconds": "Total time spent generating tokens",
        },
        (),
        lambda value: f"{value:g}",
        kv_usage=False,  # current builds report none (the window reads /slots instead)
    ),
    VLLM.key: Exposition(
        VLLM,
        {
            "running": "Number of requests in model execution batches.",
            "waiting": "Number of requests waiting to be processed.",
            "kv_usage": "KV-cache usage. 1 means 100 percent usage.",
            "prompt_tokens": "Number of prefill tokens processed.",
            "output_tokens": "Number of generation tokens processed.",
            "requests": "Count of successfully processed requests.",
        },
        (("model_name", MODEL), ("engine", "0")),
        _go_float,
        kv_usage=True,
        # vllm/v1/engine/__init__.py's FINISH_REASON_STRINGS, a child of each made at start.
        finish_reasons=("stop", "length", "abort", "error", "repetition"),
    ),
    SGLANG.key: Exposition(
        SGLANG,
        {
            "running": "The number of running requests.",
            "waiting": "The number of requests in the waiting queue.",
            "kv_usage": "The token usage.",
            "prompt_tokens": "Number of prefill tokens processed.",
            "output_tokens": "Number of generation tokens processed.",
            "requests": "Number of requests processed.",
        },
        (("model_name", MODEL),),
        _go_float,
        kv_usage=True,
        counted_only=True,
    ),
}
