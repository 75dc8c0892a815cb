"""A request that ends: at most so many bytes, within a total deadline.

httpx's timeouts bound each read, not the whole answer: a server that sends an endless body,
or its head one byte every few seconds, would keep a probe reading (and growing) for hours.
Every probe and sample of a server, and every call to its tokenizer, goes through here, on
the project's own HTTP client under one ``asyncio.timeout`` for connect, head and body
together.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from workbench.engine.net.http_stream import ConnectFailed, HttpStreamError, StreamClient

MAX_BYTES = 4 * 2**20
DEADLINE_S = 5.0
T = TypeVar("T")


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


async def get(
    base_url: str,
    path: str,
    headers: dict[str, str] | None = None,
    max_bytes: int = MAX_BYTES,
    deadline_s: float = DEADLINE_S,
) -> Answer | None:
    """The status and body of ``GET path``; None when the whole answer did not come within
    ``deadline_s``, was over ``max_bytes``, or broke off. A refused connection raises
    ``ConnectFailed``: the caller says what that means."""
    return await _request(base_url, "GET", path, b"", headers, max_bytes, deadline_s)


async def post_json(
    base_url: str,
    path: str,
    payload: Any,
    headers: dict[str, str] | None = None,
    max_bytes: int = MAX_BYTES,
    deadline_s: float = DEADLINE_S,
) -> Answer | None:
    """``POST path`` with a JSON body, bounded as ``get`` is."""
    body = json.dumps(payload).encode()
    return await _request(base_url, "POST", path, body, headers, max_bytes, deadline_s)


async def _request(
    base_url: str,
    method: str,
    path: str,
    body: bytes,
    headers: dict[str, str] | None,
    max_bytes: int,
    deadline_s: float,
) -> Answer | None:
    try:
        async with (
            asyncio.timeout(deadline_s),
            StreamClient(base_url, connect_timeout_s=deadline_s, headers=headers) as client,
        ):
            response = await client.connect()
            head = client.request_head(method, path, len(body), {"Accept": "*/*"})
            await response.send(head, body, lambda t_ns: None)
            status = (await response.read_head()).status
            answer = await response.read_bounded(max_bytes + 1)
    except TimeoutError:
        return None
    except ConnectFailed:
        raise
    except HttpStreamError:
        return None
    return None if len(answer) > max_bytes else Answer(status, answer)


async def get_all(
    base_url: str,
    waits: Mapping[str, float],
    headers: dict[str, str] | None = None,
    max_bytes: int = MAX_BYTES,
) -> dict[str, Answer | None]:
    """``GET`` each path of ``waits`` at once, each for at most its wait: all of them end
    within the longest wait, not the sum. A refused connection raises ``ConnectFailed``."""
    requests = [get(base_url, path, headers, max_bytes, wait) for path, wait in waits.items()]
    answers = await asyncio.gather(*requests, return_exceptions=True)
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
    return dict(zip(waits, answers, strict=True))  # type: ignore[arg-type]


def run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from blocking code: on this thread, or on a helper thread when this
    one already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def bounded_get(
    base_url: str,
    path: str,
    headers: dict[str, str] | None = None,
    max_bytes: int = MAX_BYTES,
    deadline_s: float = DEADLINE_S,
) -> Answer | None:
    """``get`` for blocking callers (the probe, the sampler's thread, the counters)."""
    return run_blocking(get(base_url, path, headers, max_bytes, deadline_s))


def bounded_get_all(
    base_url: str,
    waits: Mapping[str, float],
    headers: dict[str, str] | None = None,
    max_bytes: int = MAX_BYTES,
) -> dict[str, Answer | None]:
    """``get_all`` for blocking callers (the external server's probe)."""
    return run_blocking(get_all(base_url, waits, headers, max_bytes))
