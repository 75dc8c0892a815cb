"""On the real llama-server: a chunk of 48 prompt tokens over a long cache costs more a
token pair than one of 256 (few query rows attend at a dearer rate), which is what the
probe's last step measures (``probe.extend``, ``calibration.small_chunk_cost``) and the
model charges chunks of fewer than 64 tokens."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from workbench.engine.base.records import RequestRecord
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.measure.sized_prompts import ServerTokenizer, sized_prompt
from workbench.engine.predict.calibration import small_chunk_cost
from workbench.engine.predict.costs import PrefillCost
from workbench.engine.predict.probe import LONG_PROMPT, SMALL_CHUNK, Phase, extend, send
from workbench.engine.server.llama_server import LlamaServer

pytestmark = pytest.mark.server


async def extended(server_binary, model_path, tmp_path) -> dict[int, list[RequestRecord]]:
    """For chunks of the probe's size and of 256 tokens: the probe's last step
    (``probe.extend``) on its long prompt, in the server's cache."""
    settings = replace(ServerSettings(), slots=2, ctx=2 * 4096)
    server = LlamaServer(server_binary, model_path, settings, tmp_path / "server.log")
    found = {}
    try:
        await server.start()
        tokenizer = ServerTokenizer(server.base_url, "completions")
        deadline = time.monotonic() + 300
        for n, size in enumerate((SMALL_CHUNK, 256)):
            long = (await sized_prompt(tokenizer, f"Long {n}.", LONG_PROMPT, 810 + n)).text
            await send(server, Phase("long", (LONG_PROMPT,), 1), [long], 0, deadline, True)
            found[size] = await extend(server, tokenizer, long, n, deadline, size)
    finally:
        await asyncio.to_thread(server.stop)
    return found


def test_a_small_chunk_over_a_cache_costs_more_a_token_pair(
    server_binary, model_path, tmp_path, capsys
):
    found = asyncio.run(extended(server_binary, model_path, tmp_path))
    per_pair = {}
    for size, records in found.items():
        assert all(r.ok for r in records), [r.error for r in records]
        timings = [r.timings for r in records]
        alone, chunks = timings[::2], timings[1::2]  # in turn: a fresh one, an extension
        assert all(t["cache_n"] == 0 and abs(t["prompt_n"] - size) <= 3 for t in alone)
        for t in chunks:  # each extension is processed on the cache the one before left
            assert abs(t["prompt_n"] - size) <= 3 and t["cache_n"] >= LONG_PROMPT - 3, t
        cost = small_chunk_cost(PrefillCost(0.0, 0.0), records, size)
        per_pair[size] = cost.small_chunk_context_ms
        with capsys.disabled():
            print(f"\nchunks of {size}: {per_pair[size] * 1e3:.2f} µs a token pair")
    # bench/chunk_attention.py on the 2-core machine: about twice, 48 against 256
    assert per_pair[SMALL_CHUNK] > 1.3 * per_pair[256] > 0
