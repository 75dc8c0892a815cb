"""The mock server itself: its connections, its routes and the stream each request gets.

Requests are read with kernel receive timestamps (as the workbench reads responses), so a
request's schedule starts when it arrived, not when this loop got round to it. An event
loop's timers fire late by up to a millisecond or so, more under load, so each chunk's
actual write time is logged (``perf_counter_ns``) and served at ``GET /mock/log``.

With ``Timing.queue`` (``--queue``) a request that finds every slot busy waits for one,
first come first served, and its schedule starts when it takes the slot a finished stream
hands it, at that stream's end: ``/mock/log`` says when (``t_slot_ns``), so a test knows
each request's true wait. While it waits it counts as waiting on ``/metrics``, not running;
a client that closes its connection meanwhile leaves the queue, as real servers drop it.
The figures keep what they mean on a real server: TTFT and E2E (vLLM's and SGLang's
histograms) from the arrival, the wait included; the queue histogram the wait alone;
llama.cpp's ``prompt_ms`` (and ``prompt_seconds_total``) from the slot's start, as a
deferred task's prompt is timed from when a slot takes it.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import socket
import time
from dataclasses import dataclass
from typing import Any

from workbench.engine.base.server_kinds import LLAMACPP, VLLM
from workbench.engine.net.http_stream import (
    HttpStreamError,
    KernelStampedSocket,
    enable_kernel_stamps,
)
from workbench.mock_server.framing import BadRequest, Request, response_head, take_request
from workbench.mock_server.generator import (
    ANSWER,
    Served,
    Timing,
    TokenChunks,
    final_chunks,
    prompt_text,
    prompt_tokens,
)
from workbench.mock_server.metrics_page import EXPOSITIONS, MODEL, Counters
from workbench.mock_server.slot_table import SlotTable

MAX_LOG = 100_000  # served requests kept for /mock/log
N_CTX = 4096  # each slot's context, as /props reports it: the KV pool is slots x N_CTX
NOT_FOUND = '{"error":{"code":404}}'
MAX_WAITING = 10_000  # requests waiting for a slot at most (--queue), so that a flood cannot
# grow the queue without bound: past it a request is answered 503, as an overloaded server's
QUEUE_FULL = '{"error":{"code":503,"message":"the queue is full"}}'
# Where a chat delta carries reasoning: vLLM's field, else llama-server's and SGLang's.
REASONING_FIELD = {VLLM.key: "reasoning"}
REASONING_CONTENT = "reasoning_content"


@dataclass(eq=False)
class _Waiting:
    """A request waiting for a slot (``--queue``): its prompt, which the slot will hold, and
    the slot it is handed with the moment it was (``perf_counter_ns``)."""

    prompt: int
    handed: asyncio.Future[tuple[int | None, int]]


async def _client_gone(conn: KernelStampedSocket, kept: list[tuple[int, bytes]]) -> None:
    """Returns once the client has closed its end of the connection; what it sent meanwhile
    (a request pipelined behind this one) is put in ``kept``, for the connection to read."""
    while reads := await conn.next_reads():
        kept += reads


class MockServer:
    """Serves every connection on one event loop; the schedule, counters, log and queue are
    shared."""

    def __init__(self, timing: Timing, metrics: str = LLAMACPP.key) -> None:
        self.timing = timing
        self.exposition = EXPOSITIONS[metrics]
        self.counters = Counters()
        self.log: list[Served] = []
        self.port = 0
        self._listener: socket.socket | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._accepted: set[socket.socket] = set()  # until their connection closes them
        self._chunks = TokenChunks()
        self.slots = SlotTable(timing.slots, N_CTX)
        self._waiting: collections.deque[_Waiting] = collections.deque()

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._listener = socket.create_server((host, port), backlog=1024)
        self._listener.setblocking(False)
        enable_kernel_stamps(self._listener)  # before any request can arrive
        self.port = self._listener.getsockname()[1]
        self._spawn(self._accept())

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for sock in self._accepted:  # a connection cancelled before it began never ran
            sock.close()
        self._accepted.clear()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self) -> None:
        assert self._listener is not None
        loop = asyncio.get_running_loop()
        while True:
            sock, _ = await loop.sock_accept(self._listener)
            self._accepted.add(sock)
            self._spawn(self._connection(sock))

    async def _connection(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = KernelStampedSocket(sock, asyncio.get_running_loop())
        buffer = bytearray()
        try:
            while reads := await conn.next_reads():
                for t_ns, data in reads:
                    buffer += data
                    while True:
                        try:
                            request = take_request(buffer, t_ns)
                        except BadRequest as exc:
                            await self._reply(conn, 400, "text/plain", str(exc))
                            return
                        if request is None:
                            break
                        await self._answer(conn, request)
                        if not self.timing.keep_alive:
                            return
        except (HttpStreamError, ConnectionError):
            pass  # the client went away: its business
        finally:
            conn.close()
            self._accepted.discard(sock)

    def _head(self, status: int, content_type: str, framing: str) -> bytes:
        connection = "keep-alive" if self.timing.keep_alive else "close"
        return response_head(
            status, f"Content-Type: {content_type}", f"Connection: {connection}", framing
        )

    async def _reply(
        self, conn: KernelStampedSocket, status: int, content_type: str, body: str
    ) -> None:
        data = body.encode()
        await conn.write(self._head(status, content_type, f"Content-Length: {len(data)}") + data)

    async def _answer(self, conn: KernelStampedSocket, request: Request) -> None:
        if request.method == "GET":
            answer = self.document(request.path)
            await self._reply(conn, *(answer or (404, "application/json", NOT_FOUND)))
            return
        if request.method != "POST" or request.path not in (
            "/v1/chat/completions",
            "/v1/completions",
        ):
            await self._reply(conn, 404, "application/json", NOT_FOUND)
            return
        try:
            body = json.loads(request.body) if request.body else {}
        except ValueError:
            body = None
        if not isinstance(body, dict):
            await self._reply(conn, 400, "application/json", '{"error":{"message":"bad JSON"}}')
            return
        await self._stream(conn, body, request.path == "/v1/chat/completions", request)

    def metrics_text(self) -> str:
        """/metrics as the server it stands for writes it."""
        return self.exposition.page(self.counters, self.timing.slots * N_CTX)

    def document(self, path: str) -> tuple[int, str, str] | None:
        """The answer to a GET, as (status, content type, body); None for an unknown path."""
        t = self.timing
        kind = self.exposition.kind
        match path:
            case "/health":
                return 200, "application/json", '{"status":"ok"}'
            case "/v1/models":
                models = {"data": [{"id": MODEL, "owned_by": kind.owned_by}]}
                return 200, "application/json", json.dumps(models)
            case "/props" if kind.slots:
                props = {"total_slots": t.slots, "default_generation_settings": {"n_ctx": N_CTX}}
                return 200, "application/json", json.dumps(props)
            case "/slots" if kind.slots:
                return 200, "application/json", json.dumps(self.slots.page())
            case "/metrics":
                return 200, "text/plain; version=0.0.4", self.metrics_text()
            case "/mock/log":
                body = json.dumps([s.to_dict() for s in self.log])
                return 200, "application/json", body
        return None

    def _observe(self, received_ns: int, slot_ns: int, sent_ns: list[int]) -> None:
        """A finished stream into the latency histograms: its wait for a slot, its first
        chunk and its whole time from its arrival (the wait included, as a server's), the
        gaps between chunks."""
        observed = self.counters.latencies
        observed["queue"].observe((slot_ns - received_ns) / 1e9)
        observed["ttft"].observe((sent_ns[0] - received_ns) / 1e9)
        for before, after in itertools.pairwise(sent_ns):
            observed["itl"].observe((after - before) / 1e9)
        observed["e2e"].observe((sent_ns[-1] - received_ns) / 1e9)

    def _start(self, prompt: int) -> int | None:
        """A request takes a slot: it runs, its prompt is counted as processed and held in
        the KV cache. Its slot in ``/slots``, None beyond the slots shown."""
        self.counters.processing += 1
        self.counters.prompt_tokens += prompt
        self.counters.held_tokens += prompt
        return self.slots.take(prompt)

    def _end(self, slot: int | None, held: int) -> None:
        """A stream leaves its slot and the ``held`` tokens it held in the KV cache; the
        first request waiting takes the slot in the same step, so no page shows a slot free
        while a request waits."""
        self.slots.release(slot)
        self.counters.processing -= 1
        self.counters.held_tokens -= held
        if self._waiting:
            waiting = self._waiting.popleft()
            self.counters.waiting -= 1
            waiting.handed.set_result((self._start(waiting.prompt), time.perf_counter_ns()))

    async def _queued(
        self, conn: KernelStampedSocket, prompt: int
    ) -> tuple[int | None, int] | None:
        """Waits, first come first served, for the slot a finished stream hands over: that
        slot and when it was handed, or None where the client closed its connection first
        (its place is not kept)."""
        waiting = _Waiting(prompt, asyncio.get_running_loop().create_future())
        self._waiting.append(waiting)
        self.counters.waiting += 1
        kept: list[tuple[int, bytes]] = []
        gone = asyncio.ensure_future(_client_gone(conn, kept))
        try:
            await asyncio.wait((waiting.handed, gone), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            if waiting.handed.done():  # handed a slot as the server closed: give it back
                self._end(waiting.handed.result()[0], prompt)
            raise
        finally:
            gone.cancel()
            conn.reads.extendleft(reversed(kept))
            if not waiting.handed.done():
                self._waiting.remove(waiting)
                self.counters.waiting -= 1
        return waiting.handed.result() if waiting.handed.done() else None

    async def _stream(
        self, conn: KernelStampedSocket, body: dict[str, Any], chat: bool, request: Request
    ) -> None:
        t = self.timing
        tokens = t.tokens_for(body)
        kind = self.exposition.kind
        # A completion's text has no reasoning field: only a chat answer reasons apart.
        reasoning = min(t.reasoning_tokens, tokens) if chat else 0
        thinking = REASONING_FIELD.get(kind.key, REASONING_CONTENT)
        n_prompt = prompt_tokens(body)
        served = Served(prompt_text(body), request.t_received_ns)
        if len(self.log) < MAX_LOG:
            self.log.append(served)
        if not t.queue or self.counters.processing < t.slots:
            slot, t_slot = self._start(n_prompt), request.t_received_ns
        elif len(self._waiting) >= MAX_WAITING:
            await self._reply(conn, 503, "application/json", QUEUE_FULL)
            return
        elif handed := await self._queued(conn, n_prompt):
            slot, t_slot = handed
        else:
            return  # the client went away while it waited
        served.t_slot_ns = t_slot
        sent = 0
        loop = asyncio.get_running_loop()
        # loop.time() is time.monotonic(); put the slot's start on that clock once.
        origin = loop.time() - (time.perf_counter_ns() - t_slot) / 1e9
        try:
            await conn.write(self._head(200, "text/event-stream", "Transfer-Encoding: chunked"))
            while sent < tokens:
                n = t.chunk_after(sent, tokens, reasoning)
                delay = origin + t.due_s(sent, n) - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                data = self._chunks.carrying(
                    chat, sent, n, thinking if sent < reasoning else ANSWER
                )
                served.sent_ns.append(time.perf_counter_ns())
                await conn.write(data)
                sent += n
                self.slots.decoded(slot, sent)
                self.counters.held_tokens += n
            self.counters.tokens_predicted += tokens
            first, last = served.sent_ns[0], served.sent_ns[-1]
            self._observe(request.t_received_ns, t_slot, served.sent_ns)
            # "length" means max_tokens was reached; fewer tokens end as a model's own stop.
            finish = "length" if tokens == body.get("max_tokens") else "stop"
            timings = (
                {  # llama.cpp's own account of the request
                    "cache_n": 0,
                    "prompt_n": n_prompt,
                    "prompt_ms": (first - t_slot) / 1e6,
                    "predicted_n": tokens,
                    "predicted_ms": t.predicted_ms(last - first, tokens),
                }
                if kind is LLAMACPP
                else None
            )
            # vLLM counts reasoning tokens in its usage (with a reasoning parser); llama-server
            # and SGLang do not, so a client counts the reasoning chunks.
            counted = reasoning if kind is VLLM and chat and t.reasoning_tokens else None
            await conn.write(final_chunks(chat, finish, n_prompt, tokens, timings, counted))
            self.counters.finished[finish] += 1
            self.counters.prompt_seconds += (first - t_slot) / 1e9
            self.counters.output_seconds += t.predicted_ms(last - first, tokens) / 1000
        finally:
            self._end(slot, n_prompt + sent)
