"""Firing a workload: arrivals, a client-side concurrency limit, one stream per request."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from workbench.engine.base.records import CANCELLED, RequestRecord
from workbench.engine.config.experiment import WorkloadSettings
from workbench.engine.config.workloads import RequestsWorkload
from workbench.engine.events import BatchedEmit, RequestFinished
from workbench.engine.figures.client_limits import ClientLoad
from workbench.engine.figures.saturation import LEFT_UNSENT, over_saturated
from workbench.engine.measure.client import PreparedRequest, prepare_request, stream_request
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.measure.sized_prompts import SizedPrompts
from workbench.engine.net.http_stream import StreamClient, StreamedResponse

Emit = Callable[[Any], None]

SATURATION_CHECK_S = 1.0  # how often a repeat that stops when over-saturated is tested


def arrival_offsets(workload: WorkloadSettings, n: int, seed: int) -> list[float]:
    """Seconds after t0 at which each request becomes due."""
    if not isinstance(workload, RequestsWorkload) or workload.arrival == "burst" or n == 0:
        return [0.0] * n
    if workload.arrival == "fixed":
        return [i / workload.rate for i in range(n)]
    rng = random.Random(seed)
    shape = workload.burstiness if workload.arrival == "gamma" else 1.0
    offsets, t = [], 0.0
    for _ in range(n):
        offsets.append(t)
        # Gamma gaps of shape k and mean 1 / rate (k = 1 is the exponential of Poisson):
        # as vLLM's benchmark draws them, so a burstiness means the same in both.
        t += rng.gammavariate(shape, 1.0 / (workload.rate * shape))
    return offsets


def make_client(
    base_url: str, workload: WorkloadSettings, headers: dict[str, str] | None = None
) -> StreamClient:
    """The client for measured streams: one fresh connection per request, its set-up timed
    apart from TTFT.

    llama-server drops some keep-alive connections that are reused right after a streamed
    response ("disconnected without sending a response": 6 of 48 requests at concurrency 2 in
    our measurement, 0 of 48 without reuse), so connections are not reused.
    """
    return StreamClient(
        base_url, connect_timeout_s=min(10.0, workload.request_timeout_s), headers=headers
    )


class ClientLoadMeter:
    """CPU spent by the calling thread (the measuring loop's) and the whole process from
    its creation until ``read()``, beside the wall time: a loop busy nearly all the time
    is one that made arrivals wait."""

    def __init__(self) -> None:
        self._start = self._clocks()

    @staticmethod
    def _clocks() -> tuple[int, int, int]:
        return time.perf_counter_ns(), time.thread_time_ns(), time.process_time_ns()

    def read(self) -> ClientLoad:
        wall, thread, process = (
            now - then for now, then in zip(self._clocks(), self._start, strict=True)
        )
        return ClientLoad(wall / 1e9, thread / 1e9, process / 1e9)


class ReleaseGate:
    """A client-side concurrency limit that says when a place became free.

    A request held back by the limit is due when a place frees, not when its task next gets
    to run on a busy loop: the gap between the two is the client's own delay, which is what
    dispatch delay must show. So each place carries the time it was released.
    """

    def __init__(self, places: int, t0_ns: int) -> None:
        self._free: collections.deque[int] = collections.deque([t0_ns] * places)
        self._waiting: collections.deque[asyncio.Future[int]] = collections.deque()

    async def acquire(self) -> int:
        """Wait for a place, first come first served; returns the ``perf_counter_ns`` at
        which it became free. A place freed while others wait goes to the longest waiter,
        not to a request that arrives in between."""
        if self._free and not self._waiting:
            return self._free.popleft()
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._free.appendleft(waiter.result())  # handed over, then cancelled
                self._hand_over()
            else:
                self._waiting.remove(waiter)
            raise

    def release(self) -> None:
        self._free.append(time.perf_counter_ns())
        self._hand_over()

    def _hand_over(self) -> None:
        while self._free and self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(self._free.popleft())


async def run_requests(
    client: StreamClient,
    workload: WorkloadSettings,
    records: list[RequestRecord],
    offsets: list[float],
    emit: Emit,
    follows: Sequence[tuple[int, float] | None] | None = None,
    max_tokens: Sequence[int] | None = None,
    start: Callable[[], Awaitable[int]] | None = None,
) -> list[RequestRecord]:
    """Stream every record's request, each starting at its offset and within the limit.

    A trace says more: a request that ``follows`` another (a later turn of a recorded
    session: the other's position and a delay in seconds) is due that long after the other's
    reply ended, and not sent if the other failed; ``max_tokens`` gives each its own.

    Each record gets its intended time (``t0 + offset``), the time it was free to go (that, or
    when a place under the concurrency limit freed, whichever is later: ``t_ready``), and
    ``t_submit`` when it was actually sent, as vLLM's benchmark does with --max-concurrency.
    Per-token events are published in batches (``BatchedEmit``). The clock starts when the
    requests are prepared, or at the time ``start`` returns then (a client worker's: the t0
    its parent gave every worker, ``client_workers``).

    With ``stop_when_saturated``, a watcher tests the requests due so far every
    ``SATURATION_CHECK_S``; once their queue grows without bound, no more are sent: those
    sent finish, the rest end as ``LEFT_UNSENT`` (one whose time had not come is no longer
    due at all, so it has no intended time).
    """
    batched = BatchedEmit(emit)
    finished: set[int] = set()  # positions whose RequestFinished went out

    def finish(i: int, record: RequestRecord) -> None:
        name_unfinished(record)
        finished.add(i)
        batched(RequestFinished(record))

    tasks: list[asyncio.Task[None]] = []
    flusher: asyncio.Task[None] | None = None
    watcher: asyncio.Task[None] | None = None
    stop = asyncio.Event()
    asked = (
        [workload] * len(records)
        if max_tokens is None
        else [replace(workload, max_tokens=n) for n in max_tokens]
    )
    ended = [asyncio.Event() for _ in records]
    try:
        prepared = await _prepare(client, workload, asked, records, offsets, follows)
        flusher = asyncio.create_task(batched.run())
        t0_ns = time.perf_counter_ns() if start is None else await start()
        gate = ReleaseGate(workload.effective_concurrency, t0_ns)

        async def one(i: int, record: RequestRecord, offset: float) -> None:
            try:
                after = follows[i] if follows is not None else None
                if after is not None:
                    before = records[after[0]]
                    await ended[after[0]].wait()
                    if not before.ok:
                        record.error = (
                            LEFT_UNSENT
                            if before.error == LEFT_UNSENT
                            else "not sent: the turn before it in its session failed"
                        )
                        return
                    assert before.t_done_ns is not None
                    record.t_intended_ns = before.t_done_ns + round(after[1] * 1e9)
                else:
                    record.t_intended_ns = t0_ns + round(offset * 1e9)
                delay = (record.t_intended_ns - time.perf_counter_ns()) / 1e9
                if delay > 0:
                    await _sleep_unless(stop, delay, workload.stop_when_saturated)
                if stop.is_set():
                    _leave_unsent(record)
                    return
                record.t_scheduled_ns = time.perf_counter_ns()
                freed = await gate.acquire()
                try:
                    if stop.is_set():
                        _leave_unsent(record)
                        return
                    record.t_ready_ns = max(record.t_intended_ns, freed)
                    seed = workload.seed + record.index
                    await stream_request(client, record, asked[i], seed, batched, prepared[i])
                finally:
                    gate.release()
            finally:
                finish(i, record)
                ended[i].set()

        tasks = [
            asyncio.create_task(one(i, r, o))
            for i, (r, o) in enumerate(zip(records, offsets, strict=True))
        ]
        if workload.stop_when_saturated:
            watcher = asyncio.create_task(_stop_when_saturated(records, stop))
        await asyncio.gather(*tasks)
    finally:
        for task in [*tasks, *([watcher] if watcher is not None else [])]:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if watcher is not None:
            await asyncio.gather(watcher, return_exceptions=True)
        # Cancelled before its task ran (or before the tasks existed): still recorded.
        for i, record in enumerate(records):
            if i not in finished:
                finish(i, record)
        batched.flush()
        if flusher is not None:
            flusher.cancel()
            await asyncio.gather(flusher, return_exceptions=True)
    return records


def name_unfinished(record: RequestRecord) -> None:
    """A request that ended neither done nor failed was cancelled: said so, and whether it
    had been sent."""
    if not record.ok and record.error is None:
        sent = record.t_submit_ns is not None
        record.error = CANCELLED if sent else f"{CANCELLED} before it was sent"


async def _sleep_unless(stop: asyncio.Event, delay: float, stoppable: bool) -> None:
    """Sleep ``delay`` seconds, or less if ``stop`` is set first (only when the repeat may
    stop: a plain sleep is the cheaper timer)."""
    if not stoppable:
        await asyncio.sleep(delay)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), delay)


def _leave_unsent(record: RequestRecord) -> None:
    """A request the over-saturated repeat will not send. One whose time had not come never
    became due, so it keeps no intended time; one waiting for a place keeps its own (it
    waited in the queue that grew)."""
    assert record.t_intended_ns is not None
    if time.perf_counter_ns() < record.t_intended_ns:
        record.t_intended_ns = None
    record.error = LEFT_UNSENT


async def _stop_when_saturated(records: list[RequestRecord], stop: asyncio.Event) -> None:
    """Set ``stop`` once the requests due so far are over-saturated (``saturation``)."""
    while not stop.is_set():
        await asyncio.sleep(SATURATION_CHECK_S)
        now = time.perf_counter_ns()
        due = [r for r in records if r.t_intended_ns is not None and r.t_intended_ns <= now]
        if over_saturated(due) is not None:
            stop.set()


async def _prepare(
    client: StreamClient,
    workload: WorkloadSettings,
    asked: list[WorkloadSettings],
    records: list[RequestRecord],
    offsets: list[float],
    follows: Sequence[tuple[int, float] | None] | None,
) -> list[PreparedRequest]:
    """Every request encoded (each as ``asked`` says), and the first wave's connections
    opened, before the clock starts. Opening 64 connections after t0 spread a burst over 20
    to 50 ms (one loop connects them in turn), so the burst the experiment asked for never
    happened; encoded and connected ahead, the wave goes out as fast as the loop can write.
    A request that follows another is not in the wave, whatever its offset."""
    prepared = [
        prepare_request(client, w, r.prompt, w.seed + r.index)
        for w, r in zip(asked, records, strict=True)
    ]
    wave = [
        i
        for i, offset in enumerate(offsets)
        if offset == 0.0 and (follows is None or follows[i] is None)
    ]
    return await open_ahead(client, prepared, wave[: workload.effective_concurrency])


async def open_ahead(
    client: StreamClient, prepared: list[PreparedRequest], wave: list[int]
) -> list[PreparedRequest]:
    """``prepared`` with a connection opened for each request of ``wave`` (those due at t0),
    so that they go out together when the clock starts."""
    prepared = list(prepared)
    opened = await asyncio.gather(*(client.connect() for _ in wave), return_exceptions=True)
    for i, connection in zip(wave, opened, strict=True):
        if isinstance(connection, StreamedResponse):
            prepared[i] = replace(prepared[i], connection=connection)
        elif not isinstance(connection, Exception):
            raise connection  # a cancellation: the client closes what was opened
        # A failed connect is left to the request, which records why it failed.
    return prepared


def plan_records(
    config_index: int,
    repeat: int,
    first_index: int,
    count: int,
    prompts: PromptSource | SizedPrompts,
    warmup: bool = False,
) -> list[RequestRecord]:
    return [
        RequestRecord(
            config_index,
            repeat,
            i,
            prompts.get(i),
            warmup,
            prompt_tokens=prompts.tokens(i),
        )
        for i in range(first_index, first_index + count)
    ]
