"""A client worker on another machine (``run --load-from``), through that machine's agent.

A server one machine's client cannot saturate gets more clients: each load host runs one
client worker of the repeat, beside this machine's own. ``RemoteWorker`` has the interface
``client_workers.run_in_workers`` drives (the CLI makes one per host and repeat through a
``WorkerFactory``); the schedule is still computed once, here, and dealt as for local
workers.

The two machines' clocks differ, so before the job the far clock's offset is measured by
pings (``AgentLink.measure_clock``, as a run on a host does); t0 goes out on the far clock,
and every far timestamp comes back less the offset. Subtracting one constant from all of a
request's times places its bars on this machine's axis and leaves each of its durations
exactly as the far machine measured them; the offset's error (about half the round trip)
only moves bars against this machine's.

The far side is untrusted: every event is checked by the protocol, must be about one of
this job's requests, and carries clock readings within bounds. The job the agent is sent is
checked there the same way (``protocol.LoadOp``, then ``checked_job``). A channel that ends
or goes silent past ``LIVENESS_S`` mid-run is this worker lost (``WorkerLost``, naming the
host).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from workbench.engine.base.errors import ExperimentError, WorkbenchError
from workbench.engine.base.records import RequestKey, RequestRecord
from workbench.engine.config.experiment import WorkloadSettings
from workbench.engine.config.settings import revalidated
from workbench.engine.events import FirstToken, RequestFinished, RequestSubmitted, TokenChunkArrived
from workbench.engine.figures.client_limits import ClientLoad
from workbench.engine.measure.client_workers import (
    READY_TIMEOUT_S,
    Job,
    WorkerFactory,
    WorkerLost,
)
from workbench.engine.remote import wire
from workbench.engine.remote.link import (
    LIVENESS_S,
    PING_EVERY_S,
    REPLY_TIMEOUT_S,
    AgentLink,
    LinkLost,
    clock_reading,
    error_text,
)
from workbench.engine.remote.protocol import HostTarget, ProtocolError, not_the_protocol
from workbench.engine.remote.targets import LOCAL, check_reachable, target_for

LOAD_EVENTS = (RequestSubmitted, FirstToken, TokenChunkArrived, RequestFinished)
MAX_OFFSET_S = 7 * 86400.0  # an arrival a week after t0: no repeat runs that long
_CLOCK_FIELD = re.compile(r"^t(_\w+)?_ns$")  # a clock reading; ``connect_ns`` is a duration


class RemoteWorker:
    """One client worker run by the agent on ``target``: started, handed its job, told t0,
    read until it is done."""

    def __init__(
        self,
        target: HostTarget,
        remote_command: Sequence[str],
        job: Job,
        *,
        reply_timeout_s: float = REPLY_TIMEOUT_S,
        liveness_s: float = LIVENESS_S,
        ping_every_s: float = PING_EVERY_S,
    ) -> None:
        self.job = job
        self.host = target.name
        self.lead_ns = 0  # the round trip, once measured: t0 leaves it for the go
        self.said: str | None = None
        self.offset_ns = 0  # the far clock minus this one's
        self._target = target
        self._command = list(remote_command)
        self._mine = {r.key: r for r in job.records}
        self._finished: set[Any] = set()
        self._reply_timeout_s = reply_timeout_s
        self._liveness_s = liveness_s
        self._ping_every_s = ping_every_s
        self._link: AgentLink | None = None
        self._lock = threading.Lock()
        self._killed = False
        # Its own threads for the link's blocking waits: a read may wait out the liveness
        # bound while the channel is closed beside it, whatever else the loop has on threads.
        self._threads = ThreadPoolExecutor(2, thread_name_prefix=f"load-{self.host}")

    @property
    def name(self) -> str:
        return f"client worker {self.job.worker} on {self.host}"

    async def start(self) -> int:
        """Reach the agent, measure the clocks, send the job and wait, bounded, until its
        requests are prepared; returns when that was, on this machine's clock."""
        return await self._in_thread(self._start)

    def _start(self) -> int:
        link = AgentLink(self._target, self._command)
        with self._lock:
            self._link = link
            if self._killed:  # ended while this started
                link.kill()
        try:
            link.hello(self._reply_timeout_s)
            rtt_ns, self.offset_ns = link.measure_clock(self._reply_timeout_s)
            link.send("load", job=wire.plain(dataclasses.replace(self.job, core=None)))
            t_ns: int = link.expect("ready", READY_TIMEOUT_S).t_ns
        except LinkLost as exc:
            raise WorkerLost(f"{self.name} was lost while preparing: {exc}") from None
        self.lead_ns = rtt_ns
        self.said = (
            f"{self.name}: clock offset {self.offset_ns / 1e6:+.3f} ms "
            f"(round trip {rtt_ns / 1e6:.1f} ms)"
        )
        return t_ns - self.offset_ns

    async def go(self, t0_ns: int) -> None:
        """t0 on the far clock (a channel gone is found by ``pump``)."""
        assert self._link is not None
        self._link.send("go", t0_ns=t0_ns + self.offset_ns)

    async def cancel(self) -> None:
        if self._link is not None:
            self._link.send("cancel")

    async def pump(self, take: Callable[[list[Any]], None]) -> ClientLoad:
        """Hand each batch of events, on this clock, to ``take`` until the far job is done;
        its load. A ping every ``ping_every_s`` keeps a quiet run's channel talking."""
        pinging = asyncio.create_task(self._ping())
        try:
            while True:
                message = await self._in_thread(self._receive)
                kind = message.kind
                if kind == "events":
                    take(self._events(message.events))
                elif kind == "done":
                    if message.load is None:
                        raise not_the_protocol(self.host, "a load job done without its load")
                    load: ClientLoad = message.load
                    return load
                elif kind == "error":
                    raise WorkerLost(f"{self.name}: {error_text(message)}")
                elif kind != "pong":
                    raise not_the_protocol(self.host, f"a {kind} message during a load job")
        finally:
            pinging.cancel()

    def _receive(self) -> Any:
        assert self._link is not None
        try:
            return self._link.receive(self._liveness_s)
        except LinkLost as exc:
            raise WorkerLost(f"{self.name} was lost mid-run: {exc}") from None

    async def _ping(self) -> None:
        assert self._link is not None
        while True:
            await asyncio.sleep(self._ping_every_s)
            self._link.send("ping", seq=-1)

    def _events(self, far: list[Any]) -> list[Any]:
        """The far events (checked by the protocol) about this job's requests, on this
        clock."""
        events = []
        for event in far:
            if not isinstance(event, LOAD_EVENTS):
                raise ProtocolError(f"{self.host} sent a {type(event).__name__} in a load job")
            about = event.record if isinstance(event, RequestFinished) else event
            key = RequestKey(about.config_index, about.repeat, about.index)
            if key not in self._mine or key in self._finished:
                raise ProtocolError(
                    f"{self.host} sent an event about no request of its job still going"
                )
            if isinstance(event, RequestFinished):
                self._finished.add(key)
            events.append(self._here(event))
        return events

    def _here(self, event: Any) -> Any:
        """On this clock; a record keeps what this side sent it with (its prompt, whether
        a warm-up) and is named with this worker."""
        if isinstance(event, RequestFinished):
            sent = self._mine[event.record.key]
            record = on_this_clock(event.record, self.offset_ns, self.host)
            record.prompt, record.warmup = sent.prompt, sent.warmup
            record.worker = self.job.worker
            return RequestFinished(record)
        return on_this_clock(event, self.offset_ns, self.host)

    def kill(self) -> None:
        with self._lock:
            self._killed = True
            link = self._link
        if link is not None:
            link.kill()

    async def reap(self) -> None:
        """The channel closed: the agent ends once its job has (killed past the bound)."""
        if self._link is not None:
            await self._in_thread(self._link.close)

    def forget(self) -> None:
        if self._link is not None:
            self._link.close(0.0)
        self._threads.shutdown(wait=False)

    async def _in_thread(self, call: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._threads, call)


def on_this_clock(value: Any, offset_ns: int, host: str) -> Any:
    """An event or record with every clock reading (a field ``t_ns`` or ``t_..._ns``, a
    record's chunks too) less ``offset_ns``: its durations unchanged."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        reading = getattr(value, f.name)
        if _CLOCK_FIELD.match(f.name) and reading is not None:
            here = reading - offset_ns
            if not clock_reading(reading) or not clock_reading(here):
                raise ProtocolError(f"{host} sent a time no clock reads ({f.name} {reading})")
            changes[f.name] = here
    if isinstance(value, RequestRecord):
        changes["chunks"] = [on_this_clock(c, offset_ns, host) for c in value.chunks]
    return dataclasses.replace(value, **changes)


def checked_job(job: Job) -> Job:
    """A load job as the near side sent it (each field of its type, ``protocol.LoadOp``),
    checked across its fields: its settings within their bounds, one offset (finite, within
    ``MAX_OFFSET_S``) per request, a later turn after an earlier one, its own max_tokens
    each at least 1."""
    _check_workload(job.workload)
    count = len(job.records)
    if len(job.offsets) != count or not all(
        math.isfinite(o) and 0 <= o <= MAX_OFFSET_S for o in job.offsets
    ):
        raise ProtocolError("the load job: an offset from t0 for each request, within a week")
    if job.follows is not None and (
        len(job.follows) != count
        or any(
            after is not None and not (0 <= after[0] < p and 0 <= after[1] <= MAX_OFFSET_S)
            for p, after in enumerate(job.follows)
        )
    ):
        raise ProtocolError("the load job: a later turn follows an earlier request of its job")
    if job.max_tokens is not None and (
        len(job.max_tokens) != count or any(n < 1 for n in job.max_tokens)
    ):
        raise ProtocolError("the load job: max_tokens of at least 1 for each request")
    return dataclasses.replace(job, core=None)  # this machine's cores are not the near side's


def _check_workload(workload: WorkloadSettings) -> None:
    try:
        revalidated(workload)
    except ExperimentError as exc:
        raise ProtocolError(f"the load job: {exc}") from None


def load_workers(hosts: Sequence[str], remote_command: Sequence[str]) -> tuple[WorkerFactory, ...]:
    """A ``WorkerFactory`` per load host, each host asked first (reachable, an agent of
    this protocol) so that a host that cannot load is refused before anything starts."""
    factories = []
    for host in hosts:
        if host == LOCAL:
            raise WorkbenchError(
                "--load-from local: this machine's own client workers are [workload] workers"
            )
        check_reachable(host)
        target = target_for(host)
        link = AgentLink(target, list(remote_command))
        try:
            link.hello()
        finally:
            link.close()
        factories.append(functools.partial(RemoteWorker, target, list(remote_command)))
    return tuple(factories)
