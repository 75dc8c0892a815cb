"""A kept watch reopened in the watch window and played back (plain Python, no Qt).

``ReplayModel`` is the window's ``WatchModel`` of a watch that has ended: what its file
(``*.watch.sqlite``, ``engine/watch/record``) holds, every task and every ``/metrics``
poll's load, folded once by the live model's own rules (the same series, the same rates
over the last seconds), then shown as the watch had seen it by the time ``seek`` names.
A seek slices arrays made once (never a loop over the watch's thousands of tasks or its
hundred thousand loads), so a frame costs the same an hour into a watch as at its start.

The figures at a time are those the arrays give at once (the requests running and waiting
then, the tasks running and ended by then, the queue's most and share so far, the rates
then and so far); the rest is the whole watch's summary (``summarize``), said so. What a
file does not keep (each slot's context poll by poll, the server's memory over time) is
said in a line, not drawn. The file's address is text to show: nothing here acts on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from workbench.engine.base.words import plural
from workbench.engine.watch import record
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.summary import WatchSummary, counter_rate, summarize
from workbench.engine.watch.watcher import Load
from workbench.ui.watch_model import BarSet, Series, TaskBar, WatchModel, mib, summary_rows

WHOLE_WATCH = "the whole watch"  # the heading row of the figures only the whole watch has
STARTED_FORMAT = "%Y-%m-%dT%H:%M:%S%z"  # as record.Recorder writes it
TENTHS_UNDER_S = 600.0  # a watch shorter than this is timed to the tenth of a second
GAUGES = ("running", "waiting", "kv_use")  # held to the time shown
RATES = ("prompt_rate", "output_rate")  # each shown once its last poll was


def clock(seconds: float, tenths: bool = False) -> str:
    """A time into the watch as a player shows it: ``m:ss`` or ``h:mm:ss`` (``m:ss.s``
    with ``tenths``)."""
    if tenths:  # rounded to whole tenths first: 59.96 s is 1:00.0, never 0:60.0
        hours, rest = divmod(round(max(0.0, seconds) * 10), 36_000)
        minutes, rest = divmod(rest, 600)
        said = f"{rest // 10:02}.{rest % 10}"
        return f"{hours}:{minutes:02}:{said}" if hours else f"{minutes}:{said}"
    hours, rest = divmod(max(0, int(seconds)), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


def _started(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, STARTED_FORMAT)
    except ValueError:
        return None


def _most_so_far(values: np.ndarray) -> np.ndarray:
    return np.fmax.accumulate(values) if len(values) else values


@dataclass(frozen=True)
class _Loads:
    """Every ``/metrics`` poll's load as arrays (NaN where the server gave none), with what
    the figures need so far at each poll, so that a time's figures are a look-up."""

    t: np.ndarray
    running: np.ndarray
    waiting: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    kv: np.ndarray  # percent
    queue_said: np.ndarray  # the polls that gave the queue, up to each
    queued: np.ndarray  # of those, the polls with a queue
    queue_max: np.ndarray  # the deepest queue so far (NaN: none given yet)
    at_once_max: np.ndarray  # the most requests in the server at once so far
    kv_max: np.ndarray

    @classmethod
    def of(cls, loads: list[Load]) -> _Loads:
        def column(name: str) -> np.ndarray:
            values = (getattr(load, name) for load in loads)
            return np.fromiter((np.nan if v is None else v for v in values), float, len(loads))

        running, waiting, kv = column("running"), column("waiting"), column("kv_usage") * 100
        return cls(
            column("t_s"),
            running,
            waiting,
            column("prompt_tokens"),
            column("output_tokens"),
            kv,
            np.cumsum(~np.isnan(waiting)),
            np.cumsum(np.nan_to_num(waiting) > 0),
            _most_so_far(waiting),
            _most_so_far(running + waiting),
            _most_so_far(kv),
        )

    def load(self, index: int) -> Load:
        def value(column: np.ndarray) -> float | None:
            return None if np.isnan(column[index]) else float(column[index])

        return Load(
            float(self.t[index]),
            value(self.running),
            value(self.waiting),
            value(self.prompt),
            value(self.output),
        )


class ReplayModel(WatchModel):
    """A kept watch as the window shows it at ``now`` (``seek``), with its ``path``, its
    summary (``whole``), its length (``end_s``) and the SLOs it was given (``slos``).
    ``read`` makes one from a file, off the GUI thread; it opens at its end, as the live
    window shows a watch once it has ended."""

    keeps_all = True

    def __init__(
        self,
        path: Path,
        kept: record.WatchFile,
        tasks: list[WatchedTask],
        loads: Iterable[Load],
    ) -> None:
        super().__init__()
        self.path = path
        self.url = kept.url  # shown, never followed
        self.started_at = kept.started
        self.watched = kept.watched
        self.whole: WatchSummary = summarize(kept.watched)
        self.slos = kept.slos  # judged on the whole watch, as its summary is
        self._all = BarSet.of(TaskBar.of(task) for task in tasks)
        self._ended_at = np.sort([t.gone_s for t in tasks if t.gone_s is not None])
        self._missed_at = np.sort([t.gone_s for t in tasks if t.missed and t.gone_s is not None])
        self._rates: dict[str, list[tuple[float, float, float]]] = {name: [] for name in RATES}
        every = []
        for load in loads:
            self._fold(load)  # the live model's series and rates, every point kept
            every.append(load)
        self._loads = _Loads.of(every)
        self._series = {name: _arrays(getattr(self, name)) for name in GAUGES}
        self._rate_series = {
            name: np.array(points, float).reshape(-1, 3) for name, points in self._rates.items()
        }
        self.end_s = max(
            [self.watched.seconds, *self._loads.t[-1:], *self._all.end.tolist()], default=0.0
        )
        self._slots = max([*self.watched.busy, *self._all.slot.tolist()], default=-1) + 1
        self.shown = self._all
        self.seek(self.end_s)

    @classmethod
    def read(cls, path: Path) -> ReplayModel:
        """The kept watch at ``path``, every value checked (``record``'s reading): a damaged
        file, a newer one or one that is no watch raises ``record.WatchFileError``."""
        kept, ended, loads = record.read_whole(path)
        return cls(path, kept, [*ended, *kept.watched.tasks.in_flight], loads)

    def _rate(self, name: str, known_s: float, t_s: float, rate: float) -> None:
        """Each rate point kept with when its last poll was, so that a time shows only the
        rates the live window had drawn by then."""
        self._rates[name].append((known_s, t_s, rate))

    # -- a time in the watch ----------------------------------------------------------------
    @property
    def at_end(self) -> bool:
        return self.now >= self.end_s

    def seek(self, t_s: float) -> None:
        """Show the watch as it was ``t_s`` seconds in (kept within its length)."""
        t_s = min(max(0.0, t_s), self.end_s)
        self.now = t_s
        for name in GAUGES:
            times, values = self._series[name]
            n = int(np.searchsorted(times, t_s, side="right"))
            if 0 < n < len(times) and times[n - 1] < t_s:  # it holds until its next point
                setattr(
                    self, name, (np.append(times[:n], t_s), np.append(values[:n], values[n - 1]))
                )
            else:
                setattr(self, name, (times[:n], values[:n]))
        for name in RATES:
            points = self._rate_series[name]
            n = int(np.searchsorted(points[:, 0], t_s, side="right"))
            setattr(self, name, (points[:n, 1], points[:n, 2]))
        self.shown = self._all.until(t_s)
        self.changed = True

    # -- what the views ask -----------------------------------------------------------------
    def bars(self) -> list[TaskBar]:
        return list(self.shown.bars)

    def bar_set(self) -> BarSet:
        return self.shown

    def task_count(self) -> int:
        """Every task the file holds: those ended, and those running when it ended."""
        return len(self._all)

    def slot_count(self) -> int:
        """The rows: every slot the watch saw, from the start (the rows do not move)."""
        return self._slots

    def context(self) -> dict[int, float]:
        return {}  # not kept: ``unkept`` says so

    def gaps(self) -> list[tuple[float, float]]:
        if self.watched is None:
            return []
        return [
            (gap.down_s, min(self.end_s if gap.up_s is None else gap.up_s, self.now))
            for gap in self.watched.gaps
            if gap.down_s <= self.now
        ]

    def fault(self) -> str:
        return ""  # its red bands and the figures say when the server was down

    def heading(self) -> str:
        return "summary" if self.at_end else f"at {self.clock(self.now)}"

    def clock(self, t_s: float) -> str:
        return clock(t_s, tenths=self.end_s < TENTHS_UNDER_S)

    def time_of_day(self, t_s: float) -> str:
        """The time of day ``t_s`` into the watch, where its file says when it began."""
        began = _started(self.started_at)
        return "" if began is None else (began + timedelta(seconds=t_s)).strftime("%H:%M:%S")

    def describe(self) -> str:
        """The watch in a line: its address (text, never followed), when, how long."""
        began = _started(self.started_at)
        when = began.strftime("%Y-%m-%d %H:%M") if began is not None else self.started_at
        return f"{self.url}, from {when}, {self.clock(self.end_s)} watched"

    def unkept(self) -> str:
        """What the live window drew that a kept watch does not hold, in a line ('' if
        nothing)."""
        whole = self.whole
        parts = []
        if self.slots_on:
            parts.append("each slot's context held, poll by poll")
        if whole.memory_max_bytes is not None:
            most = mib(whole.memory_max_bytes)
            parts.append(f"the server's memory over time (only its most: {most})")
        if whole.server_latencies:
            parts.append("the server's latency percentiles minute by minute (only the watch's)")
        if whole.gaps_count > len(whole.gaps):
            early = whole.gaps_count - len(whole.gaps)
            parts.append(f"the first {plural(early, 'time')} the server was down (counted)")
        return "not kept in the file, so not drawn: " + "; ".join(parts) if parts else ""

    def figures(self) -> list[tuple[str, str]]:
        """At the end, the summary, as the live window shows it once the watch has ended;
        before, the figures at ``now``, then the whole watch's under a heading row (its
        value empty)."""
        if self.at_end:
            return summary_rows(self.whole)
        return [*self._figures_now(), (WHOLE_WATCH, ""), *summary_rows(self.whole)]

    def _figures_now(self) -> list[tuple[str, str]]:
        t, loads = self.now, self._loads
        rows = [("watched", f"{self.clock(t)} of {self.clock(self.end_s)}")]
        if self.slots_on:
            ended = int(np.searchsorted(self._ended_at, t, side="right"))
            missed = int(np.searchsorted(self._missed_at, t, side="right"))
            between = f" ({missed:,} between two polls)" if missed else ""
            rows.append(("tasks", f"{len(self.shown) - ended} running, {ended:,} ended{between}"))
        polled = int(np.searchsorted(loads.t, t, side="right"))
        if polled:
            rows += self._load_rows(polled - 1)
        if down := self.gaps():
            gap = next(g for g in reversed(self.watched.gaps) if g.down_s <= t)
            said = (
                f"since {self.clock(gap.down_s)}"
                if gap.up_s is None or gap.up_s > t
                else f"{plural(len(down), 'time')} so far"
            )
            rows.append(("server down", f"{said}, {sum(u - d for d, u in down):.1f} s in all"))
        return rows

    def _load_rows(self, last: int) -> list[tuple[str, str]]:
        """The figures of the ``/metrics`` polls up to the ``last``."""
        loads, rows = self._loads, []
        for name, values in (("running then", loads.running), ("waiting then", loads.waiting)):
            if not np.isnan(values[last]):
                rows.append((name, f"{values[last]:.0f}"))
        if said := int(loads.queue_said[last]):
            share = loads.queued[last] / said
            deepest = f"max {loads.queue_max[last]:.0f}; in {share:.0%} of the polls"
            rows.append(("queue so far", deepest))
        if not np.isnan(loads.at_once_max[last]):
            rows.append(("in the server at once", f"max {loads.at_once_max[last]:.0f} so far"))
        first, then = loads.load(0), loads.load(last)
        for name, series, counter in (
            ("prompt", self.prompt_rate, "prompt_tokens"),
            ("generated", self.output_rate, "output_tokens"),
        ):
            said_rates = [f"{series[1][-1]:,.1f} then"] if len(series[1]) else []
            if (rate := counter_rate(first, then, counter)) is not None:
                said_rates.append(f"{rate:,.1f} so far")
            if said_rates:
                rows.append((f"{name} tok/s", ", ".join(said_rates)))
        if not np.isnan(loads.kv_max[last]):
            now = "" if np.isnan(loads.kv[last]) else f"{loads.kv[last]:.0f}% then, "
            rows.append(("KV cache in use", f"{now}{loads.kv_max[last]:.0f}% at most so far"))
        return rows


def _arrays(series: Series) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(series[0], float), np.asarray(series[1], float)
