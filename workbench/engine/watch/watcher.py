"""Watching a running server: its ``/slots`` and ``/metrics`` polled together at an interval,
each answer bounded in bytes and time; the slots turned into tasks (``slot_tasks``), the
metrics into the requests running and waiting and the token counters. The workbench sends
no load.

Either endpoint may be off (llama-server: ``--no-slots``; ``/metrics`` only with
``--metrics``; vLLM and SGLang have no ``/slots``): the watch keeps what the other gives,
and refuses an address that gives neither. A poll that takes more than half the interval
stretches the next wait to twice what it took (a slow server is not polled harder); a
server that stops answering mid-watch is counted down, not ended on.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol
from urllib.parse import urlunsplit

import psutil

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.server_kinds import (
    Buckets,
    ServerKind,
    detect,
    parse_histograms,
    share,
    total,
)
from workbench.engine.measure.sampler import ProcessProbe, metrics_of, normalise_slots
from workbench.engine.net.bounded_http import Answer, get
from workbench.engine.net.http_stream import ConnectFailed
from workbench.engine.server.external import parse_base_url
from workbench.engine.watch.server_process import server_probe
from workbench.engine.watch.slot_tasks import SlotTasks, WatchedTask
from workbench.engine.watch.unseen import COUNTERS, TOKENS, Counters, TokenLedger

MAX_BYTES = 4 * 1024 * 1024  # a /slots of 1,024 slots, a /metrics page: well under 1 MiB
DEADLINE_S = 2.0  # one poll's answer, whole
MIN_INTERVAL_S, MAX_INTERVAL_S = 0.02, 60.0  # between polls, as a user may ask
INTERVAL_S = 0.1  # between polls where none is asked for
WATCH_FOR_S = (1.0, 7 * 24 * 3600.0)  # a watch's length, where one is given
MEMORY_EVERY_S = 1.0  # the server's memory, read at most this often
MAX_SLOTS = 1024  # slots counted: more is no llama-server's /slots
GAPS_KEPT = 100  # the most recent times the server did not answer; all are counted
WINDOW_S = 60.0  # the servers' own latency histograms live: over the last minute
WINDOW_EVERY_S = 1.0  # a snapshot of them kept at most this often


def interval_from_text(text: str) -> float:
    """The seconds between polls as typed (``--interval``, the window's field); a
    ValueError says the bounds."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S:
        raise ValueError(
            f"must be seconds from {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g}, got {text!r}"
        )
    return value


class WatchError(WorkbenchError):
    """The address cannot be watched: nothing answers, neither endpoint, a refused key."""


@dataclass(frozen=True)
class Load:
    """One ``/metrics`` poll at ``t_s``: the requests running and waiting, the prompt and
    generated token counters, the share of the KV cache in use, 0 to 1, the counters of
    prompt tokens found cached (where ``prompt_tokens`` leaves them out), of finished
    requests and of the seconds prompts and answers took (None where the server gives
    none)."""

    t_s: float
    running: float | None
    waiting: float | None
    prompt_tokens: float | None
    output_tokens: float | None
    kv_usage: float | None = None
    cached_tokens: float | None = None
    requests: float | None = None
    prompt_seconds: float | None = None
    output_seconds: float | None = None


@dataclass(frozen=True)
class Gap:
    """A time the server did not answer a poll (down, restarting, or slower than a poll's
    deadline): from the first poll it left unanswered to the first it answered again
    (None: the watch ended first)."""

    down_s: float
    up_s: float | None = None


@dataclass
class Watched:
    """What a watch saw: its tasks and polls (answered and not), for each slot the polls
    that showed it busy and those that showed every slot busy, and of the ``/metrics``
    polls how often each queue depth, each number of requests in the server (running and
    waiting) and each percent of the KV cache in use was seen, and the first and last;
    ``gaps`` keeps the last ``GAPS_KEPT`` times the server did not answer (``gaps_count``
    and ``down_s`` count them all). Its memory does not grow with its length: counts, not
    series. Its times are seconds after ``started_ns`` (``time.perf_counter_ns``, the clock
    a run's records keep). ``kind``: the server family its metrics name (None: none)."""

    started_ns: int = 0
    tasks: SlotTasks = field(default_factory=SlotTasks)
    polls: int = 0
    unanswered: int = 0
    busy: dict[int, int] = field(default_factory=dict)
    all_busy: int = 0
    queue: Counter[int] = field(default_factory=Counter)
    at_once: Counter[int] = field(default_factory=Counter)
    kv_use: Counter[int] = field(default_factory=Counter)  # percent of the KV cache in use
    first: Load | None = None
    last: Load | None = None
    slots_on: bool = True
    kind: ServerKind | None = None
    seconds: float = 0.0
    memory_bytes: int | None = None  # the server process's, at the last reading
    memory_max_bytes: int | None = None
    memory_note: str = ""  # why the server's memory is not watched, where it is not
    histograms_first: dict[str, Buckets] = field(default_factory=dict)
    histograms_last: dict[str, Buckets] = field(default_factory=dict)
    histograms_at: float = 0.0
    window: deque[tuple[float, dict[str, Buckets]]] = field(
        default_factory=lambda: deque(maxlen=round(WINDOW_S / WINDOW_EVERY_S) + 1)
    )
    gaps: deque[Gap] = field(default_factory=lambda: deque(maxlen=GAPS_KEPT))
    gaps_count: int = 0
    down_s: float = 0.0
    ledger: TokenLedger = field(default_factory=TokenLedger)
    requests_finished: float | None = None  # the server's own count over the watch
    requests_counter: float | None = None  # its counter at the last poll that gave it

    def snapshot(self) -> Watched:
        """A copy another thread may read (a keeper's save) while the watch goes on
        changing this one: its own counts, gaps, histograms and tasks."""
        kept = own_containers(self)
        kept.tasks = own_containers(self.tasks)
        kept.ledger = own_containers(self.ledger)
        return kept

    @property
    def down_since(self) -> float | None:
        """When the server stopped answering, while it has not answered since."""
        return self.gaps[-1].down_s if self.gaps and self.gaps[-1].up_s is None else None

    def answered(self, t_s: float, answered: bool) -> None:
        """Whether the poll at ``t_s`` was answered: a gap begins or ends (the tasks are
        told, as a restarted server's slots start again)."""
        down = self.down_since
        if not answered and down is None:
            self.gaps.append(Gap(t_s))
            self.gaps_count += 1
            self.tasks.gap(t_s)
        elif answered and down is not None:
            self.gaps[-1] = replace(self.gaps[-1], up_s=t_s)
            self.down_s += t_s - down

    def histograms(self, found: dict[str, Buckets] | None, t_s: float = 0.0) -> None:
        """One poll's latency histograms at ``t_s`` (the server's own, those its kind names;
        a page's others are not kept): the first and the last kept, and one a second of
        the last ``WINDOW_S`` (what ``window_histograms`` differences)."""
        names = {n for _, names in (self.kind.latencies if self.kind else ()) for n in names}
        found = {name: buckets for name, buckets in (found or {}).items() if name in names}
        if found:
            self.histograms_first = self.histograms_first or found
            self.histograms_last, self.histograms_at = found, t_s
            if not self.window or t_s - self.window[-1][0] >= WINDOW_EVERY_S:
                self.window.append((t_s, found))

    def window_histograms(self) -> tuple[float, dict[str, Buckets], dict[str, Buckets]]:
        """The seconds the live window spans, and its oldest and newest histograms (the
        newest is the last poll's)."""
        if not self.window:
            return 0.0, {}, {}
        oldest_s, oldest = self.window[0]
        return self.histograms_at - oldest_s, oldest, self.histograms_last

    def busy_share(self, slot: int) -> float:
        """The share of answered polls that showed ``slot`` busy."""
        return self.busy.get(slot, 0) / max(1, self.polls)

    def count(self, t_s: float, slots: list[dict] | None, metrics: dict | None) -> Load | None:
        """One poll's answers (None: not given, or not answered); the load it read."""
        self.answered(t_s, slots is not None or metrics is not None)
        if slots is None and metrics is None:
            self.unanswered += 1
            return None
        self.polls += 1
        if slots is not None:
            busy = [s["id"] for s in slots if s.get("is_processing") and s.get("id") is not None]
            for slot in slots:  # every slot listed, so an idle one counts as 0 % busy
                if slot.get("id") is not None and len(self.busy) < MAX_SLOTS:
                    self.busy.setdefault(slot["id"], 0)
            for slot in busy:
                self.busy[slot] = self.busy.get(slot, 0) + 1
            self.all_busy += bool(slots) and len(busy) == len(slots)
        if metrics is None or self.kind is None:
            return None
        k = self.kind
        load = Load(
            t_s,
            total(metrics, k.running),
            total(metrics, k.waiting),
            total(metrics, k.prompt_tokens),
            total(metrics, k.output_tokens),
            share(metrics, k.kv_usage),
            total(metrics, k.cached_tokens),
            total(metrics, k.requests),
            total(metrics, k.prompt_seconds),
            total(metrics, k.output_seconds),
        )
        return self.count_load(load)

    def count_load(self, load: Load) -> Load:
        """One ``/metrics`` poll's load into the counts (a kept watch's too, read back)."""
        if load.kv_usage is not None and 0 <= load.kv_usage <= 1:
            self.kv_use[round(load.kv_usage * 100)] += 1
        if load.waiting is not None:
            self.queue[round(load.waiting)] += 1
            if load.running is not None:
                self.at_once[round(load.running + load.waiting)] += 1
        if load.requests is not None:
            before, self.requests_counter = self.requests_counter, load.requests
            if before is not None:  # a counter that fell is a restarted server's, from 0
                grown = load.requests - before if load.requests >= before else load.requests
                self.requests_finished = (self.requests_finished or 0.0) + grown
            elif self.requests_finished is None:
                self.requests_finished = 0.0
        self.first = self.first or load
        self.last = load
        return load


def own_containers(thing: Any) -> Any:
    """A shallow copy of ``thing`` with its own dicts, lists, sets and deques: what they
    hold (tasks, loads, gaps, histograms) is frozen or replaced whole, never changed."""
    copied = copy.copy(thing)
    for name, value in vars(thing).items():
        if isinstance(value, dict | list | set | deque):
            setattr(copied, name, copy.copy(value))
    return copied


def _slots_of(answer: Answer | None) -> list[dict] | None:
    if answer is None or answer.status != 200:
        return None
    try:
        data = json.loads(answer.body)
    except ValueError:
        return None
    return normalise_slots(data) if isinstance(data, list) else None


@dataclass(frozen=True)
class Endpoints:
    """Where the watch asks for ``/slots`` and ``/metrics``: each a base URL and a path.
    Behind a proxy (llama-swap, LiteLLM) they are the server's own, not the proxy's."""

    slots: tuple[str, str]
    metrics: tuple[str, str]

    @classmethod
    def of(
        cls, base_url: str, slots_url: str | None = None, metrics_url: str | None = None
    ) -> Endpoints:
        return cls(
            _split(slots_url) or (base_url, "/slots"), _split(metrics_url) or (base_url, "/metrics")
        )

    def describe(self, base_url: str) -> str:
        """Where each endpoint is read, where not at ``base_url``."""
        moved = [
            f"{name} from {base}{path}"
            for name, (base, path), usual in (
                ("slots", self.slots, "/slots"),
                ("metrics", self.metrics, "/metrics"),
            )
            if (base, path) != (base_url, usual)
        ]
        return "; ".join(moved)


def _split(url: str | None) -> tuple[str, str] | None:
    """A full URL as the base ``get`` connects to and the path it asks for."""
    if url is None:
        return None
    parts = parse_base_url(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return urlunsplit((parts.scheme, parts.netloc, "", "", "")), path


async def _both(
    endpoints: Endpoints, headers: dict[str, str], slots: bool = True, metrics: bool = True
) -> tuple[Answer | None, Answer | None]:
    """``/slots`` and ``/metrics`` asked at once (each only where wanted)."""

    async def one(where: tuple[str, str], wanted: bool) -> Answer | None:
        base, path = where
        return await get(base, path, headers, MAX_BYTES, DEADLINE_S) if wanted else None

    found = await asyncio.gather(one(endpoints.slots, slots), one(endpoints.metrics, metrics))
    return found[0], found[1]


async def first_poll(
    base_url: str, headers: dict[str, str], endpoints: Endpoints | None = None
) -> tuple[list[dict] | None, dict[str, float] | None, ServerKind | None, dict[str, Buckets]]:
    """The first ``/slots`` and ``/metrics`` (None: off), the server family its metrics
    name, or a ``WatchError`` that says in one line why the address cannot be watched."""
    try:
        slots_answer, metrics_answer = await _both(endpoints or Endpoints.of(base_url), headers)
    except ConnectFailed as exc:
        raise WatchError(f"nothing answers at {base_url}: {exc}") from None
    statuses = [a.status for a in (slots_answer, metrics_answer) if a is not None]
    if any(status in (401, 403) for status in statuses):
        raise WatchError(f"{base_url} refused the request ({statuses}): check the API key")
    slots, metrics = _slots_of(slots_answer), metrics_of(metrics_answer)
    kind = detect(metrics) if metrics is not None else None
    if kind is None:
        metrics = None  # a page of no server family's names tells nothing of its load
    if slots is None and metrics is None:
        said = ", ".join(
            f"{path} {'no answer' if a is None else a.status}"
            for path, a in (("/slots", slots_answer), ("/metrics", metrics_answer))
        )
        raise WatchError(
            f"{base_url} gives neither llama-server's /slots nor an LLM server's /metrics "
            f"({said}): start llama-server with --slots or --metrics, or point at the "
            "server itself"
        )
    return slots, metrics, kind, _histograms_of(metrics_answer) if metrics is not None else {}


def _histograms_of(answer: Answer | None) -> dict[str, Buckets]:
    """A ``/metrics`` answer's latency histograms (none where it has no page of them)."""
    if answer is None or answer.status != 200:
        return {}
    try:
        return parse_histograms(answer.text)
    except ValueError:
        return {}


class Keeper(Protocol):
    """Where a watch is kept as it goes (``record.Recorder``)."""

    def task(self, task: WatchedTask) -> None: ...
    def load(self, load: Load) -> None: ...
    def save(self, watched: Watched, now: bool = False) -> None: ...


async def watch(
    base_url: str,
    interval_s: float,
    duration_s: float | None,
    headers: dict[str, str] | None = None,
    on_ended: Callable[[WatchedTask], None] = lambda task: None,
    stop: asyncio.Event | None = None,
    on_poll: Callable[[float, list[dict] | None, Load | None], None] = lambda t, s, m: None,
    on_start: Callable[[Watched], None] = lambda watched: None,
    endpoints: Endpoints | None = None,
    keeper: Keeper | None = None,
) -> Watched:
    """Poll ``base_url`` every ``interval_s`` for ``duration_s`` (None: until ``stop``),
    telling ``on_start`` what the first poll found, ``on_poll`` each poll's slots and load
    and ``on_ended`` each task a poll showed ended. ``endpoints``: where to ask, where not
    at ``base_url`` (a proxy's server); ``keeper``: where to keep it as it goes."""
    headers = headers or {}
    endpoints = endpoints or Endpoints.of(base_url)
    interval_s = max(MIN_INTERVAL_S, interval_s)
    stop = stop or asyncio.Event()
    watched = Watched(time.perf_counter_ns())
    slots, metrics, watched.kind, histograms = await first_poll(base_url, headers, endpoints)
    watched.slots_on, metrics_on = slots is not None, metrics is not None
    probe, watched.memory_note = server_probe(endpoints.slots[0])
    on_start(watched)
    wait_s, weighed_s = interval_s, -MEMORY_EVERY_S
    while True:
        now = (time.perf_counter_ns() - watched.started_ns) / 1e9
        if probe is not None and now - weighed_s >= MEMORY_EVERY_S:
            weighed_s = now
            probe = _weigh(watched, probe)
        load = watched.count(now, slots, metrics)
        on_poll(now, slots, load)
        watched.histograms(histograms, now)
        ended = watched.tasks.observe(now, slots) if slots is not None else []
        for task in ended:
            on_ended(task)
            if keeper is not None:
                keeper.task(task)
        # a poll without /slots (a gap, or /slots did not answer) ends the ledger's chain:
        # what ran then was not seen to end, and would be read as unseen tasks
        counters = _counters(load) if slots is not None else None
        watched.ledger.poll(now, counters, ended, watched.tasks.in_flight)
        if keeper is not None:
            if load is not None:
                keeper.load(load)
            keeper.save(watched)
        if duration_s is not None and now + wait_s > duration_s:
            break
        try:
            await asyncio.wait_for(stop.wait(), wait_s)
            break
        except TimeoutError:
            pass
        asked = time.perf_counter()
        slots, metrics, histograms = await _poll(
            endpoints,
            headers,
            watched.slots_on,
            metrics_on,
            bool(watched.kind and watched.kind.latencies),
        )
        took = time.perf_counter() - asked
        wait_s = max(interval_s - took, 2 * took if took > interval_s / 2 else 0.0)
    watched.seconds = (time.perf_counter_ns() - watched.started_ns) / 1e9
    return watched


def _counters(load: Load | None) -> Counters | None:
    """A poll's counters, as the ledger of unseen tasks reads them (None where the server
    gives not all its token counters)."""
    if load is None:
        return None
    found = {name: getattr(load, name) for name in COUNTERS}
    return None if any(found[name] is None for name in TOKENS) else found


def _weigh(watched: Watched, probe: ProcessProbe) -> ProcessProbe | None:
    """The server's memory now, kept in ``watched``; None once the process is gone (a
    restarted server is another process: its memory is not followed)."""
    try:
        memory, _ = probe.sample()
    except psutil.Error:
        watched.memory_note = "the server's process ended: its memory is no longer watched"
        return None
    watched.memory_bytes = memory
    watched.memory_max_bytes = max(memory, watched.memory_max_bytes or 0)
    return probe


async def _poll(
    endpoints: Endpoints,
    headers: dict[str, str],
    slots_on: bool,
    metrics_on: bool,
    latencies: bool,
) -> tuple[list[dict] | None, dict[str, Any] | None, dict[str, Buckets]]:
    """One poll mid-watch: each endpoint's answer (None where it gave none), and the
    metrics' latency histograms where the server has them."""
    try:
        slots_answer, metrics_answer = await _both(endpoints, headers, slots_on, metrics_on)
    except ConnectFailed:
        return None, None, {}
    histograms = _histograms_of(metrics_answer) if latencies else {}
    return _slots_of(slots_answer), metrics_of(metrics_answer), histograms
