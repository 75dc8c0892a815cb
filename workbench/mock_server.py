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

It speaks HTTP/1.1 with keep-alive (``--close`` answers ``Connection: close`` instead) and
serves ``/health``, ``/v1/models`` and ``/metrics`` as the server ``--metrics`` names does
(llama.cpp by default, vLLM or SGLang): its names, labels and HELP lines (``EXPOSITIONS``),
with values from what the mock is doing. As llama.cpp it also serves ``/props`` and ``/slots``
and ends each stream with ``usage`` and ``timings``; as vLLM or SGLang those paths are 404 and
a stream ends with ``usage`` only, as theirs do. Run it in its own process
(``python -m workbench.mock_server --port 0``): in the measuring process it would share the
interpreter with the client it checks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.engine.figures.server_kinds import LLAMACPP, SGLANG, VLLM, ServerKind
from workbench.engine.net.bounded_http import bounded_get
from workbench.engine.net.http_stream import (
    HttpStreamError,
    KernelStampedSocket,
    enable_kernel_stamps,
)

MAX_HEADER_BYTES = 64 * 1024  # a request's head
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_LOG = 100_000  # served requests kept for /mock/log
MODEL = "mock"
N_CTX = 4096  # each slot's context, as /props reports it: the KV pool is slots x N_CTX


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
    """What /metrics reports, so the plots and the cross-checks against server counts can be
    tested: streams in flight and the tokens they hold in the KV cache (prompt and output so
    far), token counters, and finished requests by finish reason."""

    prompt_tokens: int = 0
    tokens_predicted: int = 0
    processing: int = 0
    held_tokens: int = 0
    finished: Counter[str] = field(default_factory=Counter)


def _go_float(value: float) -> str:
    """A number as prometheus_client (vLLM's and SGLang's exporter) writes it: ``2.0``."""
    return repr(float(value))


@dataclass(frozen=True)
class Exposition:
    """How one kind of server writes its /metrics: the HELP text of each name, the labels on
    every series (in its order), how it writes a number, whether it reports KV-cache use,
    the finish reasons its request counter is split by (each series there from the start),
    and whether a counter shows a series only once it has counted (a labelled
    prometheus_client counter never incremented has none)."""

    kind: ServerKind
    help: dict[str, str]
    labels: tuple[tuple[str, str], ...]
    number: Callable[[float], str]
    kv_usage: bool
    finish_reasons: tuple[str, ...] = ()
    counted_only: bool = False


# Recorded from the servers' own source (see ``server_kinds`` for the files): llama.cpp's
# ``# HELP llamacpp:<name> <help>`` / ``# TYPE`` / bare ``llamacpp:<name> <value>`` lines
# (a C++ stream's number); vLLM's and SGLang's prometheus_client exposition, vLLM labelled
# model_name and engine (its request counter also finished_reason), SGLang model_name (as its
# production-metrics documentation shows it).
EXPOSITIONS = {
    LLAMACPP.key: Exposition(
        LLAMACPP,
        {
            "llamacpp:requests_processing": "Number of requests processing",
            "llamacpp:requests_deferred": "Number of requests deferred",
            "llamacpp:prompt_tokens_total": (
                "Number of prompt tokens processed, excluding cached tokens"
            ),
            "llamacpp:tokens_predicted_total": "Number of generation tokens processed",
        },
        (),
        lambda value: f"{value:g}",
        kv_usage=False,  # current builds report none (the window reads /slots instead)
    ),
    VLLM.key: Exposition(
        VLLM,
        {
            "vllm:num_requests_running": "Number of requests in model execution batches.",
            "vllm:num_requests_waiting": "Number of requests waiting to be processed.",
            "vllm:kv_cache_usage_perc": "KV-cache usage. 1 means 100 percent usage.",
            "vllm:prompt_tokens_total": "Number of prefill tokens processed.",
            "vllm:generation_tokens_total": "Number of generation tokens processed.",
            "vllm:request_success_total": "Count of successfully processed requests.",
        },
        (("model_name", MODEL), ("engine", "0")),
        _go_float,
        kv_usage=True,
        # vllm/v1/engine/__init__.py's FINISH_REASON_STRINGS, a child of each made at start.
        finish_reasons=("stop", "length", "abort", "error", "repetition"),
    ),
    SGLANG.key: Exposition(
        SGLANG,
        {
            "sglang:num_running_reqs": "The number of running requests.",
            "sglang:num_queue_reqs": "The number of requests in the waiting queue.",
            "sglang:token_usage": "The token usage.",
            "sglang:prompt_tokens_total": "Number of prefill tokens processed.",
            "sglang:generation_tokens_total": "Number of generation tokens processed.",
            "sglang:num_requests_total": "Number of requests processed.",
        },
        (("model_name", MODEL),),
        _go_float,
        kv_usage=True,
        counted_only=True,
    ),
}


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


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: bytes
    t_received_ns: int  # when the kernel received its last byte


class BadRequest(Exception):
    """A request this server cannot read; its message is the reply's body."""


def take_request(buffer: bytearray, t_ns: int) -> Request | None:
    """Cut one whole request off the front of ``buffer``; None until one is whole."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        if len(buffer) > MAX_HEADER_BYTES:
            raise BadRequest("headers too large")
        return None
    head = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    length = 0
    for line in head[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise BadRequest("bad Content-Length") from None
    if not 0 <= length <= MAX_BODY_BYTES:
        raise BadRequest("body too large")
    if len(buffer) < end + 4 + length:
        return None
    body = bytes(buffer[end + 4 : end + 4 + length])
    del buffer[: end + 4 + length]
    parts = head[0].split(" ")
    method, path = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
    return Request(method, path, body, t_ns)


class MockServer:
    """Serves every connection on one event loop; the schedule, counters and log are shared.

    Requests are read with kernel receive timestamps (as the workbench reads responses), so
    the schedule starts when the request arrived, not when this loop got round to it."""

    def __init__(self, timing: Timing, metrics: str = LLAMACPP.key) -> None:
        self.timing = timing
        self.exposition = EXPOSITIONS[metrics]
        self.counters = Counters()
        self.log: list[Served] = []
        self.port = 0
        self._listener: socket.socket | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._chunks: dict[tuple[bool, int, int], bytes] = {}

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

    def _headers(self, status: int, content_type: str, extra: str = "") -> bytes:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "Error")
        connection = "keep-alive" if self.timing.keep_alive else "close"
        return (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
            f"Connection: {connection}\r\n{extra}\r\n"
        ).encode()

    async def _reply(
        self, conn: KernelStampedSocket, status: int, content_type: str, body: str
    ) -> None:
        data = body.encode()
        head = self._headers(status, content_type, f"Content-Length: {len(data)}\r\n")
        await conn.write(head + data)

    async def _answer(self, conn: KernelStampedSocket, request: Request) -> None:
        if request.method == "GET":
            answer = self.document(request.path)
            if answer is None:
                await self._reply(conn, 404, "application/json", '{"error":{"code":404}}')
            else:
                await self._reply(conn, *answer)
            return
        if request.method != "POST" or request.path not in (
            "/v1/chat/completions",
            "/v1/completions",
        ):
            await self._reply(conn, 404, "application/json", '{"error":{"code":404}}')
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
        """/metrics as the server it stands for writes it. Every stream runs at once, so
        none waits; the KV cache holds each stream's prompt and output so far."""
        e, c = self.exposition, self.counters
        kind = e.kind
        rows: list[tuple[str, str, list[tuple[dict[str, str], float]]]] = [
            (kind.running[0], "gauge", [({}, c.processing)]),
            (kind.waiting[0], "gauge", [({}, 0)]),
        ]
        if e.kv_usage:
            pool = self.timing.slots * N_CTX
            rows.append((kind.kv_usage[0], "gauge", [({}, min(1.0, c.held_tokens / pool))]))
        rows += [
            (kind.prompt_tokens[0], "counter", [({}, c.prompt_tokens)]),
            (kind.output_tokens[0], "counter", [({}, c.tokens_predicted)]),
        ]
        if kind.requests and e.finish_reasons:
            split = [({"finished_reason": r}, c.finished[r]) for r in e.finish_reasons]
            rows.append((kind.requests[0], "counter", split))
        elif kind.requests:
            rows.append((kind.requests[0], "counter", [({}, c.finished.total())]))
        lines = []
        for name, type_, series in rows:
            lines += [f"# HELP {name} {e.help[name]}", f"# TYPE {name} {type_}"]
            for extra, value in series:
                if e.counted_only and type_ == "counter" and not value:
                    continue
                pairs = ",".join(f'{k}="{v}"' for k, v in (*e.labels, *extra.items()))
                labels = f"{{{pairs}}}" if pairs else ""
                lines.append(f"{name}{labels} {e.number(value)}")
        return "\n".join(lines) + "\n"

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
                return 200, "application/json", "[]"
            case "/metrics":
                return 200, "text/plain; version=0.0.4", self.metrics_text()
            case "/mock/log":
                body = json.dumps([s.to_dict() for s in self.log])
                return 200, "application/json", body
        return None

    def _token_chunk(self, chat: bool, first: int, count: int) -> bytes:
        """The chunk carrying tokens ``first`` .. ``first + count - 1``, rendered once."""
        key = (chat, first, count)
        chunk = self._chunks.get(key)
        if chunk is None:
            text = "".join(f"t{first + i} " for i in range(count))
            choice: dict[str, Any] = (
                {"index": 0, "delta": {"content": text}, "finish_reason": None}
                if chat
                else {"index": 0, "text": text, "finish_reason": None}
            )
            chunk = self._chunks[key] = _chunk({"choices": [choice]})
        return chunk

    async def _stream(
        self, conn: KernelStampedSocket, body: dict[str, Any], chat: bool, request: Request
    ) -> None:
        t = self.timing
        max_tokens = body.get("max_tokens")
        tokens = t.tokens
        if isinstance(max_tokens, int) and 0 < max_tokens < tokens:
            tokens = max_tokens
        n_prompt = prompt_tokens(body)
        served = Served(_prompt_text(body), request.t_received_ns)
        if len(self.log) < MAX_LOG:
            self.log.append(served)
        self.counters.prompt_tokens += n_prompt
        self.counters.processing += 1
        self.counters.held_tokens += n_prompt
        sent = 0
        loop = asyncio.get_running_loop()
        # loop.time() is time.monotonic(); put the arrival on that clock once.
        origin = loop.time() - (time.perf_counter_ns() - request.t_received_ns) / 1e9
        try:
            await conn.write(
                self._headers(200, "text/event-stream", "Transfer-Encoding: chunked\r\n")
            )
            while sent < tokens:
                # Tokens come every itl_ms; a chunk of several leaves when its last is ready.
                n = min(t.tokens_per_chunk, tokens - sent)
                deadline = origin + (t.ttft_ms + (sent + n - 1) * t.itl_ms) / 1000.0
                delay = deadline - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                data = self._token_chunk(chat, sent, n)
                served.sent_ns.append(time.perf_counter_ns())
                await conn.write(data)
                sent += n
                self.counters.held_tokens += n
            self.counters.tokens_predicted += tokens
            first, last = served.sent_ns[0], served.sent_ns[-1]
            # "length" means max_tokens was reached; fewer tokens end as a model's own stop.
            finish = "length" if tokens == max_tokens else "stop"
            final_choice = (
                {"index": 0, "delta": {}, "finish_reason": finish}
                if chat
                else {"index": 0, "text": "", "finish_reason": finish}
            )
            final: dict[str, Any] = {
                "choices": [final_choice],
                "usage": {
                    "prompt_tokens": n_prompt,
                    "completion_tokens": tokens,
                    "total_tokens": n_prompt + tokens,
                },
            }
            if self.exposition.kind is LLAMACPP:  # its own account of the request
                final["timings"] = {
                    "cache_n": 0,
                    "prompt_n": n_prompt,
                    "prompt_ms": (first - request.t_received_ns) / 1e6,
                    "predicted_n": tokens,
                    # As llama.cpp times it: from the first token to the last, the
                    # tokens the first chunk held back included.
                    "predicted_ms": (last - first) / 1e6
                    + (min(t.tokens_per_chunk, tokens) - 1) * t.itl_ms,
                }
            await conn.write(_chunk(final) + _chunk_done())
            self.counters.finished[finish] += 1
        finally:
            self.counters.processing -= 1
            self.counters.held_tokens -= n_prompt + sent


def _chunk_done() -> bytes:
    data = b"data: [DONE]\n\n"
    return f"{len(data):X}\r\n".encode() + data + b"\r\n0\r\n\r\n"


class MockProcess:
    """The mock in a process of its own (it must not share an interpreter with the client it
    checks), optionally pinned to one core: its address, what it served, and a stop."""

    def __init__(self, *args: str, core: int | None = None) -> None:
        command = [sys.executable, "-m", "workbench.mock_server", "--port", "0", *args]
        root = Path(__file__).resolve().parent.parent
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=root)
        if core is not None and hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > core:
            os.sched_setaffinity(self.process.pid, {core})
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"the mock server did not start: {line!r}")
        self.url = line.removeprefix("listening on ")

    def served(self) -> dict[str, dict[str, Any]]:
        """What it did with each prompt's latest request (``/mock/log``)."""
        answer = bounded_get(self.url, "/mock/log", max_bytes=256 * 2**20, deadline_s=30.0)
        if answer is None or answer.status != 200:
            raise RuntimeError("the mock server's log could not be read")
        return {s["prompt"]: s for s in json.loads(answer.body)}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> MockProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


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
    parser.add_argument(
        "--metrics",
        choices=sorted(EXPOSITIONS),
        default=LLAMACPP.key,
        help="the server whose /metrics names (and endpoints) to speak (llamacpp)",
    )
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
    asyncio.run(_serve(timing, args.host, args.port, args.metrics))
    return 0


async def _serve(timing: Timing, host: str, port: int, metrics: str) -> None:
    server = MockServer(timing, metrics)
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
