"""A discrete-event model of llama-server's scheduling: what a load would measure, step by
step, from a machine's ``StepCosts``, before anything runs.

The rules are llama.cpp's own, read in ``tools/server/server-context.cpp`` (and
``server-queue.cpp`` for the wait queue) of the build the workbench ships; each is cited
where it is used. The server works in passes of ``update_slots``: every generating slot adds
its last sampled token to one batch, then the slots still on their prompt fill what is left
of ``n_batch`` (``-b``) with prompt tokens, in slot order, and one ``llama_decode`` runs it.
A token is sampled for each slot whose last prompt token or generated token was in it. A
task that finds no idle slot waits, first come first served, and takes the first slot that
is released; one that asks for its own slot (``id_slot``) waits for that slot, and a
released slot goes first to the waiting task that asked for it (``pop_deferred_task``).

Left out: the unified KV pool filling up (``-kvu``: the server halves its batch and, at one
token, fails every slot), context shift (off by default), the RAM prompt cache
(``--cache-ram``, which the workbench turns off), speculative decoding, multimodal chunks and
the context checkpoints of SWA and recurrent models. ``-ub`` only splits one decode into
micro-batches: it changes a step's cost (``StepCosts.chunk_ms``) and no scheduling rule of
a plain transformer.

``predicted_records`` writes the prediction as the records a measured run would have, so
``figures.summaries.summarize`` computes every ``concurrency.csv`` figure from them, under
the same names. Nothing in them is measured: the caller says they are predicted.
"""

from __future__ import annotations

import heapq
import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from workbench.engine.base.errors import ExperimentError
from workbench.engine.base.records import RequestRecord, TokenChunk
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.measure.client import http_error, stopped_short
from workbench.engine.models.memory import layout_of, slot_context
from workbench.engine.models.sliding_window import DEFAULT_BATCH, DEFAULT_UBATCH, micro_batch
from workbench.engine.predict.costs import StepCosts

DEFAULT_SIMILARITY = 0.1
"""``--slot-prompt-similarity``'s default: how much of a prompt a slot's cache must hold for
the slot to be chosen for it."""

NS = 1_000_000_000


Part = tuple[str, int]
"""A named stretch of prompt and its tokens: prompts whose leading parts have the same names
hold the same tokens there."""


@dataclass(frozen=True)
class Request:
    """One request a client sends: due ``due_s`` seconds after the start, ``prompt_tokens``
    long, generating exactly ``max_tokens`` (as an ``ignore_eos`` run does). Its first
    ``shared_tokens`` tokens are the token sequence named ``prefix``: two prompts with the
    same prefix agree on the shorter of their shares, which a slot that served one keeps in
    its cache for the other (with ``cache_prompt``, the server's default). ``parts`` says
    the same of several leading stretches in turn (a conversation's system prompt, then its
    own history), in place of ``prefix``.

    A request ``after`` another (its index) is due ``pause_s`` after that one's answer
    ended (a conversation's next turn, a trace session's), and is not sent if that one
    failed; a ``pinned`` one asks for its user's slot (``id_slot``: the user's number mod
    the slots)."""

    due_s: float
    prompt_tokens: int
    max_tokens: int
    prefix: str | None = None
    shared_tokens: int = 0
    cache_prompt: bool = True
    parts: tuple[Part, ...] = ()
    after: int | None = None
    pause_s: float = 0.0
    pinned: bool = False

    def __post_init__(self) -> None:
        if self.due_s < 0 or self.prompt_tokens < 1 or self.max_tokens < 1:
            raise ValueError(f"a request needs a time >= 0 and tokens >= 1: {self}")
        if not 0 <= self.shared_tokens <= self.prompt_tokens:
            raise ValueError(f"a request shares at most its prompt: {self}")
        if self.parts and self.prefix is not None:
            raise ValueError(f"a request names its shared prompt by prefix or parts: {self}")
        if any(n < 0 for _, n in self.parts) or self.leading_tokens > self.prompt_tokens:
            raise ValueError(f"a request's parts are at most its prompt: {self}")
        if self.pause_s < 0 or (self.after is not None and self.after < 0):
            raise ValueError(f"a request follows one before it, after a pause >= 0: {self}")

    @property
    def leading(self) -> tuple[Part, ...]:
        """Its named leading parts: ``parts``, or ``prefix`` with its shared tokens."""
        if self.parts:
            return self.parts
        return ((self.prefix, self.shared_tokens),) if self.prefix is not None else ()

    @property
    def leading_tokens(self) -> int:
        return sum(n for _, n in self.leading)


@dataclass(frozen=True)
class ServerShape:
    """What of a llama-server's settings decides its scheduling and a step's micro-batches:
    its slots, the context each slot gets, continuous batching, ``-b``, ``-ub`` (as the
    server runs it: at most ``-b``) and ``--slot-prompt-similarity``."""

    slots: int
    ctx_per_slot: int
    cont_batching: bool = True
    batch_size: int = DEFAULT_BATCH
    slot_prompt_similarity: float = DEFAULT_SIMILARITY
    ubatch_size: int = DEFAULT_UBATCH

    def __post_init__(self) -> None:
        if min(self.slots, self.ctx_per_slot, self.batch_size, self.ubatch_size) < 1:
            raise ValueError(f"a server needs slots, context and batches >= 1: {self}")

    @classmethod
    def of(cls, settings: ServerSettings, train_ctx: int = 0) -> ServerShape:
        """The shape a managed server starts with: each slot ``-c / -np`` of context, the
        whole pool with ``-kvu``, or at most ``kv_unified_per_slot`` of it
        (``models.memory.layout_of``, as the server pads it), and never more than the
        model's ``train_ctx`` (where known), where llama-server caps a slot."""
        if settings.ctx <= 0:
            raise ExperimentError(
                "ctx = 0 (the model's own context) cannot be predicted: give ctx a size"
            )
        layout = layout_of(settings)
        return cls(
            slots=layout.slots,
            ctx_per_slot=slot_context(layout.cells_per_slot, train_ctx),
            cont_batching=settings.cont_batching,
            batch_size=settings.batch_size or DEFAULT_BATCH,
            ubatch_size=micro_batch(settings.batch_size, settings.ubatch_size),
        )


@dataclass(frozen=True)
class Predicted:
    """What the model says happened to one request, in seconds after the start: when the
    client sent it (as soon as it was free to go) and it reached the server, the slot that
    took it and when, its prompt's start and each generated token's time (the first is
    the first token's). ``refused``: the server's error for a prompt that does not fit its
    slot; ``truncated``: stopped short of ``max_tokens`` when the slot's context filled;
    ``unsent``: why the client never sent it (the request it follows failed); ``due_s``
    when it was due (a request after another: that one's end and the pause)."""

    index: int
    request: Request
    sent_s: float
    arrived_s: float
    slot: int | None
    taken_s: float | None
    prompt_start_s: float | None
    token_times_s: tuple[float, ...]
    done_s: float
    cached_tokens: int
    refused: str | None = None
    truncated: bool = False
    unsent: str | None = None
    due_s: float = 0.0

    @property
    def first_token_s(self) -> float | None:
        return self.token_times_s[0] if self.token_times_s else None

    @property
    def processed_tokens(self) -> int:
        """Prompt tokens the server evaluated (``timings.prompt_n``): all but the cached."""
        if self.refused or self.unsent:
            return 0
        return self.request.prompt_tokens - self.cached_tokens


@dataclass(eq=False)
class _Task:
    """A request inside the server, from its arrival to its release."""

    index: int
    request: Request
    sent_s: float
    arrived_s: float
    due_s: float = 0.0
    id_slot: int | None = None  # the slot it asks for (llama-server's id_slot)
    slot: int | None = None
    taken_s: float | None = None
    started: bool = False  # its prompt began (SLOT_STATE_PROCESSING_PROMPT)
    prompt_start_s: float | None = None
    in_cache: int = 0  # prompt tokens in the slot's cache: reused and processed so far
    cached: int = 0
    tokens: list[float] = field(default_factory=list)
    refused: str | None = None
    truncated: bool = False

    @property
    def generating(self) -> bool:
        return bool(self.tokens)

    @property
    def failed(self) -> bool:
        """Whether the client counts it failed: refused, or stopped short."""
        return self.refused is not None or self.truncated

    def done(self, at_s: float) -> Predicted:
        return Predicted(
            self.index,
            self.request,
            self.sent_s,
            self.arrived_s,
            self.slot,
            self.taken_s,
            self.prompt_start_s,
            tuple(self.tokens),
            at_s,
            self.cached,
            self.refused,
            self.truncated,
            due_s=self.due_s,
        )


@dataclass(eq=False)
class _Slot:
    """One slot: the task it serves, and what its cache holds of which named parts."""

    id: int
    task: _Task | None = None
    has_tokens: bool = False
    held: tuple[Part, ...] = ()
    t_last_used: float = -1.0

    def common_prefix(self, request: Request) -> int:
        """The tokens its cache shares with ``request``'s prompt: its leading parts that
        name the same as the cache's, in turn, up to the first that differs in length."""
        shared = 0
        for (name, tokens), (held, kept) in zip(request.leading, self.held, strict=False):
            if name != held:
                break
            shared += min(tokens, kept)
            if tokens != kept:
                break
        return shared

    def keep(self, task: _Task) -> None:
        """What the slot's cache holds once ``task`` is released: its prompt, then what it
        generated but the last token (sampled, never decoded). A prompt whose named parts
        are all of it goes on with its answer in its last part, as a conversation's next
        turn does."""
        request, made = task.request, len(task.tokens)
        self.has_tokens = True
        held = request.leading
        if held and request.leading_tokens == request.prompt_tokens:
            name, tokens = held[-1]
            held = (*held[:-1], (name, tokens + made - 1))
        self.held = held


class _Client:
    """Sends each request when it is due and a place is free (``measure.workload``'s rule:
    ready = max(due, the place freed)): under ``concurrency`` requests in flight (0: no
    limit), and ``users`` conversations going on at once (0: no limit; the next one starts
    on the user that ended one, as ``measure.conversations`` runs them). A request after
    another is due once that one ended, so a send is decided only when the model's clock
    reaches it, on what has happened by then."""

    def __init__(
        self,
        requests: Sequence[Request],
        concurrency: int,
        overhead_s: float,
        users: int = 0,
        slots: int = 1,
    ):
        self.requests, self.overhead_s, self.slots = requests, overhead_s, slots
        self.firsts: list[tuple[float, int]] = []  # (due, index) of the requests after none
        self.follow: list[tuple[float, int]] = []  # (due, index) of the followers now due
        self.followers: dict[int, list[int]] = {}
        for i, request in enumerate(requests):
            if request.after is None:
                self.firsts.append((request.due_s, i))
            else:
                self.followers.setdefault(request.after, []).append(i)
        heapq.heapify(self.firsts)
        self.free: deque[float] | None = deque([0.0] * concurrency) if concurrency else None
        self.users: deque[tuple[float, int]] | None = (
            deque((0.0, u) for u in range(users)) if users else None
        )
        self.user_of: dict[int, int] = {}

    def _ready(self, due: list[tuple[float, int]], first: bool) -> float | None:
        """When the earliest of ``due`` may go (None: not before a place frees)."""
        if not due:
            return None
        ready = due[0][0]
        if self.free is not None:
            if not self.free:
                return None
            ready = max(ready, self.free[0])
        if first and self.users is not None:
            if not self.users:
                return None
            ready = max(ready, self.users[0][0])
        return ready

    def next_s(self) -> float | None:
        """When the next request may go, if one may before another ends."""
        known = [
            t
            for t in (self._ready(self.firsts, True), self._ready(self.follow, False))
            if t is not None
        ]
        return min(known, default=None)

    def send(self, now_s: float) -> list[_Task]:
        """Every request that may go by ``now_s``, each at the time it was free to go."""
        sent = []
        while True:
            first, follow = self._ready(self.firsts, True), self._ready(self.follow, False)
            is_first = follow is None or (first is not None and first <= follow)
            ready = first if is_first else follow
            if ready is None or ready > now_s:
                return sent
            due, i = heapq.heappop(self.firsts if is_first else self.follow)
            if self.free is not None:
                self.free.popleft()
            if is_first and self.users is not None:
                self.user_of[i] = self.users.popleft()[1]
            user = self.user_of.get(i)
            pin = user % self.slots if self.requests[i].pinned and user is not None else None
            sent.append(_Task(i, self.requests[i], ready, ready + self.overhead_s, due, pin))

    def ended(self, index: int, at_s: float, failed: bool) -> list[int]:
        """``index`` ended at ``at_s``: its place is free and the requests after it are due,
        or, when it failed, never sent (returned, and those after them)."""
        if self.free is not None:
            self.free.append(at_s)
        unsent, ending = [], [index]
        while ending:
            i = ending.pop()
            after = self.followers.get(i, [])
            if not after and self.users is not None and i in self.user_of:
                self.users.append((at_s, self.user_of[i]))  # its conversation is over
            for f in after:
                if i in self.user_of:
                    self.user_of[f] = self.user_of[i]
                if failed:
                    unsent.append(f)
                    ending.append(f)
                else:
                    heapq.heappush(self.follow, (at_s + self.requests[f].pause_s, f))
        return unsent


class _Server:
    """The server's loop (``server_queue::start_loop``): take the tasks that arrived, give
    each a slot or defer it, then one ``update_slots`` pass."""

    def __init__(self, shape: ServerShape, costs: StepCosts, client: _Client):
        self.shape, self.costs, self.client = shape, costs, client
        self.slots = [_Slot(i) for i in range(shape.slots)]
        self.queue: deque[_Task] = deque()  # server_queue::queue_tasks
        self.deferred: deque[_Task] = deque()  # server_queue::queue_tasks_deferred
        self.arrivals: list[tuple[float, int, _Task]] = []
        self.results: dict[int, Predicted] = {}
        self.now = 0.0

    def _arrive(self, tasks: list[_Task]) -> None:
        for task in tasks:
            heapq.heappush(self.arrivals, (task.arrived_s, task.index, task))

    def run(self) -> list[Predicted]:
        while True:
            self._arrive(self.client.send(self.now))
            while self.arrivals and self.arrivals[0][0] <= self.now:
                self.queue.append(heapq.heappop(self.arrivals)[2])
            busy = any(s.task is not None for s in self.slots)
            if not busy and not self.queue:
                coming = [t for t in (self.client.next_s(),) if t is not None]
                coming += [self.arrivals[0][0]] if self.arrivals else []
                if not coming:
                    break
                # update_slots: "all slots are idle", the loop waits for the next task
                self.now = max(self.now, min(coming))
                continue
            self._take_tasks()
            self._step()
        return [self.results[i] for i in range(len(self.client.requests))]

    def _take_tasks(self) -> None:
        """``process_single_task``: a completion task gets the slot it asks for
        (``get_slot_by_id``) or ``get_available_slot``'s, or is deferred when that one is
        busy or none is idle."""
        while self.queue:
            task = self.queue.popleft()
            if task.id_slot is None:
                slot = self._available_slot(task.request)
            else:
                pinned = self.slots[task.id_slot]
                slot = pinned if pinned.task is None else None
            if slot is None:
                self.deferred.append(task)
                continue
            slot.task, task.slot, task.taken_s = task, slot.id, self.now

    def _available_slot(self, request: Request) -> _Slot | None:
        """``get_available_slot``: the idle slot whose cache holds the largest share of the
        prompt, above ``--slot-prompt-similarity`` (the first such, by id); else the idle
        slot least recently used (``<=``: of slots never used, the last)."""
        best: _Slot | None = None
        if self.shape.slot_prompt_similarity != 0:
            f_best = 0.0
            for slot in self.slots:
                if slot.task is not None or not slot.has_tokens:
                    continue
                f_sim = slot.common_prefix(request) / request.prompt_tokens
                if f_sim > f_best and f_sim > self.shape.slot_prompt_similarity:
                    best, f_best = slot, f_sim
        if best is None:
            t_last = -1.0
            for slot in self.slots:
                if slot.task is None and (best is None or slot.t_last_used <= t_last):
                    best, t_last = slot, slot.t_last_used
        return best

    def _step(self) -> None:
        """One ``update_slots`` pass (``pre_decode``, ``decode``, ``post_decode``)."""
        shape, costs = self.shape, self.costs
        # pre_decode: each generating slot adds its sampled token first
        generating = [s for s in self.slots if s.task is not None and s.task.generating]
        sampled = {s.id for s in generating}
        batch = len(generating)
        context = sum(s.task.in_cache + len(s.task.tokens) - 1 for s in generating if s.task)
        decode_ms = costs.decode.step_ms(len(generating), context)
        prefill_ms = 0.0
        # "batch any pending prompts without exceeding n_batch": with -nocb only into an
        # empty batch, so a new prompt waits until no slot is generating
        if shape.cont_batching or batch == 0:
            for slot in self.slots:
                task = slot.task
                if batch >= shape.batch_size:
                    break
                if task is None or task.generating:
                    continue
                if not task.started and not self._start_prompt(slot, task):
                    continue
                take = min(task.request.prompt_tokens - task.in_cache, shape.batch_size - batch)
                prefill_ms += costs.chunk_ms(take, task.in_cache, shape.ubatch_size)
                task.in_cache += take
                batch += take
                if task.in_cache == task.request.prompt_tokens:
                    sampled.add(slot.id)
        self.now += max(0.0, costs.step_ms(decode_ms, prefill_ms)) / 1000.0
        # post_decode: a token for every slot that was generating or ended its prompt, in
        # slot order, each checked by process_token's limits
        for slot in self.slots:
            if slot.id in sampled:
                assert slot.task is not None
                slot.task.tokens.append(self.now)
                self._stop_if_done(slot)

    def _start_prompt(self, slot: _Slot, task: _Task) -> bool:
        """SLOT_STATE_STARTED in ``pre_decode``: a prompt as long as the slot's context is
        refused (``exceed_context_size_error``) and the slot released; else the cached
        prefix is reused (``cache_prompt``: the common prefix with the slot's tokens), at
        least one token evaluated (``[TAG_PROMPT_LOGITS]``). False: refused."""
        request, n_ctx = task.request, self.shape.ctx_per_slot
        if request.prompt_tokens >= n_ctx:
            task.refused = (
                f"request ({request.prompt_tokens} tokens) exceeds the available context "
                f"size ({n_ctx} tokens), try increasing it"
            )
            self._release(slot, task, keep_cache=False)
            return False
        reused = slot.common_prefix(request) if request.cache_prompt else 0
        task.cached = task.in_cache = min(reused, request.prompt_tokens - 1)
        task.started, task.prompt_start_s = True, self.now
        return True

    def _stop_if_done(self, slot: _Slot) -> None:
        """``process_token``: stopped when the context is full (context shift off, its
        default: prompt plus tokens reach the slot's context) or ``max_tokens`` are made."""
        task = slot.task
        assert task is not None
        made = len(task.tokens)
        if task.request.prompt_tokens + made >= self.shape.ctx_per_slot:
            task.truncated = made < task.request.max_tokens
        elif made < task.request.max_tokens:
            return
        self._release(slot, task, keep_cache=True)

    def _release(self, slot: _Slot, task: _Task, keep_cache: bool) -> None:
        """``server_slot::release``: the slot idle, its last use now; its callback moves a
        deferred task to the front of the queue (``pop_deferred_task``: the first that asked
        for this slot, else the first). The client learns it ended, and what it never sends
        after a failure is recorded so."""
        if keep_cache:
            slot.keep(task)
        slot.task, slot.t_last_used = None, self.now
        self.results[task.index] = task.done(self.now)
        if self.deferred:
            asked = next((t for t in self.deferred if t.id_slot == slot.id), self.deferred[0])
            self.deferred.remove(asked)
            self.queue.appendleft(asked)
        for i in self.client.ended(task.index, self.now, task.failed):
            before = self.client.requests[i].after
            self.results[i] = Predicted(
                i, self.client.requests[i], self.now, self.now, None, None, None, (), self.now,
                0, unsent=f"not sent: the request before it (#{before}) failed",
            )  # fmt: skip


def predict(
    requests: Sequence[Request],
    shape: ServerShape,
    costs: StepCosts,
    concurrency: int = 0,
    users: int = 0,
) -> list[Predicted]:
    """What each of ``requests`` would see on a server of ``shape`` costing ``costs``, with
    at most ``concurrency`` in flight from the client and ``users`` conversations at once
    (0: no limit). A request reaches the
    server's queue ``costs.request_overhead_ms`` after it is sent: tokenizing and the HTTP
    round trip happen outside the server's loop, so they hold up that request only."""
    if concurrency < 0 or users < 0:
        raise ValueError(
            f"concurrency and users must be >= 0 (0: no limit): {concurrency}, {users}"
        )
    for i, request in enumerate(requests):
        if request.after is not None and request.after >= i:
            raise ValueError(f"request {i} follows one that is not before it: {request.after}")
    overhead_s = max(0.0, costs.request_overhead_ms) / 1000.0
    client = _Client(requests, concurrency, overhead_s, users, shape.slots)
    return _Server(shape, costs, client).run()


def predicted_records(
    predictions: Sequence[Predicted], config_index: int = 0, repeat: int = 0
) -> list[RequestRecord]:
    """The predictions as the records a measured run would hold: every time (ns after the
    start), a chunk per token, ``usage`` and ``timings`` as llama-server reports them, a
    refused prompt's HTTP 400 and a truncated answer's error as the client words them."""
    return [_record(p, config_index, repeat) for p in predictions]


def _record(p: Predicted, config_index: int, repeat: int) -> RequestRecord:
    def ns(seconds: float) -> int:
        return round(seconds * NS)

    request = p.request
    record = RequestRecord(
        config_index,
        repeat,
        p.index,
        "",
        prompt_tokens=request.prompt_tokens,
        t_intended_ns=ns(p.due_s),
        t_scheduled_ns=ns(p.due_s),
        t_ready_ns=ns(p.sent_s),  # sent as soon as it was free to go
        t_submit_ns=ns(p.sent_s),
        t_done_ns=ns(p.done_s),
        slot=p.slot,
    )
    if p.unsent is not None:
        record.t_intended_ns = record.t_scheduled_ns = None
        record.t_ready_ns = record.t_submit_ns = record.t_done_ns = None
        record.error = p.unsent
        return record
    if p.refused is not None:
        # what llama-server answers (send_error, ERROR_TYPE_EXCEED_CONTEXT_SIZE), as the
        # client words it
        body = {"error": {"code": 400, "message": p.refused, "type": "exceed_context_size_error"}}
        record.http_status, record.error = 400, http_error(400, json.dumps(body))
        return record
    first, last = p.token_times_s[0], p.token_times_s[-1]
    made = len(p.token_times_s)
    record.chunks = [TokenChunk(ns(t), "") for t in p.token_times_s]
    record.t_first_token_ns = record.t_first_answer_ns = ns(first)
    record.t_last_token_ns = ns(last)
    record.http_status, record.finish_reason, record.ok = 200, "length", True
    record.usage = {
        "prompt_tokens": request.prompt_tokens,
        "completion_tokens": made,
        "total_tokens": request.prompt_tokens + made,
    }
    assert p.prompt_start_s is not None
    record.timings = {
        "cache_n": p.cached_tokens,
        "prompt_n": p.processed_tokens,
        "prompt_ms": (first - p.prompt_start_s) * 1000.0,
        "predicted_n": made,
        # server_slot_stats::t_gen_us: from the first token to the last, at least 1 us
        "predicted_ms": max(0.001, (last - first) * 1000.0),
    }
    if short := stopped_short(record, request.max_tokens):
        record.ok, record.error = False, short
    return record
