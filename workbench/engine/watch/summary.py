"""What a watch saw, summed up: each slot's busy share, the queue (its depth's percentiles
and the share of polls with one), how many requests were in the server at once, the token
rates, the wait in the queue estimated by Little's law, and a verdict in words.

Both ``/slots`` and llama-server's ``/metrics`` are snapshots the server refreshes once
per step (measured on b11434: during a 5 s prompt step ``requests_deferred`` read 0 while
two requests waited, and 2 once the step ended; the token counters move when a prompt or
a task ends): a queue is seen up to a step late, and the token rates hold over seconds,
not between two polls.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from workbench.engine.base.words import plural
from workbench.engine.figures.per_request import percentile
from workbench.engine.watch.server_latencies import Latency, latencies
from workbench.engine.watch.unseen import Unseen
from workbench.engine.watch.watcher import Gap, Load, Watched

QUEUED_SHARE = 0.05
"""Queued in more than this share of the polls, with every slot busy as often: the slots
were the bottleneck."""


@dataclass(frozen=True)
class WatchSummary:
    """A watch in figures (None where the server did not give what one needs).
    ``wait_estimate_s`` is estimated, never measured: the mean queue depth over the rate
    requests went through the queue (Little's law, ``_through_the_queue``), both over the
    time the server answered. It reads low: a wait that began before the watch or ended
    after it counts only its part in the watch, and the depth is a snapshot a step old, so
    requests that came during a long step and those that went straight to a slot at its end
    are not in it (bench/watch_truth.py).
    ``unseen``: the tasks no poll saw, estimated from the token counters (llama-server);
    ``requests_finished``: the server's own count of them (vLLM, SGLang)."""

    seconds: float
    polls: int
    unanswered: int
    slots: int
    tasks_ended: int
    tasks_missed: int
    tasks_running: int
    unseen: Unseen | None
    requests_finished: float | None
    busy: dict[int, float]
    all_busy_share: float | None
    queue_p50: float | None
    queue_p90: float | None
    queue_max: float | None
    queued_share: float | None
    in_server_p50: float | None
    in_server_p90: float | None
    in_server_p99: float | None
    in_server_max: float | None
    kv_use_p50: float | None  # percent of the KV cache in use, the server's gauge
    kv_use_max: float | None
    prompt_tok_s: float | None
    output_tok_s: float | None
    wait_estimate_s: float | None
    memory_max_bytes: int | None
    memory_note: str
    server_latencies: tuple[Latency, ...]
    gaps: tuple[Gap, ...]
    gaps_count: int
    down_s: float
    verdict: str


def counter_rate(first: Load | None, last: Load | None, counter: str) -> float | None:
    """A counter's increase a second from one ``/metrics`` poll to a later one (a restarted
    server's counter falls: 0)."""
    if first is None or last is None or last.t_s <= first.t_s:
        return None
    start, end = getattr(first, counter), getattr(last, counter)
    if start is None or end is None:
        return None
    return max(0.0, end - start) / (last.t_s - first.t_s)


def _values(counts: Counter[int]) -> list[int]:
    """Each value as often as it was seen: what the one percentile function takes."""
    return [value for value, n in sorted(counts.items()) for _ in range(n)]


def _through_the_queue(watched: Watched, unseen: Unseen | None) -> float:
    """The requests whose time in the queue the watch's depths hold: those that left it
    while the watch looked (took a slot: llama-server's tasks less those found running, and
    those no poll saw; or the server's finished count less those it was serving at the first
    poll plus those at the last) and those still in it at the last answered poll. So the
    wait is the time in the queue the watch saw a request: never more than it waited."""
    first, last = watched.first, watched.last
    queued = (last.waiting or 0.0) if last is not None else 0.0
    if watched.requests_finished is not None:
        serving_first = (first.running or 0.0) if first is not None else 0.0
        serving_last = (last.running or 0.0) if last is not None else 0.0
        return watched.requests_finished - serving_first + serving_last + queued
    return watched.tasks.began + (unseen.tasks if unseen else 0.0) + queued


def summarize(watched: Watched) -> WatchSummary:
    tasks = watched.tasks
    slots = sorted(watched.busy | {t.slot: 0 for t in tasks.tasks})
    waiting, in_server = _values(watched.queue), _values(watched.at_once)
    queued = sum(1 for w in waiting if w > 0) / len(waiting) if waiting else None
    unseen = watched.ledger.estimate() if watched.slots_on else None
    finished = watched.requests_finished
    ended = tasks.ended
    down = watched.down_since
    down_s = watched.down_s + (0.0 if down is None else max(0.0, watched.seconds - down))
    answered_s = watched.seconds - down_s  # the depths are the answered polls'
    through = _through_the_queue(watched, unseen)
    wait = None
    if waiting and through > 0 and answered_s > 0:
        wait = (sum(waiting) / len(waiting)) / (through / answered_s)
    summary = WatchSummary(
        seconds=watched.seconds,
        polls=watched.polls,
        unanswered=watched.unanswered,
        slots=len(slots),
        tasks_ended=ended,
        tasks_missed=tasks.missed,
        tasks_running=tasks.running,
        unseen=unseen,
        requests_finished=finished,
        busy={slot: watched.busy_share(slot) for slot in slots},
        all_busy_share=(
            watched.all_busy / watched.polls if watched.slots_on and watched.polls else None
        ),
        queue_p50=percentile(waiting, 50),
        queue_p90=percentile(waiting, 90),
        queue_max=max(waiting, default=None),
        queued_share=queued,
        in_server_p50=percentile(in_server, 50),
        in_server_p90=percentile(in_server, 90),
        in_server_p99=percentile(in_server, 99),
        in_server_max=max(in_server, default=None),
        kv_use_p50=percentile(_values(watched.kv_use), 50),
        kv_use_max=max(watched.kv_use, default=None),
        prompt_tok_s=counter_rate(watched.first, watched.last, "prompt_tokens"),
        output_tok_s=counter_rate(watched.first, watched.last, "output_tokens"),
        wait_estimate_s=wait,
        memory_max_bytes=watched.memory_max_bytes,
        memory_note=watched.memory_note,
        server_latencies=tuple(
            latencies(watched.kind, watched.histograms_first, watched.histograms_last)
        ),
        gaps=tuple(watched.gaps),
        gaps_count=watched.gaps_count,
        down_s=down_s,
        verdict="",
    )
    return replace(summary, verdict=verdict(summary))


def verdict(s: WatchSummary) -> str:
    """The watch in one sentence: were the slots the bottleneck, or more than enough."""
    if s.polls == 0:
        return "the server never answered: nothing to judge"
    if not s.tasks_ended and not s.tasks_running and not s.in_server_max:
        return "no request was seen in the server during the watch: nothing to judge"
    all_busy = s.all_busy_share
    if s.queued_share is not None and s.queued_share > QUEUED_SHARE and s.queue_max:
        every = "the 1 slot was" if s.slots == 1 else f"all {s.slots} slots were"
        busy = f"{every} busy {all_busy:.0%} of the watch and " if all_busy else ""
        return (
            f"{busy}requests queued up to {s.queue_max:.0f} deep ({s.queued_share:.0%} of "
            "the watch): the slots were the bottleneck"
        )
    if s.in_server_max is not None and s.slots and s.in_server_max <= s.slots / 2:
        return (
            f"never more than {plural(round(s.in_server_max), 'request')} at once on "
            f"{plural(s.slots, 'slot')}: more "
            "slots would only cut each user's context"
        )
    if s.queued_share is None:
        busiest = max(s.busy.values(), default=0.0)
        return (
            f"the busiest slot was busy {busiest:.0%} of the watch (no /metrics: the queue "
            "is not seen; start llama-server with --metrics)"
        )
    if not s.slots:
        most = "" if s.in_server_max is None else f" (at most {s.in_server_max:.0f} at once)"
        return f"requests seldom or never queued{most}: the server kept up with this load"
    enough = "1 slot was" if s.slots == 1 else f"{s.slots} slots were"
    return f"requests seldom or never queued: {enough} enough for this load"


def window_latencies(watched: Watched) -> tuple[float, list[Latency]]:
    """The server's own latency histograms over the live window (the last minute, or the
    watch so far): its span in seconds and each histogram's percentiles."""
    span_s, oldest, newest = watched.window_histograms()
    return span_s, latencies(watched.kind, oldest, newest)
