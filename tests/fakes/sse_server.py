"""A deterministic fake OpenAI-compatible streaming server, for faults on demand.

A real llama-server cannot be told "drop the connection after token 17" or "split a UTF-8
character across two TCP writes"; this one can. It speaks just enough HTTP/1.1 on asyncio
streams: one request per connection, ``Connection: close`` on every reply, SSE bodies either
chunked (the default, as llama-server sends them) or delimited by closing the connection.
Its bytes are written by the mock server's ``framing``, as the timed mock writes its own.

Each request is answered according to a ``Behaviour``; pass one, or a function from the request
body to a ``Behaviour`` so that requests in the same run can be treated differently::

    async with FakeServer(Behaviour(tokens=20, disconnect_after=17)) as server:
        ... server.base_url ...
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.mock_server.framing import DONE, LAST_CHUNK, chunk, response_head, sse_event

CLOSE = "Connection: close"  # one request per connection


@dataclass(frozen=True)
class Behaviour:
    """What the server does with one streaming request. Fault positions count tokens sent."""

    tokens: int = 5
    texts: tuple[str, ...] | None = None  # token texts; default "tok0 ", "tok1 ", ...
    delay_s: float = 0.0  # between consecutive tokens
    first_delay_s: float = 0.0  # before the first token (after any role-only delta)
    role_delta: bool = False  # chat: a first delta with only the role, no text
    text_key: str = "content"  # chat delta key: "content" or "reasoning_content"
    status: int = 200  # anything else: reply with this status and ``error_body``
    error_body: str = '{"error": {"code": 503, "message": "Loading model"}}'
    error_body_repeats: int = 0  # > 0: the error body sent this many times, chunked (huge)
    extra_headers: tuple[str, ...] = ()  # e.g. "Location: ...", "Retry-After: 30"
    html: str | None = None  # answer 200 with this HTML page instead of a stream
    raw_events: tuple[bytes, ...] = ()  # sent as they are before the tokens (non-UTF-8...)
    split_framing: bool = False  # chunk size line, data and CRLF each in a write of its own
    interim: bool = False  # a "100 Continue" head before the real one
    chunked: bool = True  # False: no Transfer-Encoding; the body ends when the socket closes
    malformed_after: int | None = None  # send an event whose data is not JSON
    error_event_after: int | None = None  # send an error event, then end the stream
    error_style: str = "field"  # "field": `error: {...}`; "data": `data: {"error": {...}}`
    stall_after: int | None = None  # stop sending, keep the connection open
    disconnect_after: int | None = None  # close the socket without [DONE]
    split_utf8: bool = False  # write each event in two parts, cut inside a multibyte char
    finish_reason: str | None = "stop"
    usage: bool = True
    completion_tokens: int | None = None  # usage count; defaults to ``tokens``
    timings: bool = True
    prompt_n: int = 12
    prompt_ms: float = 4.0
    cache_n: int = 0
    send_done: bool = True

    def text(self, i: int) -> str:
        return self.texts[i] if self.texts is not None else f"tok{i} "


@dataclass
class Received:
    method: str
    path: str
    body: dict[str, Any] | None
    t_received: float  # time.perf_counter()
    headers: dict[str, str] = field(default_factory=dict)  # names lower-cased


@dataclass
class FakeServer:
    behaviour: Behaviour | Callable[[dict[str, Any]], Behaviour] = field(default_factory=Behaviour)
    received: list[Received] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)  # bugs in this fake, if any
    in_flight: int = 0
    max_in_flight: int = 0
    endless_paths: tuple[str, ...] = ()  # GETs answered 200 with a body that never ends
    prefix: str = ""  # a gateway's path before /v1 (http://host/gw/v1/...)

    def __post_init__(self) -> None:
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def completions(self) -> list[Received]:
        return [r for r in self.received if r.method == "POST"]

    async def __aenter__(self) -> FakeServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()
        await asyncio.sleep(0)  # let closed transports finish (no ResourceWarning)
        if self.errors and exc == (None, None, None):
            raise AssertionError(f"the fake server failed: {self.errors!r}")

    # -- one connection --------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away first: that is its business
        except asyncio.CancelledError:
            pass  # the fake is closing; a cancelled handler is logged as an error in 3.11
        except Exception as exc:
            self.errors.append(exc)
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_line = (await reader.readline()).decode("latin-1").strip()
        if not request_line:
            return
        method, path, _ = request_line.split(" ", 2)
        length = 0
        headers: dict[str, str] = {}
        while (line := (await reader.readline()).decode("latin-1").strip()) != "":
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        raw = await reader.readexactly(length) if length else b""
        body = json.loads(raw) if raw else None
        self.received.append(Received(method, path, body, time.perf_counter(), headers))

        if method == "GET" and path in self.endless_paths:
            writer.write(
                response_head(200, "Content-Type: text/plain", "Transfer-Encoding: chunked", CLOSE)
            )
            part = chunk(b"# " + b"x" * 65533 + b"\n")
            for _ in range(100_000):  # 6.5 GB at most: the client must stop long before
                writer.write(part)
                await writer.drain()
            return
        if method == "GET" and path == "/health":
            await _reply(writer, 200, '{"status": "ok"}')
            return
        path = path.removeprefix(self.prefix)
        if method != "POST" or path not in ("/v1/chat/completions", "/v1/completions"):
            await _reply(writer, 404, '{"error": {"code": 404, "message": "File Not Found"}}')
            return
        behaviour = self.behaviour(body or {}) if callable(self.behaviour) else self.behaviour
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            chat = path == "/v1/chat/completions"
            if (body or {}).get("stream") is False:
                await self._whole(writer, behaviour, chat)
                end_body = False
            else:
                end_body = await self._stream(writer, behaviour, chat)
        finally:
            self.in_flight -= 1  # before the client can see the end of the body
        if end_body and behaviour.chunked:
            writer.write(LAST_CHUNK)
            await writer.drain()

    async def _whole(self, writer: asyncio.StreamWriter, b: Behaviour, chat: bool) -> None:
        """A request with ``"stream": false``: the whole answer as one JSON body, once every
        token is made (``html`` answers a page instead, as a broken proxy would)."""
        await asyncio.sleep(b.first_delay_s + max(0, b.tokens - 1) * b.delay_s)
        if b.html is not None:
            await _reply(writer, 200, b.html, ("Content-Type: text/html",))
            return
        text = "".join(b.text(i) for i in range(b.tokens))
        choice: dict[str, Any] = {"index": 0, "finish_reason": b.finish_reason}
        choice.update(
            {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
        )
        n = b.completion_tokens if b.completion_tokens is not None else b.tokens
        answer = {
            "choices": [choice],
            "usage": {"prompt_tokens": b.prompt_n, "completion_tokens": n},
            "timings": {
                "prompt_n": b.prompt_n,
                "prompt_ms": b.prompt_ms,
                "predicted_n": b.tokens,
                "predicted_ms": b.tokens * 2.5,
            },
        }
        await _reply(writer, 200, json.dumps(answer))

    async def _stream(self, writer: asyncio.StreamWriter, b: Behaviour, chat: bool) -> bool:
        """Write the response; False when the body must be cut off (no proper end)."""
        if b.status != 200 and b.error_body_repeats:
            writer.write(
                response_head(
                    b.status, "Content-Type: text/plain", "Transfer-Encoding: chunked", CLOSE
                )
            )
            part = chunk(b.error_body.encode())
            for _ in range(b.error_body_repeats):  # bounded: the client should stop first
                writer.write(part)
                await writer.drain()
            return False
        if b.status != 200:
            await _reply(writer, b.status, b.error_body, b.extra_headers)
            return False
        if b.html is not None:
            await _reply(writer, 200, b.html, ("Content-Type: text/html",))
            return False
        headers = ["Content-Type: text/event-stream", CLOSE]
        if b.chunked:
            headers.append("Transfer-Encoding: chunked")
        if b.interim:
            writer.write(response_head(100))
        writer.write(response_head(200, *headers))
        await writer.drain()

        async def send(data: bytes) -> None:
            parts = [data]
            if b.split_utf8:
                cut = next((i for i, byte in enumerate(data) if byte >= 0xC0), None)
                if cut is not None:
                    parts = [data[: cut + 1], data[cut + 1 :]]  # lead byte | continuation
            for part in parts:
                if b.split_framing and b.chunked:
                    for piece in (f"{len(part):X}\r\n".encode(), part, b"\r\n"):
                        writer.write(piece)
                        await writer.drain()
                        await asyncio.sleep(0.002)  # apart on the wire: separate reads
                    continue
                writer.write(chunk(part) if b.chunked else part)
                await writer.drain()

        def choice(text: str | None, finish: str | None = None) -> dict[str, Any]:
            if not chat:
                return {"index": 0, "text": text or "", "finish_reason": finish}
            delta = {b.text_key: text} if text is not None else {}
            return {"index": 0, "delta": delta, "finish_reason": finish}

        for raw in b.raw_events:
            writer.write(chunk(raw) if b.chunked else raw)
            await writer.drain()
        if b.role_delta and chat:
            role = {"index": 0, "delta": {"role": "assistant", "content": None}}
            await send(sse_event({"choices": [role]}))
        if b.first_delay_s:
            await asyncio.sleep(b.first_delay_s)
        for i in range(b.tokens + 1):
            if i == b.stall_after:
                await asyncio.Event().wait()  # forever; cancelled when the server closes
            if i == b.disconnect_after:
                return False  # _handle closes the socket: no [DONE], body not terminated
            if i == b.malformed_after:
                await send(sse_event('{"choices": [{"delta": {"content": "oops"'))
            if i == b.error_event_after:
                error = {"code": 500, "message": "context shift disabled", "type": "server_error"}
                if b.error_style == "field":
                    await send(sse_event(error, field="error"))
                else:
                    await send(sse_event({"error": error}))
                return True
            if i == b.tokens:
                break
            if i and b.delay_s:
                await asyncio.sleep(b.delay_s)
            await send(sse_event({"choices": [choice(b.text(i))]}))
        final: dict[str, Any] = {"choices": [choice(None, b.finish_reason)]}
        n = b.completion_tokens if b.completion_tokens is not None else b.tokens
        if b.usage:
            final["usage"] = {
                "prompt_tokens": b.prompt_n,
                "completion_tokens": n,
                "total_tokens": b.prompt_n + n,
            }
        if b.timings:
            final["timings"] = {
                "cache_n": b.cache_n,
                "prompt_n": b.prompt_n,
                "prompt_ms": b.prompt_ms,
                "predicted_n": b.tokens,
                "predicted_ms": b.tokens * 2.5,
            }
        await send(sse_event(final))
        if b.send_done:
            await send(DONE)
        return True


async def _reply(
    writer: asyncio.StreamWriter, status: int, body: str, extra: tuple[str, ...] = ()
) -> None:
    data = body.encode("utf-8")
    content_type = (
        ()
        if any(h.startswith("Content-Type") for h in extra)
        else ("Content-Type: application/json",)
    )
    head = response_head(status, *content_type, f"Content-Length: {len(data)}", *extra, CLOSE)
    writer.write(head + data)
    await writer.drain()


@contextlib.contextmanager
def serve_in_thread(behaviour: Behaviour | Callable[[dict[str, Any]], Behaviour]):
    """The fake on a loop of its own thread, for code that must run on the main thread
    (the CLI installs signal handlers); yields the server (read ``received`` once done)."""
    import threading

    ready: dict[str, Any] = {}
    stop = threading.Event()

    async def serve() -> None:
        async with FakeServer(behaviour) as server:
            ready["server"] = server
            while not stop.is_set():
                await asyncio.sleep(0.02)

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while "server" not in ready and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield ready["server"]
    finally:
        stop.set()
        thread.join(10)
