"""A lean HTTP/1.1 client for streamed responses, timestamping bytes as the socket yields them.

Why not httpx for the measured streams: every chunk through httpx passes h11's parser, httpcore's
connection state and anyio's stream wrappers before the caller can take its timestamp; with 64
concurrent streams on one event loop that work queues up and shows as TTFT. Here the timestamp
is the first thing ``data_received`` does, and the rest (chunked framing, SSE, JSON) runs later,
after every socket that was ready in the same loop turn has been read and stamped.

Each request gets a fresh connection (llama-server drops some reused keep-alive connections
after a streamed response). Connecting is timed apart from the request, so its cost is
reported, not hidden in TTFT. Everything read is bounded: the response head, an error body,
and a stream's total bytes.
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import re
import socket
import ssl
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

MAX_HEAD_BYTES = 64 * 1024
READ_BYTES = 256 * 1024
READ_BUDGET_BYTES = 1024 * 1024  # per loop turn and socket
HIGH_WATER_BYTES = 8 * 1024 * 1024  # queued and not yet taken by the reader: stop reading
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
# Linux's receive timestamps (asm-generic values, as on x86 and ARM); Python names neither.
SO_TIMESTAMPNS = SCM_TIMESTAMPNS = 35
_ANCILLARY_BYTES = socket.CMSG_SPACE(16)
STAMP_SANITY_NS = 60 * 1_000_000_000


class HttpStreamError(Exception):
    """The server broke HTTP/1.1 framing, or the connection broke mid-response."""


class ConnectFailed(HttpStreamError):
    """No connection could be opened."""


@dataclass(frozen=True)
class Endpoint:
    scheme: str
    host: str
    port: int
    prefix: str = ""  # a base URL's path (a gateway's /llama), put before each request's

    @classmethod
    def parse(cls, base_url: str) -> Endpoint:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


class _Reads:
    """Reads queued with their arrival times, and a coroutine to wait for them."""

    def __init__(self) -> None:
        self.reads: collections.deque[tuple[int, bytes]] = collections.deque()
        self.eof = False
        self.error: Exception | None = None
        self.queued = 0
        self._waiter: asyncio.Future[None] | None = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next_reads(self) -> list[tuple[int, bytes]]:
        """Every read queued since the last call; waits for one; [] at the end."""
        while not self.reads and not self.eof:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        out = list(self.reads)
        self.reads.clear()
        self.drained()
        return out

    def drained(self) -> None:
        """The reader took what was queued (a paused socket may read again)."""

    async def write(self, data: bytes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class _Protocol(_Reads, asyncio.Protocol):
    """For TLS: stamps each read as the event loop hands it over."""

    def __init__(self) -> None:
        super().__init__()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.reads.append((time.perf_counter_ns(), data))
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self._wake()

    async def write(self, data: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            raise HttpStreamError("the connection closed before the request was sent")
        self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class KernelStampedSocket(_Reads):
    """Plain TCP read with ``recvmsg``: each read carries the time the kernel received its
    last packet (Linux ``SO_TIMESTAMPNS``), so a busy event loop that reads a socket late
    does not make its bytes late. The kernel's clock is CLOCK_REALTIME; it is moved onto
    ``perf_counter_ns`` with the offset between the two taken at the read, a few
    milliseconds later at most. Where the kernel gives no stamp, the read's own time is used.
    """

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.sock = sock
        self._loop = loop
        self._last_ns = 0
        self._paused = False
        self.kernel_stamps = enable_kernel_stamps(sock)
        loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        taken = 0
        try:
            while taken < READ_BUDGET_BYTES:  # then let the loop serve other sockets
                wanted = min(READ_BYTES, READ_BUDGET_BYTES - taken)  # the budget, not past it
                data, ancillary, _, _ = self.sock.recvmsg(wanted, _ANCILLARY_BYTES)
                now = time.perf_counter_ns()
                offset = time.time_ns() - now
                if not data:
                    self._finish(None)
                    return
                taken += len(data)
                t_ns = now
                for level, kind, value in ancillary:
                    if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(value) >= 16:
                        sec, nsec = struct.unpack("qq", value[:16])
                        kernel = sec * 1_000_000_000 + nsec - offset
                        if now - STAMP_SANITY_NS < kernel <= now:  # else: the clock stepped
                            t_ns = kernel
                t_ns = max(t_ns, self._last_ns)  # one connection's reads never go back
                self._last_ns = t_ns
                self.reads.append((t_ns, data))
                self.queued += len(data)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            self._finish(exc)
            return
        if self.queued > HIGH_WATER_BYTES and not self._paused:
            # The reader is behind: stop taking bytes until it catches up (the kernel's
            # buffer then fills and TCP slows the sender), instead of growing without bound.
            self._paused = True
            self._loop.remove_reader(self.sock.fileno())
        self._wake()

    def drained(self) -> None:
        self.queued = 0
        if self._paused and not self.eof and self.sock.fileno() >= 0:
            self._paused = False
            self._loop.add_reader(self.sock.fileno(), self._readable)

    def _finish(self, error: Exception | None) -> None:
        self.eof = True
        self.error = error
        self._stop_reading()
        self._wake()

    def _stop_reading(self) -> None:
        if self.sock.fileno() >= 0:
            self._loop.remove_reader(self.sock.fileno())

    async def write(self, data: bytes) -> None:
        """Send what the socket takes at once; the rest of a large request as it drains."""
        try:
            sent = self.sock.send(data)
            if sent < len(data):
                await self._loop.sock_sendall(self.sock, data[sent:])
        except (BlockingIOError, InterruptedError):
            await self._loop.sock_sendall(self.sock, data)
        except OSError as exc:
            raise HttpStreamError(f"sending the request failed: {exc}") from None

    def close(self) -> None:
        self._stop_reading()
        self.sock.close()


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def enable_kernel_stamps(sock: socket.socket) -> bool:
    """Ask the kernel to stamp what this socket receives; set it before data can arrive
    (packets already queued may carry no stamp). Accepted sockets inherit it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


class _ChunkedDecoder:
    """Transfer-Encoding: chunked, incrementally; returns payload bytes as they complete."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._remaining = 0  # payload bytes still due in the current chunk
        self._skip_crlf = False
        self.done = False

    def feed(self, data: bytes) -> bytes:
        self._buffer += data
        out = bytearray()
        while not self.done:
            if self._remaining:
                take = min(self._remaining, len(self._buffer))
                if not take:
                    break
                out += self._buffer[:take]
                del self._buffer[:take]
                self._remaining -= take
                if self._remaining:
                    break
                self._skip_crlf = True
            if self._skip_crlf:
                if len(self._buffer) < 2:
                    break
                if self._buffer[:2] != b"\r\n":
                    raise HttpStreamError("malformed chunked body: no CRLF after a chunk")
                del self._buffer[:2]
                self._skip_crlf = False
            end = self._buffer.find(b"\r\n")
            if end < 0:
                if len(self._buffer) > 1024:
                    raise HttpStreamError("malformed chunked body: chunk size line too long")
                break
            size_text = bytes(self._buffer[:end]).split(b";", 1)[0].strip()
            if not _HEX.fullmatch(size_text):
                raise HttpStreamError(f"malformed chunked body: chunk size {size_text[:40]!r}")
            size = int(size_text, 16)
            del self._buffer[: end + 2]
            if size == 0:
                self.done = True  # trailers, if any, are ignored
                break
            self._remaining = size
        return bytes(out)


@dataclass
class ResponseHead:
    status: int
    headers: dict[str, str]


class StreamedResponse:
    """One request on its own connection: how long opening it took (``connect_ns``) and
    when it was open (``t_connected_ns``)."""

    def __init__(self, conn: _Reads, connect_ns: int, t_connected_ns: int) -> None:
        self._conn = conn
        self.connect_ns = connect_ns
        self.t_connected_ns = t_connected_ns
        self._pending = b""  # body bytes read along with the head
        self._pending_t = 0
        self.head: ResponseHead | None = None
        self._chunked: _ChunkedDecoder | None = None
        self._length: int | None = None
        self._received = 0

    async def send(self, head: bytes, body: bytes, on_submit: Callable[[int], None]) -> None:
        """Write the request; ``on_submit`` gets the ``perf_counter_ns`` taken just before."""
        data = head + body
        on_submit(time.perf_counter_ns())
        await self._conn.write(data)

    async def read_head(self) -> ResponseHead:
        """The final response head; interim ones (``100 Continue``, ``103``) are skipped."""
        while True:
            head = await self._read_one_head()
            if not 100 <= head.status < 200:
                self.head = head
                self._frame(head)
                return head

    async def _read_one_head(self) -> ResponseHead:
        buffer = bytearray()
        while True:
            reads = await self._conn.next_reads()
            if not reads:
                raise HttpStreamError(
                    "the server closed the connection without a response"
                    + (f" ({self._conn.error})" if self._conn.error else "")
                )
            for i, (t_ns, data) in enumerate(reads):
                buffer += data
                end = buffer.find(b"\r\n\r\n")
                if end >= 0:
                    head = _parse_head(bytes(buffer[:end]))
                    rest = bytes(buffer[end + 4 :])
                    # Reads after the one that completed the head go back, with their times.
                    later = reads[i + 1 :]
                    self._conn.reads.extendleft(reversed(later))
                    if rest:
                        self._conn.reads.appendleft((t_ns, rest))
                    return head
                if len(buffer) > MAX_HEAD_BYTES:
                    raise HttpStreamError(f"response head over {MAX_HEAD_BYTES} bytes")

    def _frame(self, head: ResponseHead) -> None:
        encoding = head.headers.get("transfer-encoding", "").lower()
        if "chunked" in encoding:
            self._chunked = _ChunkedDecoder()
        elif "content-length" in head.headers:
            length = head.headers["content-length"]
            if not length.isdigit():
                raise HttpStreamError(f"malformed Content-Length {length[:40]!r}")
            self._length = int(length)

    async def body(self) -> list[tuple[int, bytes]]:
        """The body bytes of every read queued since the last call, each with the time its
        read arrived; [] only once the body is complete (a read that held nothing but chunk
        framing is waited past, not taken for the end). Raises if it broke off."""
        while not self._complete():
            reads = await self._conn.next_reads()
            if not reads:
                if self._chunked is None and self._length is None:
                    return []  # a body delimited by the connection's end: this is its end
                raise HttpStreamError(
                    "peer closed connection without sending complete message body"
                    + (f" ({self._conn.error})" if self._conn.error else "")
                )
            out: list[tuple[int, bytes]] = []
            for t_ns, data in reads:
                if self._chunked is not None:
                    payload = self._chunked.feed(data)
                elif self._length is not None:
                    payload = data[: self._length - self._received]
                else:
                    payload = data
                self._received += len(payload)
                if payload:
                    out.append((t_ns, payload))
            if out:
                return out
        return []

    def _complete(self) -> bool:
        if self._chunked is not None:
            return self._chunked.done
        return self._length is not None and self._received >= self._length

    async def read_bounded(self, limit: int) -> bytes:
        """At most ``limit`` bytes of the body (an error page), then stop reading."""
        out = bytearray()
        while len(out) < limit:
            parts = await self.body()
            if not parts:
                break
            for _, data in parts:
                out += data
        return bytes(out[:limit])

    def close(self) -> None:
        self._conn.close()


def _parse_head(raw: bytes) -> ResponseHead:
    lines = raw.decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if len(status_line) < 2 or not status_line[0].startswith("HTTP/"):
        raise HttpStreamError(f"not an HTTP response: {lines[0][:100]!r}")
    try:
        status = int(status_line[1])
    except ValueError:
        raise HttpStreamError(f"not an HTTP status: {lines[0][:100]!r}") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return ResponseHead(status, headers)


class StreamClient:
    """Opens one connection per request to ``base_url`` (http or https)."""

    def __init__(
        self,
        base_url: str,
        connect_timeout_s: float = 10.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.endpoint = Endpoint.parse(base_url)
        self.headers = dict(headers or {})  # authorization: in memory only
        self.connect_timeout_s = connect_timeout_s
        self._ssl = ssl.create_default_context() if self.endpoint.scheme == "https" else None
        self._open: set[StreamedResponse] = set()
        self._addresses_cache: list[tuple[Any, ...]] | None = None
        self._lookup_lock = asyncio.Lock()

    async def __aenter__(self) -> StreamClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for response in list(self._open):
            response.close()
        self._open.clear()

    async def connect(self) -> StreamedResponse:
        loop = asyncio.get_running_loop()
        start = time.perf_counter_ns()
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                conn = await (self._connect_tls(loop) if self._ssl else self._connect_tcp(loop))
        except TimeoutError:
            raise ConnectFailed(
                f"no connection within {self.connect_timeout_s:g} s to "
                f"{self.endpoint.host}:{self.endpoint.port}"
            ) from None
        except OSError as exc:
            raise ConnectFailed(f"{exc.strerror or exc}") from None
        now = time.perf_counter_ns()
        response = StreamedResponse(conn, now - start, now)
        self._open.add(response)
        return response

    async def _addresses(self, loop: asyncio.AbstractEventLoop) -> list[tuple[Any, ...]]:
        """The server's addresses, looked up once per client: a name lookup runs on a
        thread pool and took 3 to 5 ms per request, which would land in every connect."""
        if self._addresses_cache is None:
            host, port = self.endpoint.host, self.endpoint.port
            ip = _ip(host)
            if ip is not None:  # no lookup: asyncio would still send it to a thread
                family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
                self._addresses_cache = [(family, socket.SOCK_STREAM, 0, (host, port))]
                return self._addresses_cache
            async with self._lookup_lock:
                if self._addresses_cache is None:
                    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                    self._addresses_cache = [
                        (family, kind, proto, address) for family, kind, proto, _, address in infos
                    ]
        return self._addresses_cache

    async def _connect_tcp(self, loop: asyncio.AbstractEventLoop) -> _Reads:
        error: OSError | None = None
        for family, kind, proto, address in await self._addresses(loop):
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                enable_kernel_stamps(sock)
                await loop.sock_connect(sock, address)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            except BaseException:
                sock.close()
                raise
            return KernelStampedSocket(sock, loop)
        raise error or OSError(f"no address for {self.endpoint.host}")

    async def _connect_tls(self, loop: asyncio.AbstractEventLoop) -> _Reads:
        _, protocol = await loop.create_connection(
            _Protocol,
            self.endpoint.host,
            self.endpoint.port,
            ssl=self._ssl,
            server_hostname=self.endpoint.host,
        )
        return protocol

    def release(self, response: StreamedResponse) -> None:
        response.close()
        self._open.discard(response)

    def request_head(self, method: str, path: str, length: int, extra: dict[str, str]) -> bytes:
        headers = {
            "Host": self.endpoint.host_header,
            "Accept": "text/event-stream",
            "Content-Type": "application/json",
            "Content-Length": str(length),
            "Connection": "close",
            **self.headers,
            **extra,
        }
        lines = [f"{method} {self.endpoint.prefix}{path} HTTP/1.1"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
