"""A mock OpenAI-compatible streaming server whose timing is known, for checking the client.

A benchmark client's numbers can only be trusted if it recovers a latency it was not told.
This server streams every request on a fixed schedule: the first chunk ``ttft_ms`` after the
request arrived, then one chunk every ``itl_ms`` (each carrying ``tokens_per_chunk`` tokens).
Deadlines come from the monotonic clock (first chunk at ``t_received + ttft``, chunk k at
``t_received + ttft + k * itl``), never from a chain of sleeps, so lateness does not add up.

An event loop's timers fire late by up to a millisecond or so, more under load. So the server
also records when it actually wrote each chunk (``perf_counter_ns``, the same clock the
workbench timestamps with on Linux and macOS) and serves those records at ``GET /mock/log``:
a benchmark can then tell the server's own lateness from the client's error.

It speaks HTTP/1.1 with keep-alive (``--close`` answers ``Connection: close`` instead), serves
``/health``, ``/v1/models``, ``/props``, ``/slots`` and a llama.cpp-style ``/metrics``, and
ends each stream with llama.cpp's ``usage`` and ``timings``. Run it in its own process
(``python -m workbench.mock_server --port 0``): in the measuring process it would share the
interpreter with the client it checks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_LOG = 100_000  # served requests kept for /mock/log
MODEL = "mock"


@dataclass(frozen=True)
class Timing:
    """The schedule every request is streamed on."""

    ttft_ms: float = 100.0
    itl_ms: float = 20.0
    tokens: int = 64  # per request, unless the request's max_tokens is smaller
    tokens_per_chunk: int = 1
    slots: int = 256
    keep_alive: bool = True

    def __post_init__(self) -> None:
        if self.ttft_ms < 0 or self.itl_ms < 0:
            raise ValueError("ttft_ms and itl_ms must be >= 0")
        if self.tokens < 1 or self.tokens_per_chunk < 1 or self.slots < 1:
            raise ValueError("tokens, tokens_per_chunk and slots must be >= 1")


@dataclass
class Served:
    """What the server did with one request, on its own clock."""

    prompt: str
    t_received_ns: int
    sent_ns: list[int] = field(default_factory=list)  # one per text chunk

    def to_dict(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "t_received_ns": self.t_received_ns, "sent_ns": self.sent_ns}


@dataclass
class Counters:
    """llama.cpp's /metrics counters, so cross-checks against server counts can be tested."""

    prompt_tokens: int = 0
    tokens_predicted: int = 0
    requests: int = 0
    processing: int = 0


def prompt_tokens(body: dict[str, Any]) -> int:
    """A stand-in tokenizer: one token per four bytes of prompt, at least one."""
    if isinstance(body.get("messages"), list):
        text = "".join(
            m.get("content", "") for m in body["messages"] if isinstance(m.get("content"), str)
        )
    else:
        text = body.get("prompt") if isinstance(body.get("prompt"), str) else ""
    return max(1, len(text.encode()) // 4)


def _prompt_text(body: dict[str, Any]) -> str:
    if isinstance(body.get("messages"), list) and body["messages"]:
        content = body["messages"][-1].get("content")
        return content if isinstance(content, str) else ""
    prompt = body.get("prompt")
    return prompt if isinstance(prompt, str) else ""


def _chunk(payload: dict[str, Any]) -> bytes:
    data = f"data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()
    return f"{len(data):X}\r\n".encode() + data + b"\r\n"


class MockServer:
    """The state shared by all connections: schedule, counters, log."""

    def __init__(self, timing: Timing) -> None:
        self.timing = timing
        self.counters = Counters()
        self.log: list[Served] = []
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Connection(self), host, port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def metrics_text(self) -> str:
        c = self.counters
        lines = [
            ("llamacpp:prompt_tokens_total", c.prompt_tokens, "counter"),
            ("llamacpp:tokens_predicted_total", c.tokens_predicted, "counter"),
            ("llamacpp:n_requests_total", c.requests, "counter"),
            ("llamacpp:requests_processing", c.processing, "gauge"),
            ("llamacpp:requests_deferred", 0, "gauge"),
        ]
        return "".join(f"# TYPE {name} {kind}\n{name} {value}\n" for name, value, kind in lines)

    def document(self, path: str) -> tuple[int, str, str] | None:
        """The answer to a GET, as (status, content type, body); None for an unknown path."""
        t = self.timing
        match path:
            case "/health":
                return 200, "application/json", '{"status":"ok"}'
            case "/v1/models":
                return 200, "application/json", json.dumps({"data": [{"id": MODEL}]})
            case "/props":
                props = {"total_slots": t.slots, "default_generation_settings": {"n_ctx": 4096}}
                return 200, "application/json", json.dumps(props)
            case "/slots":
                return 200, "application/json", "[]"
            case "/metrics":
                return 200, "text/plain; version=0.0.4", self.metrics_text()
            case "/mock/log":
                body = json.dumps([s.to_dict() for s in self.log])
                return 200, "application/json", body
        return None


class _Connection(asyncio.Protocol):
    """One client connection: parse requests, answer them one at a time (HTTP/1.1)."""

    def __init__(self, server: MockServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.busy = False
        self.stream: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.stream is not None:
            self.stream.cancel()

    def data_received(self, data: bytes) -> None:
        t_ns = time.perf_counter_ns()
        self.buffer += data
        if len(self.buffer) > MAX_HEADER_BYTES + MAX_BODY_BYTES:
            self._close()
            return
        if not self.busy:
            self._next_request(t_ns)

    def _next_request(self, t_ns: int) -> None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buffer) > MAX_HEADER_BYTES:
                self._reply(431, "text/plain", "headers too large", close=True)
            return
        head = self.buffer[:end].decode("latin-1").split("\r\n")
        length = 0
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    self._reply(400, "text/plain", "bad Content-Length", close=True)
                    return
        if length > MAX_BODY_BYTES:
            self._reply(413, "text/plain", "body too large", close=True)
            return
        if len(self.buffer) < end + 4 + length:
            return
        body_bytes = bytes(self.buffer[end + 4 : end + 4 + length])
        del self.buffer[: end + 4 + length]
        parts = head[0].split(" ")
        method, path = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
        if method == "GET":
            answer = self.server.document(path)
            if answer is None:
                self._reply(404, "application/json", '{"error":{"code":404}}')
            else:
                self._reply(*answer)
            return
        if method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            try:
                body = json.loads(body_bytes) if body_bytes else {}
            except ValueError:
                body = None
            if not isinstance(body, dict):
                self._reply(400, "application/json", '{"error":{"message":"bad JSON"}}')
                return
            self.busy = True
            chat = path == "/v1/chat/completions"
            self.stream = asyncio.get_running_loop().create_task(self._stream(body, chat, t_ns))
            return
        self._reply(404, "application/json", '{"error":{"code":404}}')

    def _headers(self, status: int, content_type: str, extra: str = "") -> bytes:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "Error")
        connection = "keep-alive" if self.server.timing.keep_alive else "close"
        return (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
            f"Connection: {connection}\r\n{extra}\r\n"
        ).encode()

    def _reply(self, status: int, content_type: str, body: str, close: bool = False) -> None:
        if self.transport is None:
            return
        data = body.encode()
        self.transport.write(
            self._headers(status, content_type, f"Content-Length: {len(data)}\r\n") + data
        )
        if close or not self.server.timing.keep_alive:
            self._close()

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    async def _stream(self, body: dict[str, Any], chat: bool, t_received_ns: int) -> None:
        server, t = self.server, self.server.timing
        max_tokens = body.get("max_tokens")
        tokens = t.tokens
        if isinstance(max_tokens, int) and 0 < max_tokens < tokens:
            tokens = max_tokens
        n_prompt = prompt_tokens(body)
        served = Served(_prompt_text(body), t_received_ns)
        if len(server.log) < MAX_LOG:
            server.log.append(served)
        server.counters.requests += 1
        server.counters.prompt_tokens += n_prompt
        server.counters.processing += 1
        loop = asyncio.get_running_loop()
        # loop.time() is time.monotonic(); convert the receive time onto that clock once.
        origin = loop.time() - (time.perf_counter_ns() - t_received_ns) / 1e9
        try:
            assert self.transport is not None
            self.transport.write(
                self._headers(200, "text/event-stream", "Transfer-Encoding: chunked\r\n")
            )
            sent = 0
            while sent < tokens:
                # Tokens come every itl_ms; a chunk of several leaves when its last is ready.
                ready = sent + min(t.tokens_per_chunk, tokens - sent) - 1
                deadline = origin + (t.ttft_ms + ready * t.itl_ms) / 1000.0
                delay = deadline - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                n = min(t.tokens_per_chunk, tokens - sent)
                text = "".join(f"t{sent + i} " for i in range(n))
                choice: dict[str, Any] = (
                    {"index": 0, "delta": {"content": text}, "finish_reason": None}
                    if chat
                    else {"index": 0, "text": text, "finish_reason": None}
                )
                data = _chunk({"choices": [choice]})
                if self.transport is None:
                    return
                served.sent_ns.append(time.perf_counter_ns())
                self.transport.write(data)
                sent += n
            server.counters.tokens_predicted += tokens
            first, last = served.sent_ns[0], served.sent_ns[-1]
            final_choice = (
                {"index": 0, "delta": {}, "finish_reason": "length"}
                if chat
                else {"index": 0, "text": "", "finish_reason": "length"}
            )
            final = {
                "choices": [final_choice],
                "usage": {
                    "prompt_tokens": n_prompt,
                    "completion_tokens": tokens,
                    "total_tokens": n_prompt + tokens,
                },
                "timings": {
                    "cache_n": 0,
                    "prompt_n": n_prompt,
                    "prompt_ms": (first - t_received_ns) / 1e6,
                    "predicted_n": tokens,
                    "predicted_ms": (last - first) / 1e6,
                },
            }
            if self.transport is None:
                return
            self.transport.write(_chunk(final) + _chunk_done())
        finally:
            server.counters.processing -= 1
            self.busy = False
            self.stream = None
        if not t.keep_alive:
            self._close()
        elif self.buffer:
            self._next_request(time.perf_counter_ns())


def _chunk_done() -> bytes:
    data = b"data: [DONE]\n\n"
    return f"{len(data):X}\r\n".encode() + data + b"\r\n0\r\n\r\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workbench.mock_server",
        description="A streaming OpenAI-compatible mock server with exact, known timing.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument("--itl-ms", type=float, default=20.0, help="gap between chunks")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per request")
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument("--slots", type=int, default=256, help="what /props reports")
    parser.add_argument("--close", action="store_true", help="no keep-alive")
    args = parser.parse_args(argv)
    try:
        timing = Timing(
            args.ttft_ms,
            args.itl_ms,
            args.tokens,
            args.tokens_per_chunk,
            args.slots,
            not args.close,
        )
    except ValueError as exc:
        parser.error(str(exc))
    asyncio.run(_serve(timing, args.host, args.port))
    return 0


async def _serve(timing: Timing, host: str, port: int) -> None:
    server = MockServer(timing)
    await server.start(host, port)
    print(f"listening on http://{host}:{server.port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.close()


if __name__ == "__main__":
    sys.exit(main())
