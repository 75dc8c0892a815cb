"""Kept watches side by side (Monday against Tuesday, before and after a settings change):
the same figures of each, a row a figure, and what makes two of them not like for like.

Every figure is the watch's summary or read from every task its file holds; the task times
start at the slot (a request's wait in the queue before is not seen per request) and are
seen up to a poll late, which the rows' names say."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.engine.figures.per_request import percentile
from workbench.engine.watch.record import WatchFile, read, tasks
from workbench.engine.watch.server_latencies import FACTS
from workbench.engine.watch.slo_judged import task_latency_s
from workbench.engine.watch.summary import WatchSummary, summarize

MIB = 2**20


@dataclass(frozen=True)
class Row:
    """One figure of each watch (None: that watch has none), in ``unit``."""

    figure: str
    unit: str
    values: tuple[float | None, ...]


@dataclass(frozen=True)
class WatchComparison:
    """The watches' names (their files), where and when each watched, the figures, each
    watch's verdict, and what differs between them that a reader must know."""

    names: tuple[str, ...]
    urls: tuple[str, ...]
    started: tuple[str, ...]
    rows: tuple[Row, ...]
    verdicts: tuple[str, ...]
    warnings: tuple[str, ...]


Figure = tuple[str, str, Callable[[WatchSummary], float | None]]

FIGURES: tuple[Figure, ...] = (
    ("watched", "s", lambda s: s.seconds),
    ("server down", "s", lambda s: s.down_s),
    ("slots", "", lambda s: s.slots or None),
    ("tasks ended a minute", "", lambda s: _a_minute(s.tasks_ended, s)),
    ("and unseen (estimated)", "", lambda s: _a_minute(s.unseen.tasks if s.unseen else None, s)),
    ("requests finished a minute", "", lambda s: _a_minute(s.requests_finished, s)),
    ("slot busy, the mean", "%", lambda s: _share(_mean(list(s.busy.values())))),
    ("every slot busy", "%", lambda s: _share(s.all_busy_share)),
    ("queue p50", "", lambda s: s.queue_p50),
    ("queue p90", "", lambda s: s.queue_p90),
    ("queue max", "", lambda s: s.queue_max),
    ("polls with a queue", "%", lambda s: _share(s.queued_share)),
    ("wait in the queue (low estimate)", "ms", lambda s: _ms(s.wait_estimate_s)),
    ("requests at once p50", "", lambda s: s.in_server_p50),
    ("requests at once p90", "", lambda s: s.in_server_p90),
    ("requests at once max", "", lambda s: s.in_server_max),
    ("KV cache in use p50", "%", lambda s: s.kv_use_p50),
    ("KV cache in use max", "%", lambda s: s.kv_use_max),
    ("prompt tok/s", "", lambda s: s.prompt_tok_s),
    ("generated tok/s", "", lambda s: s.output_tok_s),
    ("server memory, the most", "MiB", lambda s: _mib(s.memory_max_bytes)),
)  # fmt: skip

TASK_FIGURES = (("ttft", "TTFT from the slot"), ("e2el", "E2E from the slot"), ("tpot", "TPOT"))


def _a_minute(count: float | None, s: WatchSummary) -> float | None:
    return count / s.seconds * 60 if count is not None and s.seconds else None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _mib(value: int | None) -> float | None:
    return None if value is None else value / MIB


def _share(value: float | None) -> float | None:
    return None if value is None else value * 100


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000


def _task_rows(paths: Sequence[Path]) -> Iterator[Row]:
    """TTFT and E2E from the slot and TPOT, p50 and p90, of every task each file holds."""
    seen: list[dict[str, list[float]]] = []
    for path in paths:
        found: dict[str, list[float]] = {metric: [] for metric, _ in TASK_FIGURES}
        for task in tasks(path):
            for metric in found:
                if (value := task_latency_s(task, metric)) is not None:
                    found[metric].append(value[0] * 1000)
        seen.append(found)
    for metric, name in TASK_FIGURES:
        for q in (50, 90):
            values = tuple(percentile(found[metric], q) for found in seen)
            if any(v is not None for v in values):
                yield Row(f"{name} p{q}", "ms", values)


def _latency_rows(summaries: Sequence[WatchSummary]) -> Iterator[Row]:
    """The servers' own histograms' percentiles, where one of the watches has them."""
    for fact, name in FACTS.items():
        for q in (50, 90, 99):
            values = tuple(
                next((_ms(getattr(f, f"p{q}")) for f in s.server_latencies if f.fact == fact), None)
                for s in summaries
            )
            if any(v is not None for v in values):
                yield Row(f"the server's {name} p{q}", "ms", values)


def _warnings(kept: Sequence[WatchFile], summaries: Sequence[WatchSummary]) -> Iterator[str]:
    """What makes the watches' figures not like for like."""
    kinds = {k.watched.kind.name if k.watched.kind else "no /metrics" for k in kept}
    if len(kinds) > 1:
        yield f"different servers' metrics ({', '.join(sorted(kinds))}): not one queue measure"
    intervals = sorted({k.interval_s for k in kept})
    if len(intervals) > 1:
        yield (
            f"polled every {', '.join(f'{i:g}' for i in intervals)} s: task times are seen "
            "up to a poll late, so they differ by that much"
        )
    if any(s.down_s for s in summaries):
        yield "the server was down during a watch: its rates count the gap"


def compare_watches(paths: Sequence[Path]) -> WatchComparison:
    """The kept watches at ``paths`` side by side (each read whole, every value checked)."""
    kept = [read(path) for path in paths]
    summaries = [summarize(k.watched) for k in kept]
    rows = [Row(name, unit, tuple(figure(s) for s in summaries)) for name, unit, figure in FIGURES]
    rows = [row for row in rows if any(v is not None for v in row.values)]
    rows += [*_task_rows(paths), *_latency_rows(summaries)]
    return WatchComparison(
        tuple(p.name for p in paths),
        tuple(k.url for k in kept),
        tuple(k.started for k in kept),
        tuple(rows),
        tuple(s.verdict for s in summaries),
        tuple(_warnings(kept, summaries)),
    )
