"""The mock server itself: its connections, its routes and the stream each request gets.

Requests are read with kernel receive timestamps (as the workbench reads responses), so a
request's schedule starts when it arrived, not when this loop got round to it. An event
loop's timers fire late by up to a millisecond or so, more under load, so each chunk's
actual write time is logged (``perf_counter_ns``) and served at ``GET /mock/log``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import time
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
# Where a chat delta carries reasoning: vLLM's field, else llama-server's and SGLang's.
REASONING_FIELD = {VLLM.key: "reasoning"}
REASONING_CONTENT = "reasoning_content"


class MockServer:
    """Serves every connection on one event loop; the schedule, counters and log are shared."""

    def __init__(self, timing: Timing, metrics: str = LLAMACPP.key) -> None:
        self.timing = timing
        self.exposition = EXPOSITIONS[metrics]
        self.counters = Counters()
        self.log: list[Served] = []
        self.port = 0
        self._listener: socket.socket | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._chunks = TokenChunks()
        self.slots = SlotTable(timing.slots, N_CTX)

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

    def _observe(self, received_ns: int, sent_ns: list[int]) -> None:
        """A finished stream into the latency histograms: no queue, its first chunk, the
        gaps between chunks, its whole time."""
        observed = self.counters.latencies
        observed["queue"].observe(0.0)
        observed["ttft"].observe((sent_ns[0] - received_ns) / 1e9)
        for before, after in itertools.pairwise(sent_ns):
            observed["itl"].observe((after - before) / 1e9)
        observed["e2e"].observe((sent_ns[-1] - received_ns) / 1e9)

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
        self.counters.prompt_tokens += n_prompt
        self.counters.processing += 1
        self.counters.held_tokens += n_prompt
        slot = self.slots.take(n_prompt)
        sent = 0
        loop = asyncio.get_running_loop()
        # loop.time() is time.monotonic(); put the arrival on that clock once.
        origin = loop.time() - (time.perf_counter_ns() - request.t_received_ns) / 1e9
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
            self._observe(request.t_received_ns, served.sent_ns)
            # "length" means max_tokens was reached; fewer tokens end as a model's own stop.
            finish = "length" if tokens == body.get("max_tokens") else "stop"
            timings = (
                {  # llama.cpp's own account of the request
                    "cache_n": 0,
                    "prompt_n": n_prompt,
                    "prompt_ms": (first - request.t_received_ns) / 1e6,
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
            self.counters.prompt_seconds += (first - request.t_received_ns) / 1e9
            self.counters.output_seconds += t.predicted_ms(last - first, tokens) / 1000
        finally:
            self.slots.release(slot)
            self.counters.processing -= 1
            self.counters.held_tokens -= n_prompt + sent
