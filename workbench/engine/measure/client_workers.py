"""A repeat's requests sent from several client processes (``[workload] workers``).

One event loop reads about 23,000 token events a second (``bench/client_overhead.py``);
past that, arrivals wait for the loop. So the requests are dealt round-robin to worker
processes (``worker_entry``, started as ``python -m``: never a fork of this threaded
process), each with its own loop, pinned to a core of its own where the system allows. The
arrival schedule is computed once, here, for every request; each worker gets its requests
with their offsets from one shared t0, a ``perf_counter_ns`` picked a little after every
worker said it was ready. ``perf_counter_ns`` is ``CLOCK_MONOTONIC`` on Linux and
``mach_absolute_time`` on macOS: one clock for every process of a machine, so a worker's
timestamps and this process's compare directly (each handshake checks it).

A client-side ``concurrency`` limit is shared out: worker k of n gets ``limit // n`` places,
one more if ``k < limit % n``; a worker with no place gets no request. A place freed in one
worker is not taken by a request waiting in another, so with a limit the queue is each
worker's own. A later turn of a trace (a request that ``follows`` another) goes to the
worker of the request it follows. ``stop_when_saturated`` is each worker's test of its own
share.

Each worker streams its events back in batches (a finished request with its record), which
are published here in the order they came; every record comes back into the caller's list,
the worker that sent it named on it (``RequestRecord.worker``). A worker that dies ends its
pipe: that is one ``WorkbenchError`` for the configuration, the others are cancelled, and
every request is recorded. A cancel asks each worker to cancel, waits a bounded time for
their records, then kills what is left.

Workers on other machines (``run --load-from``) come after this machine's, made from above
by a ``WorkerFactory`` with the same interface (``remote.load_worker``: the job run by an
agent there, its timestamps moved onto this clock); t0 then leaves time for the slowest
channel's go.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import struct
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.records import RequestKey, RequestRecord
from workbench.engine.base.states import NoticeLevel
from workbench.engine.config.experiment import Workload, WorkloadSettings
from workbench.engine.events import Notice, RequestFinished
from workbench.engine.figures.client_limits import ClientLoad

Emit = Callable[[Any], None]
Follows = Sequence[tuple[int, float] | None]

ENTRY_MODULE = "workbench.engine.measure.worker_entry"
READY_TIMEOUT_S = 60.0  # a fresh interpreter, the engine imported, the first wave connected
START_AHEAD_S = 0.1  # t0 this long after the last worker was ready: every worker has its go
STOP_GRACE_S = 5.0  # a cancelled worker's time to send back its records before it is killed
REAP_TIMEOUT_S = 5.0
SHIP_INTERVAL_S = 0.03  # how often a worker sends what it holds (``BatchedEmit``'s pace)
STDERR_KEPT = 4000  # bytes of a worker's stderr kept for the error that names its death
MAX_FRAME_BYTES = 256 * 2**20
_HEAD = struct.Struct(">I")


class WorkerLost(WorkbenchError):
    """A client worker ended before its requests were done."""


@dataclass(frozen=True)
class Job:
    """What one worker is sent: its requests with their offsets from t0, and how to send
    them (its share of the concurrency limit in ``workload``)."""

    worker: int
    base_url: str
    headers: dict[str, str] | None
    workload: Workload
    records: list[RequestRecord]
    offsets: list[float]
    follows: list[tuple[int, float] | None] | None
    max_tokens: list[int] | None
    core: int | None


class Worker(Protocol):
    """What ``run_in_workers`` drives: a process of this machine (``WorkerProcess``) or one
    on another machine (made by a ``WorkerFactory`` from above, ``remote.load_worker``)."""

    job: Job
    lead_ns: int  # how long before t0 its go must be sent (the channel's round trip)
    said: str | None  # what the configuration says about it once it is ready

    async def start(self) -> int: ...
    async def go(self, t0_ns: int) -> None: ...
    async def cancel(self) -> None: ...
    async def pump(self, take: Callable[[list[Any]], None]) -> ClientLoad: ...
    def kill(self) -> None: ...
    async def reap(self) -> None: ...
    def forget(self) -> None: ...


WorkerFactory = Callable[[Job], Worker]


def frame(message: Any) -> bytes:
    """One message between this process and a worker: its length, then its pickle (both
    ends are this program, on one machine)."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEAD.pack(len(data)) + data


async def read_frame(reader: asyncio.StreamReader) -> Any:
    """The next message, or None where the stream ended between two."""
    try:
        head = await reader.readexactly(_HEAD.size)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise WorkerLost("a client worker's stream ended inside a message") from None
        return None
    (size,) = _HEAD.unpack(head)
    if size > MAX_FRAME_BYTES:
        raise WorkerLost(f"a client worker sent a message of {size} bytes")
    try:
        return pickle.loads(await reader.readexactly(size))
    except asyncio.IncompleteReadError:
        raise WorkerLost("a client worker's stream ended inside a message") from None


def deal(count: int, workers: int, follows: Follows | None = None) -> list[list[int]]:
    """Each worker's positions among ``count`` requests: dealt round-robin, a request that
    follows another (always an earlier one: a trace's turn before) with the one it follows;
    no worker is left empty."""
    owner: list[int] = []
    dealt = 0
    for i in range(count):
        after = follows[i] if follows is not None else None
        if after is not None:
            owner.append(owner[after[0]])
        else:
            owner.append(dealt % workers)
            dealt += 1
    used = min(workers, dealt)
    return [[i for i in range(count) if owner[i] == k] for k in range(used)]


def places(limit: int, workers: int) -> list[int]:
    """A concurrency limit shared out between workers (0, no limit, stays 0 for each)."""
    if limit == 0:
        return [0] * workers
    return [limit // workers + (k < limit % workers) for k in range(workers)]


def worker_count(workload: WorkloadSettings, extra: int = 0) -> int:
    """Workers that get requests (this machine's and ``extra`` others): no more than the
    limit has places for."""
    limit = workload.concurrency and workload.effective_concurrency
    wanted = workload.workers + extra
    return min(wanted, limit or wanted)


def jobs_for(
    base_url: str,
    headers: dict[str, str] | None,
    workload: WorkloadSettings,
    records: list[RequestRecord],
    offsets: list[float],
    follows: Follows | None = None,
    max_tokens: Sequence[int] | None = None,
    extra: int = 0,
) -> list[Job]:
    """The repeat dealt into one job per worker (``workload.workers`` of this machine, then
    ``extra`` on others, which get no core here), each record named with its worker."""
    dealt = deal(len(records), worker_count(workload, extra), follows)
    limit = workload.concurrency and workload.effective_concurrency
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    jobs = []
    for k, (positions, share) in enumerate(zip(dealt, places(limit, len(dealt)), strict=True)):
        local = {i: p for p, i in enumerate(positions)}
        for i in positions:
            records[i].worker = k
        jobs.append(
            Job(
                k,
                base_url,
                headers,
                replace(workload, requests=len(positions), concurrency=share, workers=1),
                [records[i] for i in positions],
                [offsets[i] for i in positions],
                None if follows is None else [_local(follows[i], local) for i in positions],
                None if max_tokens is None else [max_tokens[i] for i in positions],
                cores[k % len(cores)] if cores and k < workload.workers else None,
            )
        )
    return jobs


def _local(after: tuple[int, float] | None, local: dict[int, int]) -> tuple[int, float] | None:
    return None if after is None else (local[after[0]], after[1])


class WorkerLoads:
    """How busy the client was during a repeat sent by workers: the busiest worker's loop
    is the one that judges whether the client limited the run."""

    def __init__(self) -> None:
        self.loads: list[ClientLoad] = []
        self._started = time.perf_counter_ns()

    def read(self) -> ClientLoad:
        if self.loads:
            return max(self.loads, key=lambda load: load.loop_busy)
        return ClientLoad((time.perf_counter_ns() - self._started) / 1e9, 0.0, 0.0)


class WorkerProcess:
    """One client worker: started, handed its job, told when t0 is, read until it is done."""

    lead_ns = 0  # a pipe: its go arrives at once
    said = None

    def __init__(self, job: Job) -> None:
        self.job = job
        self.process: asyncio.subprocess.Process | None = None
        self._stderr = bytearray()
        self._stderr_task: asyncio.Task[None] | None = None

    async def start(self) -> int:
        """Start the worker and wait, bounded, until its requests are prepared; returns the
        ``perf_counter_ns`` it was ready at, checked to be on this process's clock."""
        try:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                ENTRY_MODULE,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # a terminal's Ctrl-C is this process's to act on
            )
        except OSError as exc:
            raise WorkerLost(f"client worker {self.job.worker} could not start: {exc}") from None
        self._stderr_task = asyncio.create_task(self._keep_stderr())
        sent = time.perf_counter_ns()
        await self._send(self.job)
        try:
            message = await asyncio.wait_for(self._read(), READY_TIMEOUT_S)
        except TimeoutError:
            raise WorkerLost(
                f"client worker {self.job.worker} was not ready within {READY_TIMEOUT_S:g} s"
            ) from None
        received = time.perf_counter_ns()
        if message is None or message[0] != "ready":
            raise await self.lost("while preparing")
        if not sent <= message[1] <= received:
            raise WorkerLost(
                f"client worker {self.job.worker}'s clock is not this process's: it was "
                f"ready at {message[1]} ns, between {sent} and {received} here"
            )
        return int(message[1])

    async def go(self, t0_ns: int) -> None:
        await self._send(("go", t0_ns))

    async def cancel(self) -> None:
        """Ask the worker to cancel its requests and send them back (it may be gone)."""
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(WorkerLost):
                await self._send(("cancel",))

    async def pump(self, take: Callable[[list[Any]], None]) -> ClientLoad:
        """Hand each batch of events to ``take`` until the worker is done; its load."""
        while True:
            message = await self._read()
            if message is None:
                raise await self.lost("mid-run")
            if message[0] == "events":
                take(message[1])
            elif message[0] == "done":
                return message[1]  # type: ignore[no-any-return]

    async def lost(self, when: str) -> WorkerLost:
        """The error for a worker whose stream ended: its exit and last words."""
        assert self.process is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.process.wait(), REAP_TIMEOUT_S)
        if self._stderr_task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
        code = self.process.returncode
        how = (
            "is still running"
            if code is None
            else f"was killed by signal {-code}"
            if code < 0
            else f"exited with status {code}"
        )
        said = self._stderr.decode(errors="replace").strip().splitlines()
        last = f": {said[-1][:300]}" if said else ""
        return WorkerLost(f"client worker {self.job.worker} {how} {when}{last}")

    def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()

    async def reap(self) -> None:
        """Wait, bounded, for the exit; killed if it is still running after that."""
        if self.process is None:
            return
        try:
            await asyncio.wait_for(self.process.wait(), REAP_TIMEOUT_S)
        except TimeoutError:
            self.kill()

    def forget(self) -> None:
        """Stop keeping its stderr (the process is gone or killed)."""
        if self._stderr_task is not None:
            self._stderr_task.cancel()

    async def _send(self, message: Any) -> None:
        assert self.process is not None and self.process.stdin is not None
        try:
            self.process.stdin.write(frame(message))
            await self.process.stdin.drain()
        except (ConnectionError, RuntimeError):  # its pipe closed: it is gone
            raise await self.lost("before it was told") from None

    async def _read(self) -> Any:
        assert self.process is not None and self.process.stdout is not None
        return await read_frame(self.process.stdout)

    async def _keep_stderr(self) -> None:
        """The worker's stderr, its last bytes kept (a traceback's last line names it)."""
        assert self.process is not None and self.process.stderr is not None
        while data := await self.process.stderr.read(65536):
            self._stderr += data
            del self._stderr[:-STDERR_KEPT]


async def run_in_workers(
    base_url: str,
    headers: dict[str, str] | None,
    workload: WorkloadSettings,
    records: list[RequestRecord],
    offsets: list[float],
    emit: Emit,
    loads: WorkerLoads,
    follows: Follows | None = None,
    max_tokens: Sequence[int] | None = None,
    elsewhere: Sequence[WorkerFactory] = (),
) -> list[RequestRecord]:
    """``run_requests`` across ``workload.workers`` processes and a worker made by each of
    ``elsewhere`` (on other machines): the same records filled in (each with its worker),
    the same events published, each worker's load in ``loads``."""
    by_key: dict[RequestKey, RequestRecord] = {r.key: r for r in records}
    returned: set[RequestKey] = set()

    def take(events: list[Any]) -> None:
        for event in events:
            if isinstance(event, RequestFinished):
                mine = by_key[event.record.key]
                vars(mine).update(vars(event.record))
                returned.add(mine.key)
                emit(RequestFinished(mine))
            else:
                emit(event)

    jobs = jobs_for(
        base_url, headers, workload, records, offsets, follows, max_tokens, len(elsewhere)
    )
    here = workload.workers
    workers: list[Worker] = [WorkerProcess(job) for job in jobs[:here]]
    workers += [make(job) for make, job in zip(elsewhere, jobs[here:], strict=False)]
    starting = [asyncio.create_task(w.start()) for w in workers]
    pumps: list[asyncio.Task[ClientLoad]] = []
    try:
        await asyncio.gather(*starting)
        for w in workers:
            if w.said is not None:
                emit(Notice(NoticeLevel.INFO, w.said, records[0].config_index))
        lead_ns = max((w.lead_ns for w in workers), default=0)
        t0_ns = time.perf_counter_ns() + round(START_AHEAD_S * 1e9) + lead_ns
        for w in workers:
            await w.go(t0_ns)
        pumps = [asyncio.create_task(w.pump(take)) for w in workers]
        for pumped in asyncio.as_completed(pumps):
            loads.loads.append(await pumped)
    finally:
        await _end(workers, [*starting, *pumps])
        for record in records:
            if record.key not in returned:
                if not record.ok and record.error is None:
                    record.error = "not finished: its client worker ended first"
                emit(RequestFinished(record))
    return records


async def _end(workers: list[Worker], tasks: list[asyncio.Task[Any]]) -> None:
    """Every worker asked to cancel, given ``STOP_GRACE_S`` to send back what it holds, and
    reaped (killed if it outstays ``REAP_TIMEOUT_S``); killed at once if this is cancelled
    meanwhile."""
    try:
        for w in workers:
            await w.cancel()
        if live := [t for t in tasks if not t.done()]:
            await asyncio.wait(live, timeout=STOP_GRACE_S)
        await asyncio.gather(*(w.reap() for w in workers))
    finally:
        for w in workers:
            w.kill()
            w.forget()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
