"""What the window shows, folded from engine events (plain Python, no Qt, unit-testable).

The views never look at events themselves: the event pump hands each batch to ``RunModel``,
which updates per-request state, samples and results and says what changed, so each view
redraws only when its part changed, at the pump's rate and never per token.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from workbench.engine.base.records import RequestKey, RequestRecord, StartupFacts
from workbench.engine.base.server_kinds import ServerKind, describe, detect
from workbench.engine.base.states import RequestState, RunStatus, ServerState
from workbench.engine.events import (
    ConfigFinished,
    ConfigStarted,
    ExperimentFinished,
    ExperimentStarted,
    FirstToken,
    GpuSample,
    MetricsSample,
    Notice,
    PredictionMade,
    ProcessSample,
    RequestFinished,
    RequestSubmitted,
    ServerReady,
    ServerStateChanged,
    SlotMatched,
    SlotsSample,
    StallsFound,
    TokenChunkArrived,
)
from workbench.engine.figures.conversation_cache import TurnCache, turn_caches
from workbench.engine.figures.footprint import predicted_footprint_mib
from workbench.engine.figures.per_request import request_metrics
from workbench.engine.figures.predicted import RunPrediction
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.measure.sampler import slot_context_share

NS = 1e9


@dataclass(frozen=True)
class StallView:
    """One stall of a request's stream, in seconds since the start, with what caused it:
    the number of the request whose prompt was processed then (None: no prompt did, or
    ``unknown``: the server gave no timings to tell)."""

    start: float
    end: float
    cause: int | None = None
    unknown: bool = False

    def words(self) -> str:
        """``froze 9.8 s: prompt of #4``, as the stream pane and the Gantt's tip say it."""
        froze = f"froze {self.end - self.start:.1f} s"
        if self.cause is not None:
            return f"{froze}: prompt of #{self.cause}"
        return f"{froze}: cause unknown" if self.unknown else froze


@dataclass
class RequestView:
    """One measured request as the grid and the Gantt show it."""

    config_index: int
    repeat: int
    index: int
    row: int
    state: RequestState = RequestState.QUEUED
    t_submit: float | None = None
    # when its arrival schedule said it was due (None for a burst's: all due at once)
    t_intended: float | None = None
    t_prefill: float | None = None  # live: when /slots first showed a slot prefilling it
    t_first: float | None = None
    t_last: float | None = None
    t_done: float | None = None
    text: str = ""
    pending_text: str = ""
    # What the server streamed as reasoning, apart from the answer: the pane dims it.
    reasoning: str = ""
    pending_reasoning: str = ""
    chunks: int = 0
    output_tokens: int | None = None
    ttft_s: float | None = None
    queue_s: float | None = None
    prefill_s: float | None = None
    decode_tok_s: float | None = None
    error: str | None = None
    # The server slot that served it: guessed live from /slots, then named by the server's
    # log (exact) once the request is done.
    slot: int | None = None
    # A conversations run's: the conversation ("r1u2"), its user as the window names it
    # ("u2"), the turn (from 1), and once the turn is done, how it found its history in the
    # server's cache (turn 2 on, where counted).
    conversation_id: str | None = None
    user: str | None = None
    turn: int | None = None
    cache: TurnCache | None = None
    # Its stream's stalls, once its configuration is done (their causes are known then).
    stalls: list[StallView] = field(default_factory=list)

    @property
    def key(self) -> RequestKey:
        return RequestKey(self.config_index, self.repeat, self.index)

    @property
    def number(self) -> int:
        """The request's number in every view: its row from 1, the place among the measured
        requests in the order they were sent (as ``request_numbers`` gives a stored one)."""
        return self.row + 1

    @property
    def longest_stall(self) -> StallView | None:
        return max(self.stalls, key=lambda s: s.end - s.start, default=None)

    def live_rate(self, now: float) -> float | None:
        """The catalogue's live decode rate: chunks after the first per second since the
        first token, an estimate until the server's count gives ``decode_tok_s`` (then
        None), and None before two chunks."""
        if self.decode_tok_s is not None or self.t_first is None or self.chunks < 2:
            return None
        end = self.t_last if self.state.finished else now
        span = (end or now) - self.t_first
        return (self.chunks - 1) / span if span > 0 else None


def conversation_user(conversation_id: str) -> str:
    """A conversation as the window names it: its user (``u2`` of ``r1u2``), so every
    repeat's second user shares a name and a colour; an id of another shape names itself."""
    match = re.fullmatch(r"r\d+(u\d+)", conversation_id)
    return match.group(1) if match else conversation_id


@dataclass
class Changes:
    requests: set[RequestKey] = field(default_factory=set)
    layout: bool = False  # requests were added: the grid re-lays itself out
    gantt: bool = False
    samples: bool = False
    server: bool = False
    results: bool = False
    finished: bool = False
    prediction: bool = False  # the run's prediction came (or went, with a new run)

    def __bool__(self) -> bool:
        return bool(
            self.requests
            or self.layout
            or self.gantt
            or self.samples
            or self.server
            or self.results
            or self.finished
            or self.prediction
        )


@dataclass
class ServerView:
    config_index: int = -1
    label: str = ""
    state: ServerState = ServerState.IDLE
    detail: str = ""
    facts: StartupFacts = field(default_factory=StartupFacts)
    command: list[str] = field(default_factory=list)
    log_path: str | None = None
    log_tail: str = ""  # as the session kept it, when the log file is not ours to read
    base_url: str = ""
    slots: int | None = None
    # Which kind of server its /metrics names say it is (once, from the first sample that
    # tells), what of the plotted facts they give, and whether /slots answered.
    kind: ServerKind | None = None
    gives: tuple[str, ...] = ()
    metrics_seen: bool = False
    slots_seen: bool = False

    @property
    def kind_text(self) -> str:
        """What the server panel says of the server's kind; empty before its first sample."""
        if not (self.metrics_seen or self.slots_seen):
            return ""
        return describe(self.kind, self.gives, self.slots_seen)


class RunModel:
    """The state of one run (or one replayed session), updated batch by batch."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.name = ""
        self.session_path = ""
        self.server_binary = ""  # the llama-server a managed run uses, and how it was found
        self.mode = "managed"  # or "external": a server started elsewhere
        self.status: RunStatus | None = None  # None: idle, before any run
        self.error: str | None = None
        self.t0_ns: int | None = None
        self.n_configs = 0
        self.requests: dict[RequestKey, RequestView] = {}
        self.config_marks: list[tuple[float, str]] = []
        self.server = ServerView()
        self.rss: tuple[list[float], list[float]] = ([], [])
        self.gpu: tuple[list[float], list[float]] = ([], [])
        self.cpu: tuple[list[float], list[float]] = ([], [])
        # From /metrics, under whichever names the server's kind gives them.
        self.running: tuple[list[float], list[float]] = ([], [])
        self.waiting: tuple[list[float], list[float]] = ([], [])
        self.kv_usage: tuple[list[float], list[float]] = ([], [])  # share of the KV cache
        self.busy_slots: tuple[list[float], list[float]] = ([], [])
        # Per slot id, [start, end] spans while the slot was busy (end None: busy now).
        self.slot_spans: dict[int, list[list[float | None]]] = {}
        # Per slot id, (t, share of the slot's context its task holds) where /slots says
        # (``slot_context_share``); a run of equal shares keeps only its two ends.
        self.slot_context: dict[int, tuple[list[float], list[float]]] = {}
        self.predicted_mib: float | None = None  # the current configuration's
        # Per configuration whose server reported its buffers: [start, end, MiB] of its
        # predicted footprint (end None: its server still runs).
        self.predicted: list[list[float | None]] = []
        self.summaries: list[ConfigSummary] = []
        self.notices: list[Notice] = []
        # What the scheduler model said the run would measure, before it ran (None: no
        # calibration held for it, or a session stored before predictions were).
        self.prediction: RunPrediction | None = None
        # A conversations run's users, in the order their colours go (``u3`` third), and
        # each conversation's last finished turn, which the next turn's cache is read against.
        self.users: dict[str, int] = {}
        self._scheduled: set[int] = set()  # the configurations whose arrivals have a schedule
        self._last_turns: dict[tuple[int, int, str], RequestRecord] = {}
        self._busy_now = 0
        self.last_t = 0.0

    def seconds(self, t_ns: int) -> float:
        if self.t0_ns is None:
            self.t0_ns = t_ns
        return (t_ns - self.t0_ns) / NS

    def apply(self, events: list[Any]) -> Changes:
        changes = Changes()
        for event in events:
            self._apply(event, changes)
        if changes.requests or changes.samples:
            self._estimate_prefill(changes)
        return changes

    def _apply(self, event: Any, ch: Changes) -> None:
        match event:
            case ExperimentStarted():
                self.reset()
                self.name, self.session_path = event.name, event.session_path
                self.server_binary, self.mode = event.server_binary, event.mode
                self.n_configs, self.t0_ns = event.n_configs, event.t0_ns
                self.status = RunStatus.RUNNING
                ch.layout = ch.gantt = ch.samples = ch.server = ch.results = True
                ch.prediction = True
            case PredictionMade():
                self.prediction = event.prediction
                ch.prediction = ch.gantt = ch.results = True
            case ConfigStarted(config=config):
                self._close_slot_spans(self.last_t)
                self._close_slot_context(self.last_t)
                self.server = ServerView(config.index, config.label)
                if config.workload.scheduled:
                    self._scheduled.add(config.index)
                self.config_marks.append((self.last_t, config.label))
                self._close_predicted(self.last_t)
                self.predicted_mib = None
                ch.server = ch.gantt = ch.samples = True
            case ServerStateChanged():
                self.server.state, self.server.detail = ServerState(event.state), event.detail
                ch.server = True
            case ServerReady():
                self.server.facts = event.facts
                self.server.command = event.command
                self.server.log_path = event.log_path
                self.server.log_tail = ""
                self.server.base_url = event.base_url
                self.server.slots = event.slots
                self.predicted_mib = predicted_footprint_mib(event.facts)
                if self.predicted_mib is not None:
                    self._close_predicted(self.last_t)
                    self.predicted.append([self.last_t, None, self.predicted_mib])
                ch.server = ch.samples = True
            case RequestSubmitted(warmup=False):
                key = RequestKey(event.config_index, event.repeat, event.index)
                view = RequestView(
                    event.config_index, event.repeat, event.index, row=len(self.requests)
                )
                view.t_submit = self._t(event.t_ns)
                if event.t_intended_ns is not None and event.config_index in self._scheduled:
                    view.t_intended = self.seconds(event.t_intended_ns)
                self._join_conversation(view, event.conversation_id, event.turn)
                self.requests[key] = view
                ch.requests.add(key)
                ch.layout = ch.gantt = True
            case FirstToken():
                view = self.requests.get(RequestKey(event.config_index, event.repeat, event.index))
                if view is not None:
                    view.t_first = self._t(event.t_ns)
                    submitted = view.t_submit if view.t_submit is not None else view.t_first
                    view.ttft_s = view.t_first - submitted
                    view.state = RequestState.DECODING
                    ch.requests.add(view.key)
                    ch.gantt = True
            case TokenChunkArrived():
                view = self.requests.get(RequestKey(event.config_index, event.repeat, event.index))
                if view is not None:
                    if event.reasoning:
                        view.pending_reasoning += event.text
                    else:
                        view.pending_text += event.text
                    view.chunks += event.count
                    view.t_last = self._t(event.t_ns)
                    ch.requests.add(view.key)
            case RequestFinished(record=record) if not record.warmup:
                self._finish(record, ch)
            case SlotMatched():
                view = self.requests.get(RequestKey(event.config_index, event.repeat, event.index))
                if view is not None:
                    view.slot = event.slot
                    ch.gantt = True
            case ProcessSample():
                self._append(self.rss, event.t_ns, event.rss_bytes / 2**20)
                self._append(self.cpu, event.t_ns, event.cpu_percent)
                ch.samples = True
            case GpuSample():
                self._append(self.gpu, event.t_ns, event.gpu_bytes / 2**20)
                ch.samples = True
            case MetricsSample(values=values):
                self._fold_metrics(event.t_ns, values, ch)
            case SlotsSample(slots=slots):
                if not self.server.slots_seen:
                    self.server.slots_seen = ch.server = True
                self._busy_now = sum(1 for s in slots if s.get("is_processing"))
                self._append(self.busy_slots, event.t_ns, self._busy_now)
                self._track_slots(slots, self.seconds(event.t_ns))
                self._track_context(slots, self.seconds(event.t_ns))
                if self._assign_slots(slots):
                    ch.gantt = True
                ch.samples = True
            case StallsFound(stalls=stalls):
                self._mark_stalls(stalls, ch)
            case ConfigFinished(summary=summary):
                if event.log_tail and self.server.config_index == event.config_index:
                    self.server.log_tail = event.log_tail
                    ch.server = True
                if summary is not None:
                    self.summaries.append(summary)
                    ch.results = True
                self._busy_now = 0
            case Notice():
                self.notices.append(event)
                ch.server = True
            case ExperimentFinished():
                self._close_predicted(self.last_t)
                self._close_slot_spans(self.last_t)
                self._close_slot_context(self.last_t)
                self.status, self.error = RunStatus(event.status), event.error
                ch.finished = ch.server = ch.gantt = ch.prediction = True

    def _fold_metrics(self, t_ns: int, values: dict[str, float], ch: Changes) -> None:
        """Requests running and waiting, and KV-cache use, from one /metrics sample. The
        server's kind is looked up until a sample tells it (a labelled series shows only
        once it is set: SGLang's before its first request), then each sample reads a few
        names."""
        server = self.server
        if server.kind is None:
            kind = detect(values)
            if kind is not None or not server.metrics_seen:
                server.metrics_seen = ch.server = True
                server.kind = kind
                server.gives = kind.gives(values) if kind is not None else ()
        if server.kind is not None:
            load = server.kind.load(values)
            for series, value in (
                (self.running, load.running),
                (self.waiting, load.waiting),
                (self.kv_usage, load.kv_usage),
            ):
                if value is not None:
                    self._append(series, t_ns, value)
        ch.samples = True

    def _t(self, t_ns: int) -> float:
        t = self.seconds(t_ns)
        self.last_t = max(self.last_t, t)
        return t

    def _track_slots(self, slots: list[dict[str, Any]], t: float) -> None:
        for slot in slots:
            slot_id = slot.get("id")
            if not isinstance(slot_id, int):
                continue
            spans = self.slot_spans.setdefault(slot_id, [])
            busy = bool(slot.get("is_processing"))
            open_span = bool(spans) and spans[-1][1] is None
            if busy and not open_span:
                spans.append([t, None])
            elif not busy and open_span:
                spans[-1][1] = t

    def _track_context(self, slots: list[dict[str, Any]], t: float) -> None:
        for slot in slots:
            slot_id, share = slot.get("id"), slot_context_share(slot)
            if isinstance(slot_id, int) and share is not None:
                _extend(self.slot_context.setdefault(slot_id, ([], [])), t, share)

    def _close_slot_context(self, t: float) -> None:
        """The configuration's server is stopped: no task holds its slots' context any more
        (the last sample may have been taken while they were still busy)."""
        for series in self.slot_context.values():
            if series[1] and series[1][-1] > 0:
                _extend(series, t, 0.0)

    def _assign_slots(self, slots: list[dict[str, Any]]) -> bool:
        """Which request each busy slot serves: llama-server does not say, but /slots tells
        how many tokens the slot has decoded, and each decoding request has a known count.
        A slot is matched to the decoding request whose count is nearest (within a few
        tokens); requests too short to be seen in a sample stay unassigned."""
        decoding = [
            v
            for v in self.requests.values()
            if v.state is RequestState.DECODING and v.config_index == self.server.config_index
        ]
        taken = {v.slot for v in decoding if v.slot is not None}
        free = [v for v in decoding if v.slot is None]
        assigned = False
        for slot in slots:
            slot_id, decoded = slot.get("id"), slot.get("n_decoded")
            if (
                not slot.get("is_processing")
                or not isinstance(slot_id, int)
                or not isinstance(decoded, int)
                or decoded < 1
                or slot_id in taken
            ):
                continue
            best = min(free, key=lambda v: abs(v.chunks - decoded), default=None)
            if best is not None and abs(best.chunks - decoded) <= 2 + decoded // 5:
                best.slot = slot_id
                free.remove(best)
                taken.add(slot_id)
                assigned = True
        return assigned

    def _close_predicted(self, t: float) -> None:
        if self.predicted and self.predicted[-1][1] is None:
            self.predicted[-1][1] = t

    def _close_slot_spans(self, t: float) -> None:
        for spans in self.slot_spans.values():
            if spans and spans[-1][1] is None:
                spans[-1][1] = t

    def _append(self, series: tuple[list[float], list[float]], t_ns: int, value: float) -> None:
        series[0].append(self._t(t_ns))
        series[1].append(value)

    def _finish(self, record: Any, ch: Changes) -> None:
        key = record.key
        view = self.requests.get(key)
        if view is None:  # cancelled before it was sent: no row to show
            return
        view.t_done = self._t(record.t_done_ns) if record.t_done_ns else self.last_t
        metrics = request_metrics(record)
        view.output_tokens = record.output_tokens[0]
        if record.slot is not None:
            view.slot = record.slot
        self._join_conversation(view, record.conversation_id, record.turn)
        if record.conversation_id is not None:
            self._read_cache(view, record)
        if metrics is not None:
            view.state = RequestState.DONE
            view.ttft_s, view.queue_s, view.prefill_s = (
                metrics.ttft_s,
                metrics.queue_wait_s,
                metrics.prefill_s,
            )
            view.decode_tok_s = metrics.decode_tok_s
        else:
            view.state = (
                RequestState.DONE
                if record.ok
                else RequestState.CANCELLED
                if record.cancelled
                else RequestState.FAILED
            )
            view.error = record.error
        ch.requests.add(key)
        ch.gantt = True

    def _mark_stalls(self, stalls: tuple[Any, ...], ch: Changes) -> None:
        """Each stall on its stream's view, its cause named by the number the views give it."""
        for stall in stalls:
            view = self.requests.get(stall.stream)
            if view is None:
                continue
            cause = self.requests.get(stall.cause) if stall.cause is not None else None
            view.stalls.append(
                StallView(
                    self.seconds(stall.start_ns),
                    self.seconds(stall.end_ns),
                    cause.number if cause is not None else None,
                    stall.unknown,
                )
            )
            ch.requests.add(view.key)
            ch.gantt = True

    def _join_conversation(
        self, view: RequestView, conversation_id: str | None, turn: int | None
    ) -> None:
        if conversation_id is None or view.conversation_id is not None:
            return
        view.conversation_id, view.turn = conversation_id, turn
        view.user = user = conversation_user(conversation_id)
        if user not in self.users:
            numbered = re.fullmatch(r"u(\d+)", user)
            self.users[user] = int(numbered.group(1)) - 1 if numbered else len(self.users)

    def _read_cache(self, view: RequestView, record: RequestRecord) -> None:
        """The turn's history against the cache (``turn_caches``' rule), read against its
        conversation's previous turn, which finished before this one was sent."""
        assert record.conversation_id is not None
        conversation = (record.config_index, record.repeat, record.conversation_id)
        previous = self._last_turns.get(conversation)
        view.cache = turn_caches([previous, record]).get(record.key) if previous else None
        if record.ok:
            self._last_turns[conversation] = record

    def _estimate_prefill(self, ch: Changes) -> None:
        """Live, a request without its first token is queued or in prefill; the server's
        slots tell how many are being prefilled (busy slots not decoding), and it takes
        them in arrival order. Timings correct the split once a request is done."""
        waiting = sorted(
            (
                v
                for v in self.requests.values()
                if v.state in (RequestState.QUEUED, RequestState.PREFILL)
            ),
            key=lambda v: v.t_submit or 0.0,
        )
        if not waiting:
            return
        decoding = sum(1 for v in self.requests.values() if v.state is RequestState.DECODING)
        in_prefill = max(0, self._busy_now - decoding)
        for position, view in enumerate(waiting):
            state = RequestState.PREFILL if position < in_prefill else RequestState.QUEUED
            if view.state is not state:
                view.state = state
                view.t_prefill = self.last_t if state is RequestState.PREFILL else None
                ch.requests.add(view.key)
                ch.gantt = True

    def take_text(self, key: RequestKey) -> str:
        """Text that arrived since the grid last drew this pane."""
        view = self.requests[key]
        new, view.pending_text = view.pending_text, ""
        view.text += new
        return new

    def take_reasoning(self, key: RequestKey) -> str:
        """Reasoning that arrived since the grid last drew this pane."""
        view = self.requests[key]
        new, view.pending_reasoning = view.pending_reasoning, ""
        view.reasoning += new
        return new

    def ordered(self) -> list[RequestView]:
        return sorted(self.requests.values(), key=lambda v: v.row)

    def current_requests(self) -> list[RequestView]:
        """The grid shows the configuration that runs now (or ran last)."""
        if not self.requests:
            return []
        current = max(v.config_index for v in self.requests.values())
        repeat = max(v.repeat for v in self.requests.values() if v.config_index == current)
        return [v for v in self.ordered() if v.config_index == current and v.repeat == repeat]

    def current_conversations(self) -> list[list[RequestView]]:
        """The conversations of what the grid shows, each one's turns in order, in their
        users' order; empty when its requests are independent."""
        turns: dict[str, list[RequestView]] = {}
        for view in self.current_requests():
            if view.conversation_id is not None:
                turns.setdefault(view.conversation_id, []).append(view)
        chats = [sorted(t, key=lambda v: (v.turn or 0, v.row)) for t in turns.values()]
        return sorted(chats, key=lambda t: (self.users[t[0].user or ""], t[0].conversation_id))


def _extend(series: tuple[list[float], list[float]], t: float, value: float) -> None:
    """Append a point; a third equal value moves the second's time instead, so an idle slot
    sampled at 4 Hz for an hour is two points, and the line drawn is the same."""
    times, values = series
    if len(values) >= 2 and values[-1] == value == values[-2]:
        times[-1] = t
    else:
        times.append(t)
        values.append(value)
