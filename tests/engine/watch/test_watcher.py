"""What cannot be watched is one line: nothing at the address, a server without /slots, an
answer that is no list of slots; a server that stops answering mid-watch is counted, not
ended on."""

from __future__ import annotations

import asyncio
import re
import socket

import pytest

from workbench.engine.base.server_kinds import LLAMACPP, VLLM
from workbench.engine.watch.watcher import WatchError, watch
from workbench.mock_server import MockServer, Timing


def test_nothing_at_the_address_is_one_line():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(WatchError, match=re.escape(f"nothing answers at {url}")):
        asyncio.run(watch(url, 0.05, 0.2))


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        (VLLM.key, re.escape("gives no /slots (404): a llama-server started with --no-slots")),
        (LLAMACPP.key, None),
    ],
)
def test_a_server_without_slots_is_refused_and_one_with_them_is_watched(kind, said):
    async def watched():
        server = MockServer(Timing(0, 0, 4, 1), kind)
        await server.start()
        try:
            return await watch(server.base_url, 0.05, 0.3)
        finally:
            await server.close()

    if said:
        with pytest.raises(WatchError, match=said):
            asyncio.run(watched())
        return
    result = asyncio.run(watched())
    assert result.polls >= 3 and result.unanswered == 0 and result.tasks.tasks == []


def test_a_server_that_stops_answering_mid_watch_is_counted_down():
    async def watched():
        server = MockServer(Timing(0, 0, 4, 1), LLAMACPP.key)
        await server.start()
        stopping = asyncio.get_running_loop().call_later(
            0.15, asyncio.ensure_future, server.close()
        )
        try:
            return await watch(server.base_url, 0.05, 0.5)
        finally:
            stopping.cancel()
            await server.close()

    result = asyncio.run(watched())
    assert result.polls >= 2 and result.unanswered >= 3
