"""``python -m workbench.engine.measure.worker_entry``: one client worker of a repeat.

Its parent (``client_workers``) writes a ``Job`` and then its commands on stdin, and reads
its messages on the stdout it had at start; anything printed goes to stderr instead, so
nothing can break a message. The worker prepares its requests, says it is ready (with its
``perf_counter_ns``: the parent checks that the two share a clock), waits for t0 and sends
them with ``run_requests``, shipping its events every ``SHIP_INTERVAL_S``, then its load.
A cancel, or stdin's end (the parent is gone), cancels its requests: each is still sent
back, recorded as cancelled. It runs in a session of its own and ignores SIGINT: a Ctrl-C
is the parent's to act on, and the parent decides when to stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, BinaryIO

from workbench.engine.measure.client_workers import (
    SHIP_INTERVAL_S,
    Job,
    frame,
    read_frame,
)
from workbench.engine.measure.workload import ClientLoadMeter, make_client, run_requests

CLOSE_TIMEOUT_S = 30.0  # the last messages written, however slow the parent reads them


class _Channel(asyncio.Protocol):
    """The stdout pipe's protocol: says when everything written has gone."""

    def __init__(self) -> None:
        self.closed = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def serve(commands: BinaryIO, channel: BinaryIO) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), commands)
    transport, protocol = await loop.connect_write_pipe(_Channel, channel)
    job: Job | None = await read_frame(reader)
    if job is None:
        return
    _pin(job.core)
    try:
        await run_job(
            job, lambda message: transport.write(frame(message)), lambda: read_frame(reader)
        )
    finally:
        transport.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(protocol.closed, CLOSE_TIMEOUT_S)


async def run_job(
    job: Job, send: Callable[[Any], None], command: Callable[[], Awaitable[Any]]
) -> None:
    """One worker's job, wherever it runs (a process of this machine, or an agent's on
    another): ``("ready", perf_counter_ns)`` sent once its requests are prepared, then its
    ``("events", [...])`` every ``SHIP_INTERVAL_S`` from the ``("go", t0_ns)`` that
    ``command()`` gives, then ``("done", load)``. A ``("cancel",)`` or the commands' end
    (None) cancels the requests, which are still sent back; a failure sends no ``done``
    and propagates."""
    loop = asyncio.get_running_loop()
    meter = ClientLoadMeter()
    outbox: list[Any] = []
    go: asyncio.Future[int] = loop.create_future()

    async def start() -> int:
        send(("ready", time.perf_counter_ns()))  # the clock every process here shares
        return await go

    async def measure() -> None:
        async with make_client(job.base_url, job.workload, job.headers) as client:
            await run_requests(
                client,
                job.workload,
                job.records,
                job.offsets,
                outbox.append,
                job.follows,
                job.max_tokens,
                start,
            )

    run = asyncio.create_task(measure())

    async def listen() -> None:
        while (message := await command()) is not None:
            if message[0] == "go" and not go.done():
                go.set_result(message[1])
            elif message[0] == "cancel":
                break
        run.cancel()  # cancelled, or the parent is gone

    def ship() -> None:
        if outbox:
            send(("events", outbox[:]))
            outbox.clear()

    async def shipping() -> None:
        while True:
            await asyncio.sleep(SHIP_INTERVAL_S)
            ship()

    helpers = [asyncio.create_task(listen()), asyncio.create_task(shipping())]
    ended = False  # a failure sends no "done": the parent names the worker's exit
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await run
        ended = True
    finally:
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        ship()
        if ended:
            send(("done", meter.read()))


def _pin(core: int | None) -> None:
    """This process on its core, where the system lets a process choose (Linux)."""
    if core is not None and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {core})


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    asyncio.run(serve(sys.stdin.buffer, channel))
    return 0


if __name__ == "__main__":
    sys.exit(main())
