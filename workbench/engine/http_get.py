"""A GET that ends: at most so many bytes, within a total deadline.

httpx's timeouts bound each read, not the whole response: a server that sends an endless
body, or one byte every few seconds, would keep a probe reading (and growing) for ever. Every
probe and sample of a server goes through here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

MAX_BYTES = 4 * 2**20
DEADLINE_S = 5.0


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def bounded_get(
    client: httpx.Client, path: str, max_bytes: int = MAX_BYTES, deadline_s: float = DEADLINE_S
) -> Answer | None:
    """The status and body of ``GET path``; None when the server did not answer in time,
    sent more than ``max_bytes``, or broke the answer off. A refused connection raises
    (``httpx.ConnectError``): the caller says what that means."""
    end = time.monotonic() + deadline_s
    body = bytearray()
    try:
        with client.stream("GET", path) as response:
            for part in response.iter_bytes():
                body += part
                if len(body) > max_bytes or time.monotonic() > end:
                    return None
            return Answer(response.status_code, bytes(body))
    except (httpx.TimeoutException, httpx.ReadError, httpx.RemoteProtocolError, httpx.StreamError):
        return None
