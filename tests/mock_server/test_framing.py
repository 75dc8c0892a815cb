"""The framing the mock and the test fakes write is what the workbench's client reads back."""

from __future__ import annotations

import json

import pytest

from workbench.engine.net.http_stream import _ChunkedDecoder, _parse_head
from workbench.engine.net.sse import SSEEvent, SSEParser
from workbench.mock_server.framing import (
    DONE,
    LAST_CHUNK,
    MAX_BODY_BYTES,
    MAX_HEADER_BYTES,
    BadRequest,
    chunk,
    response_head,
    sse_event,
    take_request,
)


def test_an_event_reads_back_as_its_payload_its_text_unescaped() -> None:
    payload = {"choices": [{"delta": {"content": "héllo ✓"}}]}
    event = sse_event(payload)
    assert "héllo ✓".encode() in event  # UTF-8 on the wire, as llama-server writes it
    assert event.startswith(b"data: {") and event.endswith(b"}\n\n")
    (read,) = SSEParser().feed(event)
    assert read.event is None and json.loads(read.data) == payload
    assert SSEParser().feed(DONE) == [SSEEvent(None, "[DONE]")]
    assert SSEParser().feed(sse_event({"code": 500}, field="error")) == [
        SSEEvent("error", '{"code":500}')
    ]


def test_chunks_decode_to_what_was_framed_and_the_last_ends_the_body() -> None:
    decoder = _ChunkedDecoder()
    pieces = [sse_event({"n": i}) for i in range(3)] + [b"x" * 5000]
    assert decoder.feed(b"".join(chunk(p) for p in pieces)) == b"".join(pieces)
    assert not decoder.done
    assert decoder.feed(LAST_CHUNK) == b"" and decoder.done


def test_a_response_head_keeps_its_headers_in_order() -> None:
    head = response_head(503, "Content-Type: text/plain", "Retry-After: 30")
    assert head == (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 30\r\n\r\n"
    )
    assert response_head(429).startswith(b"HTTP/1.1 429 Error\r\n")
    parsed = _parse_head(head.removesuffix(b"\r\n\r\n"))
    assert parsed.status == 503 and parsed.headers["retry-after"] == "30"


def test_requests_are_cut_off_whole_one_at_a_time() -> None:
    one = b'POST /v1/completions HTTP/1.1\r\nContent-Length: 4\r\n\r\n{"a"'
    buffer = bytearray(one[:20])
    assert take_request(buffer, 1) is None  # head not whole
    buffer += one[20:-1]
    assert take_request(buffer, 2) is None  # body not whole
    buffer += one[-1:] + b"GET /health HTTP/1.1\r\n\r\n"
    first = take_request(buffer, 3)
    assert first is not None
    assert (first.method, first.path, first.body, first.t_received_ns) == (
        "POST",
        "/v1/completions",
        b'{"a"',
        3,
    )
    second = take_request(buffer, 4)
    assert second is not None and (second.method, second.path, second.body) == (
        "GET",
        "/health",
        b"",
    )
    assert buffer == b""


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"GET / HTTP/1.1\r\nX: " + b"a" * MAX_HEADER_BYTES, "headers too large"),
        (b"POST / HTTP/1.1\r\nContent-Length: ten\r\n\r\n", "bad Content-Length"),
        (
            f"POST / HTTP/1.1\r\nContent-Length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode(),
            "body too large",
        ),
        (b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "body too large"),
    ],
)
def test_a_request_it_cannot_read_is_refused_with_its_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(BadRequest, match=reason):
        take_request(bytearray(raw), 0)
