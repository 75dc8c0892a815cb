"""Derived numbers, exactly as the README's Metrics section defines them (vLLM bench serve's terms).

Per request: TTFT, E2E, TPOT, decode speed, ITL gaps, queue wait and prefill. Per run (one
repeat of one configuration): makespan, aggregate throughput and percentiles. Per
configuration: the mean and spread of each run figure across repeats.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from workbench.engine.base.records import RequestRecord, StartupFacts
from workbench.engine.base.words import plural
from workbench.engine.config.experiment import ServerSettings, WorkloadSettings
from workbench.engine.config.settings import from_stored
from workbench.engine.figures.client_limits import ClientLoad, client_limited_reason
from workbench.engine.figures.cross_checks import run_cross_checks, tokens_per_chunk
from workbench.engine.figures.vllm_names import COUNTS as VLLM_COUNTS
from workbench.engine.figures.vllm_names import vllm_figures

NS = 1e9


def percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), None when empty."""
    if not values:
        return None
    data = sorted(values)
    pos = (len(data) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


@dataclass(frozen=True)
class RunObservations:
    """What was measured about one run besides its requests: the client's load, and the
    server's counters just before and just after it (for the cross-checks)."""

    load: ClientLoad | None = None
    counters_before: dict[str, float] | None = None
    counters_after: dict[str, float] | None = None
    slots_from_log: bool = False  # each request's slot was matched from the server's log


def dispatch_delay_s(record: RequestRecord) -> float | None:
    """Actual send minus when the request was free to go (its arrival time, or when a place
    under the client-side concurrency limit freed), less the part of that time spent
    opening its connection, which is reported on its own (a connection opened ahead of
    time costs the dispatch nothing)."""
    if record.t_submit_ns is None or record.t_ready_ns is None:
        return None
    window = record.t_submit_ns - record.t_ready_ns
    if record.connect_ns is not None and record.t_connected_ns is not None:
        start = max(record.t_ready_ns, record.t_connected_ns - record.connect_ns)
        window -= max(0, min(record.t_submit_ns, record.t_connected_ns) - start)
    return max(0, window) / NS


@dataclass(frozen=True)
class RequestMetrics:
    ttft_s: float
    e2e_s: float
    output_tokens: int
    token_source: str
    tpot_s: float | None
    decode_tok_s: float | None
    queue_wait_s: float | None
    prefill_s: float | None
    itl_s: list[float]
    cache_hit: bool
    dispatch_s: float | None = None
    connect_s: float | None = None
    ttft_from_intended_s: float | None = None
    e2e_from_intended_s: float | None = None
    prompt_tokens: int | None = None
    prefill_tok_s: float | None = None
    cached_tokens: int | None = None  # of the prompt, reused from the server's cache


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def prompt_tokens(record: RequestRecord) -> int | None:
    """The prompt's length by the server's count: ``usage.prompt_tokens``, else the tokens
    it processed and found cached (``timings.prompt_n + cache_n``)."""
    counted = _count((record.usage or {}).get("prompt_tokens"))
    if counted is not None:
        return counted
    timings = record.timings or {}
    processed = _count(timings.get("prompt_n"))
    return None if processed is None else processed + (_count(timings.get("cache_n")) or 0)


def prefill_speed(record: RequestRecord) -> float | None:
    """Prompt tokens processed per second of prefill (``timings.prompt_n / prompt_ms``):
    cached tokens were not processed, so they do not count."""
    timings = record.timings or {}
    processed, ms = _count(timings.get("prompt_n")), timings.get("prompt_ms")
    if not processed or not isinstance(ms, int | float) or isinstance(ms, bool) or ms <= 0:
        return None
    return processed / (ms / 1000.0)


def request_metrics(record: RequestRecord) -> RequestMetrics | None:
    """The derived numbers of one successful request; None for failed or empty ones."""
    if (
        not record.ok
        or record.t_submit_ns is None
        or record.t_first_token_ns is None
        or record.t_last_token_ns is None
    ):
        return None
    ttft = (record.t_first_token_ns - record.t_submit_ns) / NS
    e2e = (record.t_last_token_ns - record.t_submit_ns) / NS
    tokens, source = record.output_tokens
    tokens = tokens or 0
    tpot = None
    # A whole answer shows no token times: TTFT is its first visible text, the whole
    # response, and TPOT, ITL and decode speed cannot be seen by the client.
    if tokens > 1 and record.streamed:
        tpot = (record.t_last_token_ns - record.t_first_token_ns) / NS / (tokens - 1)
    times = [c.t_ns for c in record.chunks]
    itl = [(b - a) / NS for a, b in itertools.pairwise(times)]
    timings = record.timings or {}
    prompt_ms = timings.get("prompt_ms")
    queue_wait = prefill = None
    if isinstance(prompt_ms, int | float):
        # Waiting is what the server's own work does not explain: before the first token,
        # or, for a whole answer, before it all.
        work_ms = prompt_ms
        if not record.streamed:
            predicted_ms = timings.get("predicted_ms")
            work_ms += predicted_ms if isinstance(predicted_ms, int | float) else 0.0
        queue_wait = max(0.0, ttft - work_ms / 1000.0)
        prefill = min(ttft, prompt_ms / 1000.0) if not record.streamed else ttft - queue_wait
    cache_n = timings.get("cache_n")
    intended = record.t_intended_ns
    return RequestMetrics(
        ttft_s=ttft,
        e2e_s=e2e,
        output_tokens=tokens,
        token_source=source,
        tpot_s=tpot,
        decode_tok_s=(1.0 / tpot) if tpot and tpot > 0 else None,
        queue_wait_s=queue_wait,
        prefill_s=prefill,
        itl_s=itl,
        cache_hit=isinstance(cache_n, int) and cache_n > 0,
        dispatch_s=dispatch_delay_s(record),
        connect_s=None if record.connect_ns is None else record.connect_ns / NS,
        ttft_from_intended_s=None
        if intended is None
        else (record.t_first_token_ns - intended) / NS,
        e2e_from_intended_s=None if intended is None else (record.t_last_token_ns - intended) / NS,
        prompt_tokens=prompt_tokens(record),
        prefill_tok_s=prefill_speed(record),
        cached_tokens=_count(cache_n),
    )


@dataclass
class RunSummary:
    """One repeat of one configuration."""

    requests: int
    ok: int
    failed: int
    makespan_s: float | None
    output_tokens: int
    agg_tok_s: float | None
    ttft_p50_s: float | None
    ttft_p90_s: float | None
    ttft_p99_s: float | None
    ttft_max_s: float | None
    tpot_p50_ms: float | None
    tpot_p90_ms: float | None
    tpot_p99_ms: float | None
    itl_p50_ms: float | None
    itl_p90_ms: float | None
    itl_p99_ms: float | None
    itl_max_ms: float | None
    e2e_p50_s: float | None
    e2e_p90_s: float | None
    e2e_p99_s: float | None
    decode_tok_s: float | None
    queue_wait_p50_s: float | None
    queue_wait_max_s: float | None
    cache_hits: int
    token_source: str
    errors: list[str] = field(default_factory=list)
    dispatch_p50_ms: float | None = None
    dispatch_p99_ms: float | None = None
    dispatch_max_ms: float | None = None
    connect_p50_ms: float | None = None
    connect_max_ms: float | None = None
    ttft_from_intended_p50_s: float | None = None
    ttft_from_intended_p99_s: float | None = None
    e2e_from_intended_p50_s: float | None = None
    e2e_from_intended_p99_s: float | None = None
    loop_busy: float | None = None  # share of the run the measuring loop was busy
    client_limited: str | None = None  # why the client, not the server, shaped the numbers
    tokens_per_chunk: float | None = None  # by the server's count; > 1: ITL is per chunk
    checks: list[str] = field(default_factory=list)  # each cross-check with the server
    checks_failed: list[str] = field(default_factory=list)  # those off by over 5 %
    prompt_tokens_p50: float | None = None  # by the server's count
    prefill_tok_s: float | None = None
    context_failed: int = 0  # requests a slot's context could not hold
    cache_hit_rate: float | None = None  # prompt tokens reused from the cache, of all
    ttft_hit_p50_s: float | None = None  # requests that reused some of their prompt
    ttft_miss_p50_s: float | None = None  # and those that reused none
    vllm: dict[str, float | None] = field(default_factory=dict)  # as vllm bench serve names them


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000.0


def makespan_s(records: Sequence[RequestRecord]) -> float | None:
    """First submit to last done: the time the requests took together."""
    submits = [r.t_submit_ns for r in records if r.t_submit_ns is not None]
    ends = [r.t_done_ns for r in records if r.t_done_ns is not None and r.t_submit_ns is not None]
    return (max(ends) - min(submits)) / NS if submits and ends else None


def summarize_run(
    records: list[RequestRecord], observed: RunObservations | None = None
) -> RunSummary:
    observed = observed or RunObservations()
    load = observed.load
    measured = [r for r in records if not r.warmup]
    checks = run_cross_checks(
        measured, observed.counters_before, observed.counters_after, observed.slots_from_log
    )
    metrics = [m for m in (request_metrics(r) for r in measured) if m is not None]
    makespan = makespan_s(measured)
    tokens = sum(m.output_tokens for m in metrics)
    ttft = [m.ttft_s for m in metrics]
    ttft_p50 = percentile(ttft, 50)
    tpot = [m.tpot_s for m in metrics if m.tpot_s is not None]
    itl = [gap for m in metrics for gap in m.itl_s]
    e2e = [m.e2e_s for m in metrics]
    waits = [m.queue_wait_s for m in metrics if m.queue_wait_s is not None]
    decode = [m.decode_tok_s for m in metrics if m.decode_tok_s is not None]
    sources = sorted({m.token_source for m in metrics})
    # Dispatch delay and connect time count every request that was sent, failed or not.
    dispatch = [d for d in (dispatch_delay_s(r) for r in measured) if d is not None]
    connect = [r.connect_ns / NS for r in measured if r.connect_ns is not None]
    from_intended = [m.ttft_from_intended_s for m in metrics if m.ttft_from_intended_s is not None]
    e2e_intended = [m.e2e_from_intended_s for m in metrics if m.e2e_from_intended_s is not None]
    dispatch_p99 = _ms(percentile(dispatch, 99))
    prompts = [m.prompt_tokens for m in metrics if m.prompt_tokens is not None]
    prefill = [m.prefill_tok_s for m in metrics if m.prefill_tok_s is not None]
    counted = [m for m in metrics if m.prompt_tokens and m.cached_tokens is not None]
    cached = sum(m.cached_tokens or 0 for m in counted)
    return RunSummary(
        requests=len(measured),
        ok=sum(r.ok for r in measured),
        failed=sum(not r.ok for r in measured),
        makespan_s=makespan,
        output_tokens=tokens,
        agg_tok_s=tokens / makespan if makespan else None,
        ttft_p50_s=ttft_p50,
        ttft_p90_s=percentile(ttft, 90),
        ttft_p99_s=percentile(ttft, 99),
        ttft_max_s=max(ttft) if ttft else None,
        tpot_p50_ms=_ms(percentile(tpot, 50)),
        tpot_p90_ms=_ms(percentile(tpot, 90)),
        tpot_p99_ms=_ms(percentile(tpot, 99)),
        itl_p50_ms=_ms(percentile(itl, 50)),
        itl_p90_ms=_ms(percentile(itl, 90)),
        itl_p99_ms=_ms(percentile(itl, 99)),
        itl_max_ms=_ms(max(itl)) if itl else None,
        e2e_p50_s=percentile(e2e, 50),
        e2e_p90_s=percentile(e2e, 90),
        e2e_p99_s=percentile(e2e, 99),
        decode_tok_s=statistics.fmean(decode) if decode else None,
        queue_wait_p50_s=percentile(waits, 50),
        queue_wait_max_s=max(waits) if waits else None,
        cache_hits=sum(m.cache_hit for m in metrics),
        token_source="+".join(sources) or "none",
        errors=[r.error for r in measured if not r.ok and r.error],
        dispatch_p50_ms=_ms(percentile(dispatch, 50)),
        dispatch_p99_ms=dispatch_p99,
        dispatch_max_ms=_ms(max(dispatch)) if dispatch else None,
        connect_p50_ms=_ms(percentile(connect, 50)),
        connect_max_ms=_ms(max(connect)) if connect else None,
        ttft_from_intended_p50_s=percentile(from_intended, 50),
        ttft_from_intended_p99_s=percentile(from_intended, 99),
        e2e_from_intended_p50_s=percentile(e2e_intended, 50),
        e2e_from_intended_p99_s=percentile(e2e_intended, 99),
        loop_busy=load.loop_busy if load is not None else None,
        client_limited=client_limited_reason(dispatch_p99, load, ttft_p50),
        tokens_per_chunk=tokens_per_chunk(measured),
        checks=[c.describe() for c in checks],
        checks_failed=[c.describe() for c in checks if not c.agrees],
        prompt_tokens_p50=percentile([float(n) for n in prompts], 50),
        prefill_tok_s=statistics.fmean(prefill) if prefill else None,
        context_failed=sum(r.context_full for r in measured),
        cache_hit_rate=cached / sum(m.prompt_tokens or 0 for m in counted) if counted else None,
        ttft_hit_p50_s=percentile([m.ttft_s for m in metrics if m.cache_hit], 50),
        ttft_miss_p50_s=percentile([m.ttft_s for m in metrics if not m.cache_hit], 50),
        vllm=vllm_figures(metrics, makespan),
    )


# The run figures that get a mean and a spread across repeats.
SPREAD_FIELDS = ("makespan_s", "agg_tok_s", "ttft_p50_s", "ttft_max_s", "decode_tok_s")


@dataclass
class ConfigSummary:
    """One configuration: its settings, what the server said about itself, and its runs."""

    index: int
    label: str
    slots: int | None  # None: a server the workbench did not start, and that did not say
    ctx: int | None
    n_ctx_slot: int | None
    n_slots: int | None
    kv_unified: bool | None
    cont_batching: bool | None
    concurrency: int
    max_tokens: int
    status: str
    runs: list[RunSummary]
    mean: dict[str, float | None] = field(default_factory=dict)
    sd: dict[str, float | None] = field(default_factory=dict)
    error: str | None = None
    input_tokens: int = 0
    cache_prompt: bool = False
    warmup: int = 0

    @property
    def cache_state(self) -> str:
        """How the prompt cache stood for the measured requests: off, cold (on, nothing sent
        before them) or warm (on, after the warm-up requests)."""
        if not self.cache_prompt:
            return "off"
        return "warm" if self.warmup else "cold"

    @property
    def unasked_cache_hits(self) -> str | None:
        """Requests that reused cached prompt tokens though the experiment turned the cache
        off (a server that caches anyway, or a prompt file that repeats): their TTFT is
        flattered. None when there were none, or when the cache was asked for."""
        hits = self.value("cache_hits")
        if self.cache_prompt or not hits:
            return None
        return f"{plural(hits, 'request')} reused cached prompt tokens though cache_prompt is off"

    def value(self, name: str) -> Any:
        """A run figure averaged over repeats (or summed, for counts)."""
        if name in self.mean:
            return self.mean[name]
        values = [getattr(run, name) for run in self.runs]
        numbers = [v for v in values if isinstance(v, int | float)]
        if not numbers:
            return None
        if name in ("requests", "ok", "failed", "cache_hits", "output_tokens", "context_failed"):
            return sum(numbers)
        return statistics.fmean(numbers)

    def vllm_value(self, name: str) -> float | None:
        """A figure as vLLM names it (``vllm_names.COLUMNS``): counts summed over repeats,
        the rest averaged."""
        numbers = [v for run in self.runs if isinstance(v := run.vllm.get(name), int | float)]
        if not numbers:
            return None
        return sum(numbers) if name in VLLM_COUNTS else statistics.fmean(numbers)

    @property
    def checks_failed(self) -> list[str]:
        """Cross-checks with the server that disagreed, in any repeat."""
        many = len(self.runs) > 1
        return [
            f"repeat {i + 1}: {text}" if many else text
            for i, run in enumerate(self.runs)
            for text in run.checks_failed
        ]

    @property
    def cross_check_failures(self) -> str | None:
        """The failed cross-checks as one line (the CSV's cell), or None."""
        return "; ".join(self.checks_failed) or None

    @property
    def trust_notes(self) -> list[str]:
        """Why this configuration's numbers may not be the server's alone, or not the
        task the others did."""
        notes = [f"not the same task: {self.not_same_task}"] if self.not_same_task else []
        if self.unasked_cache_hits:
            notes.append(f"prompt cache: {self.unasked_cache_hits} (TTFT flattered)")
        if self.client_limited:
            notes.append(f"client-limited: {self.client_limited}")
        return notes + [f"cross-check: {text}" for text in self.checks_failed]

    @property
    def not_same_task(self) -> str | None:
        """Why this configuration did not do the task the others did: requests its slots'
        context could not hold were refused or cut short, so its speed is not comparable.
        None when every request was served whole (or failed for another reason)."""
        failed = self.value("context_failed")
        if not failed:
            return None
        per_slot = f" ({self.n_ctx_slot} tokens per slot)" if self.n_ctx_slot else ""
        return f"{failed} of {self.value('requests')} requests did not fit the context{per_slot}"

    @property
    def flags(self) -> list[str]:
        """Short marks for a table's label cell: a status other than ok, not the same task,
        client-limited, a failed cross-check."""
        marks = [] if self.status == "ok" else [self.status]
        if self.not_same_task:
            marks.append("not the same task")
        if self.client_limited:
            marks.append("client-limited")
        if self.checks_failed:
            marks.append("cross-check off")
        return marks

    @property
    def client_limited(self) -> str | None:
        """Why any repeat's numbers were shaped by the client, or None."""
        reasons = [
            f"repeat {i + 1}: {r.client_limited}"
            for i, r in enumerate(self.runs)
            if r.client_limited
        ]
        if len(self.runs) == 1 and reasons:
            return self.runs[0].client_limited
        return "; ".join(reasons) or None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize_config(
    index: int,
    label: str,
    server: dict[str, Any],
    workload: dict[str, Any],
    facts: StartupFacts,
    runs: list[RunSummary],
    status: str = "ok",
    error: str | None = None,
    slots_override: int | None = None,
    managed: bool = True,
) -> ConfigSummary:
    """``managed``: the workbench started the server with ``server``'s settings, so they are
    facts; otherwise (an external server, an imported file) only what the server itself
    said is known, and the rest is None."""
    mean: dict[str, float | None] = {}
    sd: dict[str, float | None] = {}
    for name in SPREAD_FIELDS:
        values = [getattr(run, name) for run in runs if getattr(run, name) is not None]
        mean[name] = statistics.fmean(values) if values else None
        sd[name] = statistics.stdev(values) if len(values) > 1 else None
    # A stored configuration may come from another version: missing fields take the
    # schema's defaults, unknown ones are ignored.
    settings = from_stored(ServerSettings, server)
    load = from_stored(WorkloadSettings, workload)
    known = settings.slots if managed else facts.n_slots
    slots = slots_override if slots_override is not None else known
    return ConfigSummary(
        index=index,
        label=label,
        slots=slots,
        ctx=facts.n_ctx or (settings.ctx if managed else None),
        n_ctx_slot=facts.n_ctx_slot,
        n_slots=facts.n_slots,
        kv_unified=facts.kv_unified,
        cont_batching=settings.cont_batching if managed else None,
        concurrency=load.effective_concurrency,
        max_tokens=load.max_tokens,
        input_tokens=load.input_tokens,
        cache_prompt=load.cache_prompt,
        warmup=load.warmup,
        status=status,
        runs=runs,
        mean=mean,
        sd=sd,
        error=error,
    )
