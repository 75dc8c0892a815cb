"""Engine events and the bus that fans them out.

The engine publishes plain dataclasses; each consumer (session writer, CLI progress, the
window) subscribes with its own thread-safe queue and drains it at its own pace, so no
consumer can slow the loop that takes the measurements.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.engine.base.columns import column
from workbench.engine.base.records import ImportSource, RequestRecord, StartupFacts
from workbench.engine.base.states import ConfigStatus, NoticeLevel, RunStatus, ServerState
from workbench.engine.figures.client_limits import ClientLoad
from workbench.engine.figures.machine_load import MachineLoad
from workbench.engine.figures.predicted import RunPrediction
from workbench.engine.figures.stalls import Stall
from workbench.engine.figures.summaries import ConfigSummary


@dataclass(frozen=True)
class ExperimentStarted:
    name: str
    session_path: str
    n_configs: int
    mode: str  # "managed" or "external"
    t0_ns: int
    server_binary: str = ""  # managed: the llama-server that runs, and how it was found


@dataclass(frozen=True)
class ConfigStarted:
    config: Any  # RunConfig; typed loosely to keep this module free of cycles
    total_requests: int


@dataclass(frozen=True)
class ServerStateChanged:
    config_index: int
    state: ServerState
    detail: str = ""


@dataclass(frozen=True)
class ServerReady:
    config_index: int
    base_url: str
    pid: int | None
    command: list[str]
    log_path: str | None
    facts: StartupFacts
    slots: int | None


@dataclass(frozen=True)
class RequestSubmitted:
    config_index: int
    repeat: int
    index: int
    warmup: bool
    t_ns: int
    # a conversations run's turn (the record's fields): the window colours it by its
    # conversation from the moment it is sent
    conversation_id: str | None = None
    turn: int | None = None
    # when the arrival schedule said it was due (the record's): the Gantt ticks it live
    t_intended_ns: int | None = None


@dataclass(frozen=True)
class FirstToken:
    config_index: int
    repeat: int
    index: int
    t_ns: int


@dataclass(frozen=True)
class TokenChunkArrived:
    config_index: int
    repeat: int
    index: int
    t_ns: int
    text: str
    count: int = 1  # > 1 when a front end's batch merged several chunks
    reasoning: bool = False  # the server's reasoning, not its answer (merged only with its kind)


@dataclass(frozen=True)
class RequestFinished:
    record: RequestRecord


# The samples and the counters are their tables' declarations too (``store/rows.py``).


@dataclass(frozen=True)
class ProcessSample:
    config_index: int = column("config_idx")
    t_ns: int
    rss_bytes: int = column(nullable=True)
    cpu_percent: float = column(nullable=True)


@dataclass(frozen=True)
class GpuSample:
    """GPU memory the server's processes hold (NVIDIA, through NVML)."""

    config_index: int = column("config_idx")
    t_ns: int
    gpu_bytes: int = column(nullable=True)


@dataclass(frozen=True)
class MetricsSample:
    config_index: int = column("config_idx")
    t_ns: int
    values: dict[str, float] = column("values_json", json=True, nullable=True, finite=False)


@dataclass(frozen=True)
class SlotsSample:
    config_index: int = column("config_idx")
    t_ns: int
    slots: list[dict[str, Any]] = column("slots_json", json=True, nullable=True)


@dataclass(frozen=True)
class SlotMatched:
    """The server slot that served a finished request (from the server's log)."""

    config_index: int
    repeat: int
    index: int
    slot: int


@dataclass(frozen=True)
class ClientLoadMeasured:
    """How busy the measuring client was during one repeat (see ``ClientLoad``)."""

    config_index: int
    repeat: int
    load: ClientLoad


@dataclass(frozen=True)
class MachineLoadMeasured:
    """What else used the machine during one repeat (see ``MachineLoad``)."""

    config_index: int
    repeat: int
    load: MachineLoad


@dataclass(frozen=True)
class ServerCounters:
    """The server's /metrics just before and just after one repeat (None: not exposed; in a
    file, also anything but names to numbers)."""

    config_index: int = column("config_idx")
    repeat: int
    before: dict[str, float] | None = column("before_json", json=True, lenient=True, finite=False)
    after: dict[str, float] | None = column("after_json", json=True, lenient=True, finite=False)


@dataclass(frozen=True)
class StallsFound:
    """A configuration's generation stalls, each laid on its cause, once all its requests
    are done (a stall's cause is placed by the server's timings, which come with the end of
    the request that caused it). Published just before ``ConfigFinished``."""

    config_index: int
    stalls: tuple[Stall, ...]


@dataclass(frozen=True)
class ConfigFinished:
    config_index: int
    status: ConfigStatus
    error: str | None = None
    log_tail: str = ""
    summary: ConfigSummary | None = None


@dataclass(frozen=True)
class Notice:
    level: NoticeLevel
    text: str
    config_index: int | None = None


@dataclass(frozen=True)
class ImportedFrom:
    """The session is another tool's result, imported (the first event of such a session)."""

    source: ImportSource


@dataclass(frozen=True)
class ReportedFigures:
    """A configuration's figures as the imported file stated them, under the file's own names
    (vLLM's ``mean_ttft_ms``, ...): kept as they are, beside the figures the workbench
    derives from the file's per-request times."""

    config_index: int
    figures: dict[str, float]


@dataclass(frozen=True)
class PredictionMade:
    """The run's prediction, made from this machine's stored calibrations before its first
    configuration starts (the session keeps it beside what the run then measures)."""

    prediction: RunPrediction


@dataclass(frozen=True)
class ExperimentFinished:
    status: RunStatus
    error: str | None = None


# Events a measuring loop emits per token or per request start: published in batches.
HOT_EVENTS = (RequestSubmitted, FirstToken, TokenChunkArrived)


class BatchedEmit:
    """The emit function of the loop that timestamps token arrivals.

    Publishing takes a lock and a queue put per subscriber, and wakes the threads that
    read those queues; done for every chunk of 64 streams, that work competes with reading
    the next socket. So per-token events are held in a list (an append, no lock) and
    published together every ``interval_s`` by ``run()``. Any other event (a request's end,
    a notice) first publishes what is held, so the order subscribers see never changes.
    Used from the loop's own thread only.
    """

    def __init__(self, publish: Callable[[Any], None], interval_s: float = 0.03) -> None:
        self._publish = publish
        self._held: list[Any] = []
        self.interval_s = interval_s

    def __call__(self, event: Any) -> None:
        if isinstance(event, HOT_EVENTS):
            self._held.append(event)
        else:
            self.flush()
            self._publish(event)

    def flush(self) -> None:
        held, self._held = self._held, []
        for event in held:
            self._publish(event)

    async def run(self) -> None:
        """Publish what is held every ``interval_s`` until cancelled (then once more)."""
        try:
            while True:
                await asyncio.sleep(self.interval_s)
                self.flush()
        finally:
            self.flush()


@dataclass
class Subscription:
    types: tuple[type, ...] | None
    queue: queue.SimpleQueue[Any] = field(default_factory=queue.SimpleQueue)
    ended: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)

    def wait(self, timeout: float) -> None:
        """Sleep up to ``timeout``, cut short once the run behind the bus has ended
        (``EventBus.run_ended``). A follower draining at a steady pace then
        takes the last batch at once instead of at its next turn."""
        self.ended.wait(timeout)

    def drain(self, limit: int | None = None) -> list[Any]:
        """Everything queued so far, without blocking."""
        out = []
        while limit is None or len(out) < limit:
            try:
                out.append(self.queue.get_nowait())
            except queue.Empty:
                break
        return out


class EventBus:
    """Thread-safe fan-out: ``publish`` never blocks on a slow subscriber."""

    def __init__(self) -> None:
        self._subs: list[Subscription] = []
        self._lock = threading.Lock()

    def subscribe(self, *types: type) -> Subscription:
        sub = Subscription(types or None)
        with self._lock:
            self._subs.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)

    def run_ended(self) -> None:
        """Said by a runner once its run has ended and its last event is published: the
        ``wait`` of every subscription there is now returns at once."""
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            sub.ended.set()

    def publish(self, event: Any) -> None:
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            if sub.types is None or isinstance(event, sub.types):
                sub.queue.put(event)
