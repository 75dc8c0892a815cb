"""What the watch window shows, folded from what the engine's watch says (plain Python, no
Qt, unit-testable).

The watch calls back on every poll (ten a second, by default); the window must not paint
that often. ``WatchModel`` keeps what the polls said (the last ``/slots``, the requests
running and waiting, the token counters' rates, the server's memory) and the ``Watched``
the engine keeps its tasks in, and the window's timer draws it a few times a second. The
figures are the engine's: the tasks are ``SlotTasks``', the context a task holds is
``slot_context_share``'s, and the summary is ``summarize``'s.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from workbench.engine.base.words import plural
from workbench.engine.measure.sampler import slot_context_share
from workbench.engine.watch.server_latencies import FACTS, Latency
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.summary import WatchSummary, counter_rate, window_latencies
from workbench.engine.watch.unseen import Unseen
from workbench.engine.watch.watcher import Load, Watched

Series = tuple[list[float], list[float]]

RATE_WINDOW_S = 6.0
"""The token counters move when a prompt or a task ends (measured: ``engine/watch/summary``),
so a rate between two polls means nothing: each rate is over the last few seconds."""
RATE_EVERY_S = 1.0  # a rate's point at most this often


@dataclass(frozen=True)
class TaskBar:
    """One task on its slot's row, in seconds on the watch's clock: its prompt from
    ``start`` to ``decoding`` (or ``end``, where no poll saw it decode), then its decoding
    to ``end`` (the poll that saw it gone, or the last that saw it running). A ``missed``
    task ran between two polls: ``start`` and ``end`` are those polls."""

    slot: int
    task: int
    start: float
    decoding: float | None
    end: float
    prompt: int | None
    cached: int | None
    missed: bool = False

    @classmethod
    def of(cls, task: WatchedTask) -> TaskBar:
        end = task.gone_s if task.gone_s is not None else task.last_s
        return cls(
            task.slot,
            task.task,
            task.seen_s,
            task.decoding_s,
            end,
            task.prompt_tokens,
            task.cached_tokens,
            task.missed,
        )

    def labels(self) -> tuple[str, ...]:
        """The bar's label, longest first: the window shows the longest that fits the bar."""
        if self.missed:
            return (f"task {self.task} · between two polls", str(self.task))
        if self.prompt is None:
            return (f"task {self.task} · prompt", str(self.task))
        short = f"{self.task} · {self.prompt:,}"
        if not self.cached:
            return (f"task {self.task} · {self.prompt:,} in", short, str(self.task))
        return (
            f"task {self.task} · {self.prompt:,} in, {self.cached:,} cached",
            f"{short} ({self.cached:,})",
            short,
            str(self.task),
        )


@dataclass(frozen=True)
class BarSet:
    """Tasks as the Gantt draws them: their bars (for their labels) and the same as arrays,
    in the order they began, so a view takes the tasks up to a time, or those in its range,
    without a loop over thousands of them. ``decoding`` is NaN where no poll saw it."""

    bars: Sequence[TaskBar]
    start: np.ndarray
    decoding: np.ndarray
    end: np.ndarray
    slot: np.ndarray
    missed: np.ndarray

    @classmethod
    def of(cls, bars: Iterable[TaskBar]) -> BarSet:
        ordered = sorted(bars, key=lambda b: b.start)
        return cls(
            ordered,
            np.array([b.start for b in ordered], float),
            np.array([np.nan if b.decoding is None else b.decoding for b in ordered], float),
            np.array([b.end for b in ordered], float),
            np.array([b.slot for b in ordered], int),
            np.array([b.missed for b in ordered], bool),
        )

    def __len__(self) -> int:
        return len(self.bars)

    def until(self, t: float) -> BarSet:
        """The tasks as the watch had seen them by ``t``: those begun, each drawn to ``t``
        at most, decoding only where a poll had seen it decode by then. A ``missed`` task
        was learnt of at the poll that found it gone, its ``end``: it is shown from then,
        not from its ``start``, the poll before, when nothing had seen it yet."""
        n = int(np.searchsorted(self.start, t, side="right"))
        bars: Sequence[TaskBar] = self.bars[:n]
        start, decoding, end = self.start[:n], self.decoding[:n], self.end[:n]
        slot, missed = self.slot[:n], self.missed[:n]
        unknown = np.flatnonzero(missed & (end > t))
        if len(unknown):
            kept = np.ones(n, bool)
            kept[unknown] = False
            bars = _without(self.bars, unknown, n)
            start, decoding, end = start[kept], decoding[kept], end[kept]
            slot, missed = slot[kept], missed[kept]
        with np.errstate(invalid="ignore"):
            decoding = np.where(decoding <= t, decoding, np.nan)
        return BarSet(bars, start, decoding, np.minimum(end, t), slot, missed)


def _without(bars: Sequence[TaskBar], left_out: np.ndarray, n: int) -> list[TaskBar]:
    """The first ``n`` bars but those at ``left_out`` (ascending, a few: the tasks between
    the last two polls), in slices rather than a loop over every bar."""
    kept: list[TaskBar] = []
    begin = 0
    for place in left_out.tolist():
        kept += bars[begin:place]
        begin = place + 1
    kept += bars[begin:n]
    return kept


MAX_POINTS = 20_000
"""A series' points kept (the latest): the window's memory and its frames stay flat over a
watch of hours, as the engine's do; the summary is over the whole watch. A kept watch
replayed (``watch_replay``) keeps them all: its file holds them anyway."""


def _add(series: Series, t: float, value: float, keep_all: bool = False) -> None:
    """A point; a third equal value moves the second's time instead (a gauge that holds
    for an hour is two points, drawn the same). Past ``MAX_POINTS``, the older half goes,
    unless ``keep_all``."""
    times, values = series
    if len(values) >= 2 and values[-1] == value == values[-2]:
        times[-1] = t
        return
    times.append(t)
    values.append(value)
    if len(times) > MAX_POINTS and not keep_all:
        del times[: MAX_POINTS // 2], values[: MAX_POINTS // 2]


class WatchModel:
    """One watch as the window shows it. ``changed``: something to draw since the window
    last drew (it clears it)."""

    keeps_all = False  # every point of a series (a kept watch replayed), not the latest

    def __init__(self) -> None:
        self.watched: Watched | None = None
        self.url = ""
        self.now = 0.0
        self.slots: list[dict] = []  # the last /slots answered
        self.running: Series = ([], [])
        self.waiting: Series = ([], [])
        self.prompt_rate: Series = ([], [])
        self.output_rate: Series = ([], [])
        self.memory: Series = ([], [])  # MiB
        self.kv_use: Series = ([], [])  # percent of the KV cache in use, the server's gauge
        self.last_load: Load | None = None
        self._counters: deque[Load] = deque()
        self._rated_at = -RATE_EVERY_S
        self.summary: WatchSummary | None = None
        self.changed = False

    def started(self, watched: Watched) -> None:
        """The first poll found something to watch: what it found, and where the engine
        keeps the tasks."""
        self.watched = watched
        self.changed = True

    def polled(self, t_s: float, slots: list[dict] | None, load: Load | None) -> None:
        """One poll: its slots (None: off, or not answered) and its ``/metrics`` load."""
        self.now = t_s
        self.changed = True
        if self.watched is not None:
            if self.watched.down_since is not None:
                return  # nothing answered: what it last said stands
            if self.watched.memory_bytes is not None:
                _add(self.memory, t_s, self.watched.memory_bytes / 2**20)
        if slots is not None:
            self.slots = slots
        if load is not None:
            self._fold(load)

    def _fold(self, load: Load) -> None:
        self.last_load = load
        for series, value in (
            (self.running, load.running),
            (self.waiting, load.waiting),
            (self.kv_use, None if load.kv_usage is None else 100 * load.kv_usage),
        ):
            if value is not None:
                _add(series, load.t_s, value, self.keeps_all)
        self._counters.append(load)
        while len(self._counters) > 2 and load.t_s - self._counters[1].t_s >= RATE_WINDOW_S:
            self._counters.popleft()
        first = self._counters[0]
        span = load.t_s - first.t_s
        if span < RATE_EVERY_S or load.t_s - self._rated_at < RATE_EVERY_S:
            return
        self._rated_at = load.t_s
        for name, counter in (("prompt_rate", "prompt_tokens"), ("output_rate", "output_tokens")):
            if (rate := counter_rate(first, load, counter)) is not None:
                self._rate(name, load.t_s, load.t_s - span / 2, rate)

    def _rate(self, name: str, known_s: float, t_s: float, rate: float) -> None:
        """A rate known at ``known_s`` (its last poll), drawn at ``t_s`` (its middle)."""
        _add(getattr(self, name), t_s, rate)

    def ended(self, summary: WatchSummary) -> None:
        self.summary = summary
        self.changed = True

    @property
    def slots_on(self) -> bool:
        return self.watched is None or self.watched.slots_on

    @property
    def metrics_on(self) -> bool:
        return self.watched is None or self.watched.kind is not None

    def bars(self) -> list[TaskBar]:
        """Every task the engine keeps (the last 1,000 ended and those running), a bar each."""
        if self.watched is None:
            return []
        return [TaskBar.of(task) for task in self.watched.tasks.tasks]

    def bar_set(self) -> BarSet:
        """The bars as the Gantt draws them."""
        return BarSet.of(self.bars())

    def slot_count(self) -> int:
        """The rows: every slot the last /slots named, and any an ended task was on."""
        known = [s["id"] for s in self.slots if s.get("id") is not None]
        if self.watched is not None:
            known += [t.slot for t in self.watched.tasks.tasks]
        return max(known, default=-1) + 1

    def context(self) -> dict[int, float]:
        """Each slot's share of its context that its task holds now (0 idle), where the
        server says."""
        shares = {}
        for slot in self.slots:
            share = slot_context_share(slot)
            if slot.get("id") is not None and share is not None:
                shares[slot["id"]] = share
        return shares

    def gaps(self) -> list[tuple[float, float]]:
        """The times the server did not answer (the engine keeps the last 100), each to
        when it answered again or, while it does not, to now."""
        if self.watched is None:
            return []
        return [(g.down_s, self.now if g.up_s is None else g.up_s) for g in self.watched.gaps]

    def fault(self) -> str:
        """The server's last time down, in a line: while it lasts, and once it answers
        again; empty where it never stopped answering."""
        if self.watched is None or not self.watched.gaps:
            return ""
        gap = self.watched.gaps[-1]
        if gap.up_s is None:
            return f"{gap.down_s:.1f} s: the server is down (no answer); the watch goes on"
        return f"{gap.up_s:.1f} s: the server answers again, after {gap.up_s - gap.down_s:.1f} s"

    def heading(self) -> str:
        """The side table's heading over its figures."""
        return "summary" if self.summary is not None else "now"

    def figures(self) -> list[tuple[str, str]]:
        """What the side table shows: the summary once the watch has ended, else now."""
        if self.summary is not None:
            return summary_rows(self.summary)
        watched = self.watched
        if watched is None:
            return []
        tasks = watched.tasks
        rows = [
            ("watched", f"{self.now:.0f} s"),
            ("polls", _polls(watched.polls, watched.unanswered)),
        ]
        if watched.slots_on:
            rows.append(("tasks", f"{tasks.running} running, {tasks.ended:,} ended"))
            if (unseen := watched.ledger.estimate()) is not None:
                rows.append(_unseen_row(unseen))
        load = self.last_load
        if load is not None and load.running is not None:
            rows.append(("running now", f"{load.running:.0f}"))
        if load is not None and load.waiting is not None:
            rows.append(("waiting now", f"{load.waiting:.0f}"))
        for name, series in (("prompt", self.prompt_rate), ("generated", self.output_rate)):
            if series[1]:
                rows.append((f"{name} tok/s", f"{series[1][-1]:,.1f}"))
        span_s, found = window_latencies(watched)
        rows += _latency_rows(found, f"over the last {span_s:.0f} s")
        if watched.memory_bytes is not None:
            rows.append(("server memory", mib(watched.memory_bytes)))
        elif watched.memory_note:
            rows.append(("server memory", watched.memory_note))
        return rows


def _polls(answered: int, unanswered: int) -> str:
    said = f"{answered:,} answered"
    return said + (f", {unanswered:,} not (down or slow)" if unanswered else "")


def mib(count: int) -> str:
    return f"{count / 2**20:,.0f} MiB"


def _latency_rows(found: Iterable[Latency], over: str) -> list[tuple[str, str]]:
    """vLLM's and SGLang's own latency histograms, as percentiles (their buckets' own)."""
    return [
        (
            f"the server's {FACTS[f.fact]}",
            f"p50 {f.p50 * 1000:,.0f}, p90 {f.p90 * 1000:,.0f}, p99 {f.p99 * 1000:,.0f} ms "
            f"of {f.observed:,} {over}",
        )
        for f in found
        if f.p50 is not None and f.p90 is not None and f.p99 is not None
    ]


FEW_SLOTS = 4  # a row each; more share one row


def _busy_rows(s: WatchSummary) -> list[tuple[str, str]]:
    """Each slot's busy share (of the polls), a row each where there are few, else their
    range in one; and how often every slot was busy at once."""
    shares = list(s.busy.values())
    if len(shares) <= FEW_SLOTS:
        rows = [
            (f"slot {slot} busy", f"{share:.0%} of the polls") for slot, share in s.busy.items()
        ]
    else:
        rows = [("slots busy", f"{min(shares):.0%} to {max(shares):.0%} of the polls each")]
    if shares and s.all_busy_share is not None:
        rows.append((f"all {s.slots} busy", f"{s.all_busy_share:.0%} of the polls"))
    return rows


def _unseen_row(unseen: Unseen) -> tuple[str, str]:
    return "tasks unseen", f"≈ {unseen.tasks:,.0f} (estimated from the token counters)"


def summary_rows(s: WatchSummary) -> list[tuple[str, str]]:
    """The summary as the side table shows it: a figure a row, each value short enough for
    a narrow column (the verdict is shown apart, whole)."""
    rows = [("watched", f"{s.seconds:.1f} s"), ("polls", _polls(s.polls, s.unanswered))]
    missed = f" ({s.tasks_missed} between two polls)" if s.tasks_missed else ""
    if s.slots or s.tasks_ended or s.tasks_running:
        rows.append(("tasks", f"{s.tasks_ended:,} ended{missed}, {s.tasks_running} running"))
    if s.unseen is not None:
        rows.append(_unseen_row(s.unseen))
    if s.requests_finished is not None:
        rows.append(("requests finished", f"{s.requests_finished:,.0f} (the server's count)"))
    rows += _busy_rows(s)
    if s.queue_max is not None and s.queued_share is not None:
        rows.append(
            (
                "queue",
                f"p50 {s.queue_p50:.0f}, p90 {s.queue_p90:.0f}, max {s.queue_max:.0f}; "
                f"in {s.queued_share:.0%} of the polls",
            )
        )
    if s.wait_estimate_s is not None:
        wait = f"{s.wait_estimate_s:.2f} s or more (Little's law, estimated)"
        rows.append(("wait in the queue", wait))
    if s.in_server_max is not None:
        rows.append(
            (
                "in the server at once",
                f"p50 {s.in_server_p50:.0f}, p90 {s.in_server_p90:.0f}, "
                f"p99 {s.in_server_p99:.0f}, max {s.in_server_max:.0f}",
            )
        )
    for name, rate in (("prompt", s.prompt_tok_s), ("generated", s.output_tok_s)):
        if rate is not None:
            rows.append((f"{name} tok/s", f"{rate:,.1f} over the watch"))
    rows += _latency_rows(s.server_latencies, "over the watch")
    if s.gaps_count:
        rows.append(("server down", f"{plural(s.gaps_count, 'time')}, {s.down_s:.1f} s in all"))
    if s.memory_max_bytes is not None:
        rows.append(("server memory", f"{mib(s.memory_max_bytes)} at most"))
    elif s.memory_note:
        rows.append(("server memory", s.memory_note))
    return rows
