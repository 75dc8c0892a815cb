"""The bytes a streaming server writes: HTTP/1.1 heads, chunked transfer encoding and SSE
events, and the request it reads.

One writer for the timed mock and the test suite's fault-injecting fake
(``tests/fakes/sse_server.py``), so both send what the client under test parses the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_HEADER_BYTES = 64 * 1024  # a request's head
MAX_BODY_BYTES = 8 * 1024 * 1024
REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
LAST_CHUNK = b"0\r\n\r\n"  # ends a chunked body


def response_head(status: int, *headers: str) -> bytes:
    """A response's status line and ``headers`` (each ``Name: value``), blank line included."""
    lines = "".join(f"{header}\r\n" for header in headers)
    return f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n{lines}\r\n".encode()


def chunk(data: bytes) -> bytes:
    """One piece of a chunked body: its size in hex, the bytes, CRLF."""
    return f"{len(data):X}\r\n".encode() + data + b"\r\n"


def sse_event(payload: Mapping[str, Any] | str, field: str = "data") -> bytes:
    """One SSE event, ``data: <payload>`` and a blank line: a JSON object compact, its text
    as UTF-8 (not escaped, as llama-server writes it), or a string such as ``[DONE]`` as it
    is."""
    text = (
        payload
        if isinstance(payload, str)
        else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    )
    return f"{field}: {text}\n\n".encode()


DONE = sse_event("[DONE]")


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
