"""The streaming HTTP client on its own, against the fake server: what it hands on of a good
stream, and how it stops at each way a server can break one (a lying head, broken framing, a
stall, an endless body, an error status, a crash mid-stream)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator

import pytest

from tests.fakes.sse_server import Behaviour, FakeServer
from workbench.engine.net.http_stream import (
    HIGH_WATER_BYTES,
    MAX_HEAD_BYTES,
    READ_BUDGET_BYTES,
    ConnectFailed,
    Endpoint,
    HttpStreamError,
    KernelStampedSocket,
    StreamClient,
    StreamedResponse,
)
from workbench.engine.net.sse import SSEParser

CHAT = {"messages": [{"role": "user", "content": "hi"}], "stream": True}


async def send(client: StreamClient, method: str = "POST", path: str = "/v1/chat/completions"):
    """A request on a connection of its own: the response and when it was submitted."""
    response = await client.connect()
    payload = json.dumps(CHAT).encode() if method == "POST" else b""
    submitted: list[int] = []
    head = client.request_head(method, path, len(payload), {})
    await response.send(head, payload, submitted.append)
    return response, submitted[0]


async def read_all(response: StreamedResponse) -> list[tuple[int, bytes]]:
    reads: list[tuple[int, bytes]] = []
    while parts := await response.body():
        reads += parts
    return reads


def texts(data: bytes) -> list[str]:
    """The token texts of a chat stream's events."""
    out = []
    for event in SSEParser().feed(data):
        if event.data != "[DONE]":
            delta = json.loads(event.data)["choices"][0]["delta"]
            out += [delta["content"]] if "content" in delta else []
    return out


@contextlib.asynccontextmanager
async def fake(behaviour: Behaviour | None = None, **options) -> AsyncIterator[StreamClient]:
    """A client of the fake server, answering as ``behaviour`` says."""
    server = FakeServer(behaviour or Behaviour(), **options)
    async with server, StreamClient(server.base_url) as client:
        yield client


@contextlib.asynccontextmanager
async def raw_server(reply: bytes) -> AsyncIterator[str]:
    """A server that answers any request with ``reply``, as it is, then closes."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(reply)
            await writer.drain()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()


async def test_a_stream_comes_whole_each_read_stamped_in_order() -> None:
    async with fake(Behaviour(tokens=6, delay_s=0.002)) as client:
        response, t_submit = await send(client)
        head = await response.read_head()
        reads = await read_all(response)
    assert head.status == 200 and head.headers["transfer-encoding"] == "chunked"
    assert texts(b"".join(data for _, data in reads)) == [f"tok{i} " for i in range(6)]
    stamps = [t for t, _ in reads]
    assert stamps == sorted(stamps) and stamps[0] >= t_submit
    assert response.connect_ns > 0 and response.t_connected_ns <= t_submit
    assert await response.body() == []  # the end stays the end


async def test_an_sse_body_is_handed_on_as_sent_malformed_events_included() -> None:
    """Framing is this layer's business, SSE the parser's: a broken event passes through."""
    async with fake(Behaviour(tokens=3, malformed_after=1)) as client:
        response, _ = await send(client)
        await response.read_head()
        body = b"".join(data for _, data in await read_all(response))
    assert b'data: {"choices": [{"delta": {"content": "oops"\n\n' in body
    assert body.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "not an HTTP response"),
        (b"HTTP/1.1 OK\r\n\r\n", "not an HTTP status"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 12abc\r\n\r\n", "malformed Content-Length"),
        (b"", "closed the connection without a response"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"a" * MAX_HEAD_BYTES, f"head over {MAX_HEAD_BYTES}"),
    ],
)
async def test_a_head_that_is_not_http_fails_with_its_reason(reply: bytes, error: str) -> None:
    async with raw_server(reply) as url, StreamClient(url) as client:
        response, _ = await send(client)
        with pytest.raises(HttpStreamError, match=error):
            await response.read_head()


CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"5\r\nhelloXX", "no CRLF after a chunk"),
        (b"zz\r\nhello\r\n", "chunk size b'zz'"),
        (b"1" * 2000, "chunk size line too long"),
        (b"5\r\nhello\r\n", "without sending complete message body"),  # no last chunk
    ],
)
async def test_broken_chunk_framing_fails_after_what_came_whole(body: bytes, error: str) -> None:
    async with raw_server(CHUNKED + body) as url, StreamClient(url) as client:
        response, _ = await send(client)
        await response.read_head()
        received = b""
        with pytest.raises(HttpStreamError, match=error):
            while parts := await response.body():
                received += b"".join(data for _, data in parts)
    assert received in (b"", b"hello")


async def test_a_stalled_stream_is_cut_at_the_callers_time_bound() -> None:
    async with fake(Behaviour(tokens=5, stall_after=2)) as client:
        response, _ = await send(client)
        await response.read_head()
        received = b""
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                while parts := await response.body():
                    received += b"".join(data for _, data in parts)
        waited = loop.time() - start
    assert texts(received) == ["tok0 ", "tok1 "]
    assert 0.3 <= waited < 10  # held no longer than the bound (10: a loaded machine)


async def test_an_error_status_keeps_its_head_and_its_body_is_read_to_a_bound() -> None:
    behaviour = Behaviour(status=503, extra_headers=("Retry-After: 30",))
    async with fake(behaviour) as client:
        response, _ = await send(client)
        head = await response.read_head()
        body = await response.read_bounded(10_000)
        assert await response.body() == []  # Content-Length read: the end
    assert head.status == 503 and head.headers["retry-after"] == "30"
    assert json.loads(body)["error"]["message"] == "Loading model"


async def test_a_huge_error_body_is_read_only_to_its_bound() -> None:
    async with fake(Behaviour(status=500, error_body_repeats=10_000)) as client:
        response, _ = await send(client)
        assert (await response.read_head()).status == 500
        body = await response.read_bounded(1000)
    assert len(body) == 1000 and body.startswith(b'{"error"')


async def test_a_reader_that_falls_behind_stops_the_socket_at_its_high_water_mark() -> None:
    async with fake(None, endless_paths=("/endless",)) as client:
        response, _ = await send(client, "GET", "/endless")
        await response.read_head()
        conn = response._conn
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10  # it pauses within a few ms
        while conn.queued <= HIGH_WATER_BYTES and loop.time() < deadline:
            await asyncio.sleep(0.001)
        for _ in range(20):  # paused: what is queued does not grow, however long
            await asyncio.sleep(0.005)
        assert HIGH_WATER_BYTES < conn.queued <= HIGH_WATER_BYTES + READ_BUDGET_BYTES
        taken = sum(len(data) for _, data in await response.body())
        assert taken > HIGH_WATER_BYTES - 2 * 65536  # less chunk framing, a part chunk
        assert conn.queued == 0
        async with asyncio.timeout(10):  # paused for good, it would wait forever
            assert await response.body()  # drained: it reads again


@pytest.mark.parametrize("chunked", [True, False])
async def test_a_server_that_dies_mid_stream_keeps_what_came(chunked: bool) -> None:
    async with fake(Behaviour(tokens=10, disconnect_after=3, chunked=chunked)) as client:
        response, _ = await send(client)
        await response.read_head()
        received = b""
        if chunked:  # the framing says the body was not complete
            with pytest.raises(HttpStreamError, match="without sending complete"):
                while parts := await response.body():
                    received += b"".join(data for _, data in parts)
        else:  # a body delimited by the connection: its end is the close
            received = b"".join(data for _, data in await read_all(response))
    assert texts(received) == ["tok0 ", "tok1 ", "tok2 "]


async def test_no_listener_fails_to_connect_clearly() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed below: nothing listens there
    async with StreamClient(f"http://127.0.0.1:{port}") as client:
        with pytest.raises(ConnectFailed):
            await client.connect()


def test_an_endpoint_keeps_a_gateways_path_and_names_its_host() -> None:
    gateway = Endpoint.parse("https://gpu-box/llama/")
    assert (gateway.scheme, gateway.host, gateway.port, gateway.prefix) == (
        "https",
        "gpu-box",
        443,
        "/llama",
    )
    assert gateway.host_header == "gpu-box"
    assert Endpoint.parse("http://[::1]:8080").host_header == "[::1]:8080"
    for bad in ("ftp://host", "http://", "localhost:8080"):
        with pytest.raises(ValueError, match="not an http"):
            Endpoint.parse(bad)
    head = StreamClient("http://h:81/gw").request_head("POST", "/v1/x", 2, {"X-A": "1"})
    assert head.startswith(b"POST /gw/v1/x HTTP/1.1\r\nHost: h:81\r\n")
    assert b"Content-Length: 2\r\n" in head and head.endswith(b"X-A: 1\r\n\r\n")


class _Flood:
    """A socket that always has bytes: at most 250,000 a read, as a kernel gives what it
    has received (a budget of 1 MiB is then not a whole number of reads)."""

    def __init__(self, real: socket.socket) -> None:
        self.real, self.asked = real, []

    def recvmsg(self, size: int, ancillary: int) -> tuple[bytes, list, int, None]:
        self.asked.append(size)
        return b"x" * min(size, 250_000), [], 0, None

    def fileno(self) -> int:
        return self.real.fileno()


async def test_one_turn_of_the_loop_reads_no_more_than_its_budget() -> None:
    """A read past the budget's last byte made a turn take up to a read more (256 KiB),
    and a reader behind hold that much more than its high-water mark says."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.setblocking(False)
        reads = KernelStampedSocket(ours, asyncio.get_running_loop())
        flood = _Flood(ours)
        reads.sock = flood  # type: ignore[assignment]
        reads._readable()
        assert reads.queued == READ_BUDGET_BYTES
        reads._stop_reading()
