"""The lab's hypotheses, judged on a session's numbers: supported, not supported, or
inconclusive (too few configurations, or differences inside the noise).

Noise is the spread across repeats when the session has repeats; otherwise a 5 % guess, and
the verdict says so (run with ``repeats >= 3`` for a real noise floor).

A conversations run also gets a sentence per configuration saying whether its slots held the
conversations' caches (``cache_verdicts``), from the figures of the catalogue's conversation
part, and the lab's hypothesis about slots and conversations is judged on those sentences.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass, field

from workbench.engine.base.states import ConfigStatus
from workbench.engine.base.words import plural
from workbench.engine.figures.metrics import figure
from workbench.engine.figures.summaries import ConfigSummary

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"
HELD, PARTLY_HELD, LOST = "held", "partly held", "lost"
NOISE_GUESS = 0.05
R2_SUPPORTED, R2_REJECTED = 0.9, 0.6


@dataclass
class Verdict:
    hypothesis: str
    verdict: str
    numbers: list[str] = field(default_factory=list)


def _by_slots(summaries: list[ConfigSummary]) -> list[ConfigSummary]:
    """A slots sweep: the largest group of configurations that differ only in slots (a
    sweep over slots x ctx, say, is judged on one ctx), one per slot count, by slots. A
    configuration whose requests did not fit its slots did not do the same task, so its
    speed says nothing about the others'."""
    ok = [
        s
        for s in summaries
        if s.status == ConfigStatus.OK and (s.slots or 0) > 0 and not s.not_same_task
    ]
    groups: dict[tuple[object, ...], dict[int, ConfigSummary]] = {}
    for s in ok:
        key = (s.ctx, s.cont_batching, s.kv_unified is True, s.concurrency, s.max_tokens)
        key += (s.input_tokens,)
        groups.setdefault(key, {}).setdefault(s.slots, s)
    if not groups:
        return []
    best = max(groups.values(), key=len)
    return sorted(best.values(), key=lambda s: s.slots)


def _noise(s: ConfigSummary, key: str) -> tuple[float, bool]:
    """Two standard deviations across repeats, or the 5 % guess (second value: measured?)."""
    value = s.value(key) or 0.0
    sd = s.spread(key)
    if sd is not None:
        return 2 * sd, True
    return NOISE_GUESS * abs(value), False


def _differs(a: ConfigSummary, b: ConfigSummary, key: str) -> tuple[float, bool, bool]:
    """(b - a, larger than the noise?, noise measured?)"""
    delta = (b.value(key) or 0.0) - (a.value(key) or 0.0)
    na, measured_a = _noise(a, key)
    nb, measured_b = _noise(b, key)
    return delta, abs(delta) > max(na, nb), measured_a and measured_b


def _noise_note(measured: bool) -> str:
    return (
        "noise: 2 sd across repeats"
        if measured
        else "noise: a 5 % guess (no repeats in this session)"
    )


def throughput_diminishing(summaries: list[ConfigSummary]) -> Verdict:
    hypothesis = "aggregate throughput rises with slots, with diminishing returns"
    points = _by_slots(summaries)
    if len(points) < 3:
        return Verdict(hypothesis, INCONCLUSIVE, [f"needs 3 slot counts, has {len(points)}"])
    gains = []  # (gain per added slot, its noise, beyond the noise?)
    numbers = []
    measured_all = True
    for a, b in itertools.pairwise(points):
        delta, real, measured = _differs(a, b, "agg_tok_s")
        measured_all &= measured
        span = b.slots - a.slots
        noise = math.hypot(_noise(a, "agg_tok_s")[0], _noise(b, "agg_tok_s")[0]) / span
        gains.append((delta / span, noise, real))
        numbers.append(
            f"{a.slots}->{b.slots} slots: {a.mean['agg_tok_s']:.1f} -> "
            f"{b.mean['agg_tok_s']:.1f} tok/s, {delta / span:+.2f} tok/s per added "
            "slot" + ("" if real else " (within noise)")
        )
    numbers.append(_noise_note(measured_all))
    total, real_total, _ = _differs(points[0], points[-1], "agg_tok_s")
    if total <= 0 and real_total:
        return Verdict(hypothesis, NOT_SUPPORTED, ["throughput falls as slots rise", *numbers])
    if not real_total:
        return Verdict(hypothesis, INCONCLUSIVE, ["no rise beyond the noise", *numbers])
    # Returns diminish unless a later gain per slot beats an earlier one beyond their noise.
    growing = [
        later[0] - earlier[0] > math.hypot(earlier[1], later[1])
        for earlier, later in itertools.pairwise(gains)
    ]
    if any(growing):
        return Verdict(hypothesis, NOT_SUPPORTED, ["the gain per added slot grows", *numbers])
    if all(later[0] <= earlier[0] for earlier, later in itertools.pairwise(gains)):
        return Verdict(hypothesis, SUPPORTED, numbers)
    return Verdict(
        hypothesis, INCONCLUSIVE, ["gains per added slot level off within the noise", *numbers]
    )


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Least squares y = a + b x; returns (a, b, R^2)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return my, 0.0, 0.0
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = my - slope * mx
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    ss_tot = sum((y - my) ** 2 for y in ys)
    return intercept, slope, 1.0 - ss_res / ss_tot if ss_tot else 1.0


def ttft_linear_in_load(summaries: list[ConfigSummary]) -> Verdict:
    hypothesis = "TTFT grows roughly linearly with concurrency / slots"
    points = [s for s in _by_slots(summaries) if s.mean.get("ttft_p50_s") is not None]
    ratios = {s.concurrency / s.slots for s in points}
    if len(points) < 3 or len(ratios) < 3:
        return Verdict(
            hypothesis,
            INCONCLUSIVE,
            [f"needs 3 different concurrency/slots ratios, has {len(ratios)}"],
        )
    xs = [s.concurrency / s.slots for s in points]
    ys = [s.mean["ttft_p50_s"] for s in points]
    intercept, slope, r2 = linear_fit(xs, ys)
    numbers = [f"concurrency/slots {x:g}: TTFT p50 {y:.3f} s" for x, y in zip(xs, ys, strict=True)]
    numbers.append(f"fit: TTFT = {intercept:.3f} + {slope:.3f} x ratio, R^2 = {r2:.3f}")
    # An over-saturated configuration's TTFT tells how long its run lasted, not its load.
    if saturated := [s.label for s in points if s.over_saturated]:
        numbers.append("over-saturated, TTFT grows with the run's length: " + ", ".join(saturated))
        return Verdict(hypothesis, INCONCLUSIVE, numbers)
    if slope > 0 and r2 >= R2_SUPPORTED:
        return Verdict(hypothesis, SUPPORTED, numbers)
    if slope <= 0 or r2 < R2_REJECTED:
        return Verdict(hypothesis, NOT_SUPPORTED, numbers)
    return Verdict(hypothesis, INCONCLUSIVE, numbers)


def context_per_slot(summaries: list[ConfigSummary]) -> Verdict:
    from workbench.engine.models.memory import kv_layout, slot_context

    hypothesis = "each of N explicit slots gets ctx / N tokens of context"
    checked = [
        s
        for s in summaries
        if (s.slots or 0) > 0 and s.n_ctx_slot is not None and s.ctx and s.kv_unified is False
    ]
    if not checked:
        return Verdict(
            hypothesis,
            INCONCLUSIVE,
            ["no configuration with explicit slots and parsed startup facts"],
        )
    numbers, wrong = [], []
    for s in checked:
        expected = s.ctx // s.slots
        padded = kv_layout(s.ctx, s.slots).cells_per_slot
        said = f"-np {s.slots} -c {s.ctx}: n_ctx_slot {s.n_ctx_slot} (ctx/N = {expected}"
        if padded != expected:
            said += f", padded to {padded}"
        allowed = {expected, padded}
        capped = slot_context(padded, s.n_ctx_train or 0)
        if capped != padded:
            said += f", capped at the model's training context {capped}"
            allowed = {capped}
        numbers.append(said + ")")
        if s.n_ctx_slot not in allowed:
            wrong.append(s)
    # What the smaller slots cost: the requests they could not hold.
    numbers += [f"-np {s.slots}: {s.not_same_task}" for s in checked if s.not_same_task]
    return Verdict(hypothesis, NOT_SUPPORTED if wrong else SUPPORTED, numbers)


def decode_speed_falls(summaries: list[ConfigSummary]) -> Verdict:
    hypothesis = "per-request decode speed falls as slots rise (shared memory bandwidth)"
    points = [s for s in _by_slots(summaries) if s.mean.get("decode_tok_s") is not None]
    if len(points) < 2:
        return Verdict(hypothesis, INCONCLUSIVE, [f"needs 2 slot counts, has {len(points)}"])
    numbers = [
        f"{plural(s.slots or 0, 'slot')}: {s.mean['decode_tok_s']:.1f} tok/s per request"
        for s in points
    ]
    steps = [_differs(a, b, "decode_tok_s") for a, b in itertools.pairwise(points)]
    numbers.append(_noise_note(all(m for _, _, m in steps)))
    if all(delta < 0 and real for delta, real, _ in steps):
        return Verdict(hypothesis, SUPPORTED, numbers)
    if any(delta > 0 and real for delta, real, _ in steps):
        return Verdict(hypothesis, NOT_SUPPORTED, numbers)
    return Verdict(hypothesis, INCONCLUSIVE, numbers)


def _pool(s: ConfigSummary) -> str:
    """One configuration's slots, context a request and KV, as its server stated them."""
    kv = f", KV {s.kv_buffer_mib:.1f} MiB" if s.kv_buffer_mib is not None else ""
    pool = "one unified pool" if s.kv_unified else "a cache each"
    return (
        f"-np {-1 if s.auto_slots else s.slots} -c {s.ctx}: {s.n_slots} slots, {pool}, up to "
        f"{s.n_ctx_slot} tokens a request{kv}"
    )


def auto_pool_against_explicit(summaries: list[ConfigSummary]) -> Verdict | None:
    """Where a session ran ``-np -1`` beside explicit slots of the same count and context:
    whether the auto layout is one pool a single request may fill, where explicit slots
    split the context, and what each took in KV, from the servers' own startup facts. None
    when the session has no such pair."""
    started = [s for s in summaries if s.n_ctx_slot is not None and s.n_slots and s.ctx]
    pairs = [
        (auto, explicit)
        for auto in started
        if auto.auto_slots
        for explicit in started
        if not explicit.auto_slots
        and explicit.kv_unified is False
        and (explicit.slots, explicit.ctx) == (auto.n_slots, auto.ctx)
    ]
    if not pairs:
        return None
    hypothesis = (
        "-np -1 gives its slots one unified pool a single request may fill, where explicit "
        "-np N gives each slot ctx / N"
    )
    numbers, wrong = [], False
    for auto, explicit in pairs:
        numbers += [_pool(auto), _pool(explicit)]
        if auto.kv_buffer_mib is not None and explicit.kv_buffer_mib is not None:
            ratio = auto.kv_buffer_mib / explicit.kv_buffer_mib if explicit.kv_buffer_mib else 0
            numbers.append(
                f"the auto pool's KV is {ratio:.2f}x the explicit slots' "
                f"({auto.kv_buffer_mib:.1f} against {explicit.kv_buffer_mib:.1f} MiB) and "
                f"one request may use {auto.n_ctx_slot} tokens, not {explicit.n_ctx_slot}: "
                "concurrent long requests share the pool"
            )
        wrong = wrong or not auto.kv_unified or (auto.n_ctx_slot or 0) <= (explicit.n_ctx_slot or 0)
    return Verdict(hypothesis, NOT_SUPPORTED if wrong else SUPPORTED, numbers)


@dataclass(frozen=True)
class CacheVerdict:
    """Whether one conversations configuration's slots held its conversations' caches
    (``HELD``: no later turn lost its cache, ``LOST``: most did, else ``PARTLY_HELD``), in
    one sentence."""

    label: str
    state: str
    sentence: str
    conversations_per_slot: float | None
    ram_cache: bool  # llama-server's RAM prompt cache was on (or not known to be off)


def _cache_state(s: ConfigSummary) -> str | None:
    turns, lost = s.value("later_turns"), s.value("lost_turns")
    if not turns or lost is None:
        return None  # not a conversations run, or no later turn the server counted
    if lost == 0:
        return HELD
    return LOST if 2 * lost > turns else PARTLY_HELD


def _tokens(count: int) -> str:
    return f"{count:,} token" + ("" if count == 1 else "s")


def _cache_sentence(s: ConfigSummary, state: str, other: ConfigSummary | None) -> str:
    """``np=4: the slots held ...``, with the later turns' TTFT against ``other``'s."""
    turns, lost = s.value("later_turns"), s.value("lost_turns")
    tokens = s.value("reprefilled_tokens") or 0
    if state == HELD:
        share = s.value("later_cache_share")
        took = f"{share:.0%} of their history" if share is not None else "their history"
        text = (
            f"{s.label}: the slots held the conversations' caches: later turns took {took} "
            f"from the cache ({_tokens(tokens)} re-prefilled)"
        )
    else:
        head = (
            "the conversations lost their caches"
            if state == LOST
            else "the slots held only some of the conversations' caches"
        )
        off = " (cache_prompt is off)" if not s.cache_prompt else ""
        text = (
            f"{s.label}: {head}{off}: {lost} of {plural(turns, 'later turn')} re-prefilled, "
            f"{tokens:,} history tokens processed again"
        )
    ttft = figure("later_ttft_p50_s")
    mine, theirs = ttft.of(s), None if other is None else ttft.of(other)
    if other is not None and mine is not None and theirs is not None:
        text += (
            f"; later turns' TTFT p50 {ttft.text(mine)} s vs {ttft.text(theirs)} s at {other.label}"
        )
    return text


def cache_verdicts(summaries: list[ConfigSummary]) -> list[CacheVerdict]:
    """A sentence per conversations configuration; one that lost caches is set beside the
    one that held them best, one that held them beside the one that lost most, where the
    sweep has both."""
    judged = [(s, state) for s in summaries if (state := _cache_state(s)) is not None]
    share = figure("later_cache_share")

    def reuse(s: ConfigSummary) -> float:
        return share.of(s) or 0.0

    held = [s for s, state in judged if state == HELD]
    lost = [s for s, state in judged if state != HELD]
    best = max(held, key=reuse, default=None)
    worst = min(lost, key=reuse, default=None)
    return [
        CacheVerdict(
            s.label,
            state,
            _cache_sentence(s, state, worst if state == HELD else best),
            s.conversations_per_slot,
            s.cache_ram_mib != 0,
        )
        for s, state in judged
    ]


def slots_hold_conversations(summaries: list[ConfigSummary]) -> Verdict | None:
    """Judged on each conversations configuration: held where each conversation had a slot
    of its own, lost (in part or whole) where conversations shared slots. Caches held while
    conversations shared slots with the RAM prompt cache on are not against it: the history
    came back from host memory, which is not what the slots are tested for. None for a
    session with no conversations run."""
    hypothesis = (
        "a slot per conversation holds each conversation's cache between its turns, and "
        "fewer slots than conversations lose it"
    )
    verdicts = cache_verdicts(summaries)
    if not verdicts:
        return None
    numbers = [v.sentence for v in verdicts]
    unknown, against, from_ram = [], [], []
    for v in verdicts:
        per_slot = v.conversations_per_slot
        if per_slot is None:
            unknown.append(v.label)
        elif per_slot > 1 and v.state == HELD and v.ram_cache:
            from_ram.append(v.label)
        elif (per_slot <= 1) != (v.state == HELD):
            against.append(f"{v.label}: {v.state} at {per_slot:g} conversations per slot")
    if from_ram:
        numbers.append(
            "held with more conversations than slots, the RAM prompt cache on (cache_ram_mib), "
            "so not judged: " + ", ".join(from_ram)
        )
    if against:
        return Verdict(hypothesis, NOT_SUPPORTED, [*against, *numbers])
    if len(from_ram) == len(verdicts):
        return Verdict(hypothesis, INCONCLUSIVE, numbers)
    if unknown:
        numbers.append(
            "slots unknown (a server the workbench did not start): " + ", ".join(unknown)
        )
        return Verdict(hypothesis, INCONCLUSIVE, numbers)
    return Verdict(hypothesis, SUPPORTED, numbers)


def _count(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def prompts_stall_streams(summaries: list[ConfigSummary]) -> Verdict | None:
    """Where streams stalled: whether another request's prompt processing covered their
    stalls (the catalogue's stall figures), and, across configurations stalled by a prompt of
    the same length, what the one with the shortest freeze cost that prompt's TTFT (``-b``
    against freezes, the trade the long-prompt experiment sweeps). None where no stream
    stalled."""
    stalled = [
        s for s in summaries if s.status == ConfigStatus.OK and s.value("stall_max_s") is not None
    ]
    if not stalled:
        return None
    hypothesis = "a prompt processed beside running streams freezes them"
    caused = [s for s in stalled if s.value("stall_cause_tokens") is not None]
    numbers = [_stall_sentence(s) for s in stalled]
    if not caused:
        unknown = (
            "the server gave no timings to place prompts by, or "
            if any(s.value("ttft_held_max_s") is None for s in stalled)
            else ""
        )
        numbers.append(f"{unknown}no prompt's processing covered the stalls")
        return Verdict(hypothesis, INCONCLUSIVE, numbers)
    worst = max(caused, key=lambda s: s.value("stall_max_s") or 0.0)
    tokens = worst.value("stall_cause_tokens")
    alike = [s for s in caused if s is not worst and s.value("stall_cause_tokens") == tokens]
    measured = True
    for other in sorted(alike, key=lambda s: -(s.value("stall_max_s") or 0.0)):
        _, real, measured_freeze = _differs(worst, other, "stall_max_s")
        ttft, real_ttft, measured_ttft = _differs(worst, other, "stall_cause_ttft_s")
        measured = measured and measured_freeze and measured_ttft
        cost = ttft / (worst.value("stall_cause_ttft_s") or 1.0)
        numbers.append(
            f"{other.label} against {worst.label}: the longest freeze "
            f"{other.value('stall_max_s') or 0.0:.1f} s, not {worst.value('stall_max_s'):.1f} s"
            + ("" if real else " (within noise)")
            + f", for {cost:+.0%} on the prompt's TTFT"
            + ("" if real_ttft else " (within noise)")
        )
    numbers.append(_noise_note(measured))
    verdict = Verdict(hypothesis, SUPPORTED, numbers)
    return on_busy_machine(verdict, summaries, caused)


def _stall_sentence(s: ConfigSummary) -> str:
    """One configuration's longest stall and the prompt whose processing caused it."""
    longest, share = s.value("stall_max_s"), s.value("stalled_by_prompts_share")
    caused = f"; prompts caused {share:.0%} of the stalled time" if share is not None else ""
    tokens, streams = s.value("stall_cause_tokens"), s.value("stall_cause_streams")
    if tokens is None or streams is None:
        return (
            f"{s.label}: streams froze up to {longest:.1f} s, the longest with no prompt "
            f"its cause{caused}"
        )
    others = (s.value("stall_cause_prompts") or 1) - 1
    ttft = s.value("stall_cause_ttft_s")
    return (
        f"{s.label}: {_count(streams)} stream{'' if streams == 1 else 's'} froze up to "
        f"{longest:.1f} s while a {tokens:,.0f}-token prompt was processed"
        + (f" with {_count(others)} other{'' if others == 1 else 's'}" if others else "")
        + (f" (its TTFT {ttft:.1f} s)" if ttft is not None else "")
        + caused
    )


def on_busy_machine(
    verdict: Verdict, summaries: list[ConfigSummary], points: list[ConfigSummary] | None = None
) -> Verdict:
    """A timing verdict resting on a configuration whose machine was busy says so and is not
    supported: other processes, not the slots, may have made the difference. One whose
    server's machine is unknown (an external server) says that. ``points``: the
    configurations it rests on, where not a slots sweep's."""
    points = _by_slots(summaries) if points is None else points
    busy = [s for s in points if s.machine_busy and not s.machine_busy.startswith("unknown: ")]
    unknown = [s for s in points if s.machine_busy and s.machine_busy.startswith("unknown: ")]
    numbers = list(verdict.numbers)
    if unknown:
        numbers.append(
            "machine load unknown (the server runs elsewhere): "
            + ", ".join(s.label for s in unknown)
        )
    if not busy:
        return Verdict(verdict.hypothesis, verdict.verdict, numbers)
    numbers += [f"busy machine at {s.label}: {s.machine_busy}" for s in busy]
    judged = INCONCLUSIVE if verdict.verdict == SUPPORTED else verdict.verdict
    return Verdict(verdict.hypothesis, judged, numbers)


def lab_verdicts(summaries: list[ConfigSummary]) -> list[Verdict]:
    """The lab's hypotheses, the auto pool's against explicit slots where the session ran
    both, the one about conversations where the session has them, and the one about
    prompts freezing streams where streams stalled.
    The timing ones are never supported on a busy machine (``on_busy_machine``)."""
    verdicts = [
        on_busy_machine(throughput_diminishing(summaries), summaries),
        on_busy_machine(ttft_linear_in_load(summaries), summaries),
        context_per_slot(summaries),
        on_busy_machine(decode_speed_falls(summaries), summaries),
    ]
    extra = (
        auto_pool_against_explicit(summaries),
        slots_hold_conversations(summaries),
        prompts_stall_streams(summaries),
    )
    return [*verdicts, *(v for v in extra if v is not None)]
