"""SLOs (``--slo ttft_p90:2000``) judged on a watch, never more surely than a watch sees.

A llama-server's tasks give TTFT and E2E from the poll that first showed the task on its
slot, and TPOT from its decoding span over its tokens: each end is seen up to a poll late,
so a percentile is met or missed only where it is further than that from the limit, and
"can't tell" otherwise. Those times start at the slot, not at the request's arrival: where
requests may have waited for a slot (a queue seen, or every slot busy with the queue
unseen) a TTFT or E2E below its limit is not a pass. vLLM's and SGLang's own histograms
give TTFT, ITL and E2E to their buckets: a percentile whose bucket holds the limit can't
be told either. A stall needs each token's time, which no watch sees."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from workbench.engine.base.server_kinds import Buckets, ServerKind
from workbench.engine.figures.per_request import percentile
from workbench.engine.tune.records import SloTarget
from workbench.engine.watch.record import read, tasks
from workbench.engine.watch.server_latencies import bucket_percentile, difference
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.summary import WatchSummary, summarize

MET, MISSED, CANNOT_TELL, NOT_JUDGED = "met", "missed", "can't tell", "not judged"
FACT_OF = {"ttft": "ttft", "itl": "itl", "e2el": "e2e"}  # an SLO's metric: a histogram's fact


@dataclass(frozen=True)
class Judged:
    """One SLO on a watch: the percentile read (ms; None where not judged), how far off a
    task's polls may put it either way (0: read from the server's own histogram, whose
    bucket ``basis`` names), and what it was read from and why the outcome is no surer."""

    slo: SloTarget
    outcome: str
    value_ms: float | None
    margin_ms: float
    basis: str


def task_latency_s(task: WatchedTask, metric: str) -> tuple[float, int] | None:
    """A task's TTFT, E2E or TPOT as its polls saw them, and the count its span is divided
    by (1, or the tokens after the first); None where the polls did not see it. TPOT is
    the decoding seen: to the idle slot where its tokens were read there, else to the last
    poll that showed it (a slot that went straight on to the next task)."""
    if task.missed or task.running_at_start:
        return None
    if metric == "ttft" and task.decoding_s is not None:
        return task.decoding_s - task.seen_s, 1
    if metric == "e2el" and task.gone_s is not None:
        return task.gone_s - task.seen_s, 1
    end = task.gone_s if task.decoded_all else task.last_s  # where ``decoded`` was read
    if metric == "tpot" and task.decoded >= 2 and task.decoding_s is not None and end is not None:
        return (end - task.decoding_s) / (task.decoded - 1), task.decoded - 1
    return None


def _outcome(value_ms: float, margin_ms: float, limit_ms: float) -> str:
    if value_ms - margin_ms > limit_ms:
        return MISSED
    return MET if value_ms + margin_ms <= limit_ms else CANNOT_TELL


def _queue_unseen(summary: WatchSummary) -> str:
    """Why a time from the slot on may not be a request's, where it may not."""
    if summary.queued_share:
        wait = summary.wait_estimate_s
        about = "" if wait is None else f", about {wait * 1000:,.0f} ms a request or more"
        return f"requests also waited for a slot ({summary.queued_share:.0%} of the polls{about})"
    if summary.queued_share is None and summary.all_busy_share:
        return "every slot was busy at times and the queue is not seen (no /metrics)"
    return ""


def _on_tasks(
    slo: SloTarget, tasks: Iterable[WatchedTask], summary: WatchSummary, poll_s: float
) -> Judged:
    seen = [found for t in tasks if (found := task_latency_s(t, slo.metric)) is not None]
    if not seen:
        why = "no task was seen whole" if summary.slots else "no tasks without /slots"
        return Judged(slo, NOT_JUDGED, None, 0.0, why)
    value_ms = (percentile([v for v, _ in seen], slo.percentile) or 0.0) * 1000
    margin_ms = (percentile([poll_s / n for _, n in seen], slo.percentile) or 0.0) * 1000
    outcome = _outcome(value_ms, margin_ms, slo.limit_ms)
    basis = f"{len(seen):,} tasks, from the poll that showed each on its slot"
    unseen = _queue_unseen(summary) if slo.metric in ("ttft", "e2el") else ""
    if unseen and outcome != MISSED:
        outcome, basis = CANNOT_TELL, f"{basis}; {unseen}"
    return Judged(slo, outcome, value_ms, margin_ms, basis)


def _bucket_bounds(buckets: Buckets, q: float) -> tuple[float, float]:
    """The bounds of the bucket that holds the ``q``-th percentile (its upper one infinite
    in the last bucket)."""
    rank = max(buckets.values()) * q / 100.0
    lower = 0.0
    for le in sorted(buckets):
        if buckets[le] >= rank:
            return lower, le
        lower = le
    return lower, math.inf


def _on_histogram(
    slo: SloTarget, kind: ServerKind, first: dict[str, Buckets], last: dict[str, Buckets]
) -> Judged | None:
    fact = FACT_OF.get(slo.metric)
    names = dict(kind.latencies).get(fact or "", ())
    name = next((n for n in names if n in last), None)
    if name is None:
        return None
    seen = difference(last[name], first.get(name, {}))
    value = bucket_percentile(seen, slo.percentile)
    if value is None:
        return Judged(slo, NOT_JUDGED, None, 0.0, "the server's histogram observed none")
    low, high = (b * 1000 for b in _bucket_bounds(seen, slo.percentile))
    outcome = MET if high <= slo.limit_ms else MISSED if low > slo.limit_ms else CANNOT_TELL
    bucket = f"{low:,.0f}-{high:,.0f} ms" if math.isfinite(high) else f"over {low:,.0f} ms"
    basis = f"the server's histogram, {max(seen.values()):,.0f} observed, its bucket {bucket}"
    return Judged(slo, outcome, value * 1000, 0.0, basis)


def judge(
    slos: Iterable[SloTarget],
    summary: WatchSummary,
    watched_tasks: Iterable[WatchedTask],
    kind: ServerKind | None,
    histograms: tuple[dict[str, Buckets], dict[str, Buckets]],
    poll_s: float,
) -> list[Judged]:
    """Each SLO on the watch: by the server's own histogram where it has one for the
    metric, else by the tasks (every one the watch kept, not only the recent), each end
    seen up to ``poll_s`` late."""
    kept = list(watched_tasks)
    found = []
    for slo in slos:
        if slo.metric == "stall":
            found.append(Judged(slo, NOT_JUDGED, None, 0.0, "a stall needs each token's time"))
            continue
        judged = _on_histogram(slo, kind, *histograms) if kind is not None else None
        if judged is None and slo.metric == "itl":
            judged = Judged(
                slo,
                NOT_JUDGED,
                None,
                0.0,
                "a watch sees a task's time a token (tpot), not each gap",
            )
        found.append(judged or _on_tasks(slo, kept, summary, poll_s))
    return found


def judge_kept(path: Path, slos: Iterable[SloTarget]) -> list[Judged]:
    """Each SLO on the watch kept at ``path``, on every task it holds; a poll's lateness
    is its interval, or the time polls took where the server made them slower."""
    kept = read(path)
    watched = kept.watched
    poll_s = max(kept.interval_s, watched.seconds / max(1, watched.polls + watched.unanswered))
    histograms = (watched.histograms_first, watched.histograms_last)
    return judge(slos, summarize(watched), tasks(path), watched.kind, histograms, poll_s)
