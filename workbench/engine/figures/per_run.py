"""One repeat of one configuration: makespan, aggregate throughput, percentiles over its
requests, dispatch delay, the client's load (client-limited by ``client_limits``), the
cross-checks with the server, the same figures over its steady state (``steady_state``),
whether its queue grew without bound (``saturation``), TTFO where reasoning was streamed,
a conversations run's turns against the server's cache (``conversation_cache``), and the
drafts a draft model made and the model accepted (``speculative``).
"""

from __future__ import annotations

import statistics
import typing
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from typing import Any

from workbench.engine.base.records import RequestKey, RequestRecord
from workbench.engine.config.experiment import WorkloadSettings
from workbench.engine.figures.client_limits import ClientLoad, client_limited_reason
from workbench.engine.figures.conversation_cache import turn_caches
from workbench.engine.figures.cross_checks import (
    CrossChecked,
    run_cross_checks,
    tokens_per_chunk,
)
from workbench.engine.figures.machine_load import (
    MachineLoad,
    machine_busy_reason,
    machine_unknown_reason,
)
from workbench.engine.figures.per_request import (
    NS,
    RequestMetrics,
    dispatch_delay_s,
    percentile,
    request_metrics,
)
from workbench.engine.figures.saturation import LEFT_UNSENT, over_saturated
from workbench.engine.figures.speculative import SpecFigures, spec_figures
from workbench.engine.figures.stalls import StallFigures, stall_figures
from workbench.engine.figures.steady_state import SteadyFigures, steady_figures
from workbench.engine.figures.vllm_names import vllm_figures


@dataclass(frozen=True)
class RunObservations:
    """What was measured about one run besides its requests: the client's load, what else used
    the machine, and the server's counters just before and just after it (for the cross-checks)."""

    load: ClientLoad | None = None
    counters_before: dict[str, float] | None = None
    counters_after: dict[str, float] | None = None
    slots_from_log: bool = False  # each request's slot was matched from the server's log
    machine: MachineLoad | None = None


@dataclass(frozen=True)
class ReasoningFigures:
    """TTFO where some request streamed reasoning apart from its answer; None each where
    none did (TTFO is then TTFT)."""

    ttfo_p50_s: float | None = None
    ttfo_p90_s: float | None = None


def reasoning_figures(metrics: Sequence[RequestMetrics]) -> ReasoningFigures:
    """The TTFO of a repeat's successful requests, where any streamed reasoning."""
    if not any((m.reasoning_tokens or 0) > 0 for m in metrics):
        return ReasoningFigures()
    ttfo = [m.ttfo_s for m in metrics if m.ttfo_s is not None]
    return ReasoningFigures(percentile(ttfo, 50), percentile(ttfo, 90))


@dataclass(frozen=True)
class ConversationFigures:
    """A repeat's conversation turns: TTFT of turn 1 against the later turns, and how the
    later turns' history fared against the server's cache (``conversation_cache``); None
    each for a repeat with no conversations."""

    turn1_ttft_p50_s: float | None = None
    turn1_ttft_p90_s: float | None = None
    later_ttft_p50_s: float | None = None
    later_ttft_p90_s: float | None = None
    later_cache_share: float | None = None
    reprefilled_tokens: int | None = None
    later_turns: int | None = None
    lost_turns: int | None = None
    lost_turn_share: float | None = None


def conversation_figures(
    records: Sequence[RequestRecord], metrics: dict[RequestKey, RequestMetrics]
) -> ConversationFigures:
    """The figures of one repeat's measured ``records`` (``metrics``: each successful
    one's, by its key) that are turns of conversations."""
    turns = [r for r in records if r.turn is not None and r.conversation_id is not None]
    if not turns:
        return ConversationFigures()
    first = [metrics[r.key].ttft_s for r in turns if r.turn == 1 and r.key in metrics]
    later = [metrics[r.key].ttft_s for r in turns if r.turn > 1 and r.key in metrics]
    caches = list(turn_caches(turns).values())
    seen = sum(c.seen for c in caches)
    lost = sum(c.lost for c in caches)
    return ConversationFigures(
        turn1_ttft_p50_s=percentile(first, 50),
        turn1_ttft_p90_s=percentile(first, 90),
        later_ttft_p50_s=percentile(later, 50),
        later_ttft_p90_s=percentile(later, 90),
        later_cache_share=sum(min(c.cached, c.seen) for c in caches) / seen if seen else None,
        reprefilled_tokens=sum(c.reprefilled for c in caches) if caches else None,
        later_turns=len(caches) if caches else None,
        lost_turns=lost if caches else None,
        lost_turn_share=lost / len(caches) if caches else None,
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
    machine_busy: str | None = None  # why other processes on the machine shaped them
    machine_unknown: str | None = None  # why the server's machine load was not measured
    machine_recorded: bool = False  # what else used the machine was measured (schema 11 on)
    tokens_per_chunk: float | None = None  # by the server's count; > 1: ITL is per chunk
    prompt_tokens_p50: float | None = None  # by the server's count
    prefill_tok_s: float | None = None
    context_failed: int = 0  # requests a slot's context could not hold
    cancelled: int | None = None  # requests a stop (Ctrl-C) cut short; None: none was
    cache_hit_rate: float | None = None  # prompt tokens reused from the cache, of all
    ttft_hit_p50_s: float | None = None  # requests that reused some of their prompt
    ttft_miss_p50_s: float | None = None  # and those that reused none
    vllm: dict[str, float | None] = field(default_factory=dict)  # as vllm bench serve names them
    # Its parts, each computed by its own module; the catalogue finds a figure of a part by
    # its dotted path (``steady.steady_s``, ``metrics.Figure.path``).
    cross_checks: CrossChecked = field(default_factory=CrossChecked)
    steady: SteadyFigures = field(default_factory=SteadyFigures)
    reasoning: ReasoningFigures = field(default_factory=ReasoningFigures)
    conversation: ConversationFigures = field(default_factory=ConversationFigures)
    speculative: SpecFigures = field(default_factory=SpecFigures)
    stalls: StallFigures = field(default_factory=StallFigures)


SUB_RECORDS: dict[str, type] = {
    name: hint for name, hint in typing.get_type_hints(RunSummary).items() if is_dataclass(hint)
}
"""``RunSummary``'s sub-records, by attribute, read off its fields."""


def nested(stored: dict[str, Any]) -> dict[str, Any]:
    """A repeat's stored figures with every sub-record whole, each field it lacks at its
    default. A summary written before ``RunSummary`` had sub-records (a stored prediction,
    schemas 9 to 11) holds their fields at its top level: they are moved into them."""
    out = dict(stored)
    for part, record in SUB_RECORDS.items():
        given = out.get(part, {})
        if not isinstance(given, dict):
            continue  # damage: the reading refuses it
        inner = {f.name for f in fields(record)} & out.keys() if part not in out else set()
        out[part] = {**asdict(record()), **given, **{name: out.pop(name) for name in inner}}
    return out


def headline_decode_tok_s(tpot_p50_ms: float | None) -> float | None:
    """A repeat's headline decode speed, from its TPOT p50 (the catalogue's ``decode_tok_s``).

    The reciprocal of the median, not a mean of reciprocals: a mean of per-request rates is
    pulled up by one fast request (it read 22 tok/s beside a TPOT p50 of 506 ms), and a figure
    that disagrees with the TPOT beside it cannot be read."""
    return 1000.0 / tpot_p50_ms if tpot_p50_ms else None


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000.0


def makespan_s(records: Sequence[RequestRecord]) -> float | None:
    """First submit to last done: the time the requests took together."""
    submits = [r.t_submit_ns for r in records if r.t_submit_ns is not None]
    ends = [r.t_done_ns for r in records if r.t_done_ns is not None and r.t_submit_ns is not None]
    return (max(ends) - min(submits)) / NS if submits and ends else None


def summarize_run(
    records: list[RequestRecord],
    observed: RunObservations | None = None,
    workload: WorkloadSettings | None = None,
) -> RunSummary:
    """One repeat from its records. ``workload``: what its arrivals were, which decides its
    steady state (without it, the steady figures are None)."""
    observed = observed or RunObservations()
    load = observed.load
    measured = [r for r in records if not r.warmup and r.error != LEFT_UNSENT]
    checks = run_cross_checks(
        measured, observed.counters_before, observed.counters_after, observed.slots_from_log
    )
    by_key = {r.key: m for r in measured if (m := request_metrics(r)) is not None}
    metrics = list(by_key.values())
    makespan = makespan_s(measured)
    tokens = sum(m.output_tokens for m in metrics)
    ttft = [m.ttft_s for m in metrics]
    ttft_p50 = percentile(ttft, 50)
    tpot = [m.tpot_s for m in metrics if m.tpot_s is not None]
    itl = [gap for m in metrics for gap in m.itl_s]
    e2e = [m.e2e_s for m in metrics]
    waits = [m.queue_wait_s for m in metrics if m.queue_wait_s is not None]
    sources = sorted({m.token_source for m in metrics})
    # Dispatch delay and connect time count every request that was sent, failed or not.
    dispatch = [d for d in (dispatch_delay_s(r) for r in measured) if d is not None]
    connect = [r.connect_ns / NS for r in measured if r.connect_ns is not None]
    from_intended = [m.ttft_from_intended_s for m in metrics if m.ttft_from_intended_s is not None]
    e2e_intended = [m.e2e_from_intended_s for m in metrics if m.e2e_from_intended_s is not None]
    dispatch_p99 = _ms(percentile(dispatch, 99))
    tpot_p50_ms = _ms(percentile(tpot, 50))
    prompts = [m.prompt_tokens for m in metrics if m.prompt_tokens is not None]
    prefill = [m.prefill_tok_s for m in metrics if m.prefill_tok_s is not None]
    counted = [m for m in metrics if m.prompt_tokens and m.cached_tokens is not None]
    cached = sum(m.cached_tokens or 0 for m in counted)
    return RunSummary(
        requests=len(measured),
        ok=sum(r.ok for r in measured),
        failed=sum(not r.ok and not r.cancelled for r in measured),
        makespan_s=makespan,
        output_tokens=tokens,
        agg_tok_s=tokens / makespan if makespan else None,
        ttft_p50_s=ttft_p50,
        ttft_p90_s=percentile(ttft, 90),
        ttft_p99_s=percentile(ttft, 99),
        ttft_max_s=max(ttft) if ttft else None,
        tpot_p50_ms=tpot_p50_ms,
        tpot_p90_ms=_ms(percentile(tpot, 90)),
        tpot_p99_ms=_ms(percentile(tpot, 99)),
        itl_p50_ms=_ms(percentile(itl, 50)),
        itl_p90_ms=_ms(percentile(itl, 90)),
        itl_p99_ms=_ms(percentile(itl, 99)),
        itl_max_ms=_ms(max(itl)) if itl else None,
        e2e_p50_s=percentile(e2e, 50),
        e2e_p90_s=percentile(e2e, 90),
        e2e_p99_s=percentile(e2e, 99),
        decode_tok_s=headline_decode_tok_s(tpot_p50_ms),
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
        machine_busy=machine_busy_reason(observed.machine),
        machine_unknown=machine_unknown_reason(observed.machine),
        machine_recorded=observed.machine is not None,
        tokens_per_chunk=tokens_per_chunk(measured),
        prompt_tokens_p50=percentile([float(n) for n in prompts], 50),
        prefill_tok_s=statistics.fmean(prefill) if prefill else None,
        context_failed=sum(r.context_full for r in measured),
        cancelled=sum(r.cancelled for r in measured) or None,
        cache_hit_rate=cached / sum(m.prompt_tokens or 0 for m in counted) if counted else None,
        ttft_hit_p50_s=percentile([m.ttft_s for m in metrics if m.cache_hit], 50),
        ttft_miss_p50_s=percentile([m.ttft_s for m in metrics if not m.cache_hit], 50),
        vllm=vllm_figures(metrics, makespan),
        cross_checks=CrossChecked.of(checks),
        steady=replace(
            steady_figures(measured, workload),
            # The requests a stop left unsent were due (and waited) all the same.
            over_saturated=over_saturated([r for r in records if not r.warmup]),
        ),
        reasoning=reasoning_figures(metrics),
        conversation=conversation_figures(measured, by_key),
        speculative=spec_figures(observed.counters_before, observed.counters_after),
        stalls=stall_figures(measured, by_key),
    )
