"""On the real llama-server: the same prompts at -ub 512 and, on a server started for them,
at -ub 64 (the probe's last step, ``probe.micro_batches``): the second server runs at the
other -ub, both process the whole prompts fresh, and the smaller -ub costs more
(``bench/ubatch_cost.py`` on the 2-core machine: a 1,024-token prompt about 1.1x), which
is what ``calibration.micro_batch_cost`` reads as each micro-batch's own cost."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import replace

import pytest

from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.measure.sized_prompts import ServerTokenizer
from workbench.engine.predict.calibration import micro_batch_cost
from workbench.engine.predict.probe import UBATCH_PROMPTS, micro_batches
from workbench.engine.server.llama_server import LlamaServer

pytestmark = pytest.mark.server


async def measured(server_binary, model_path, tmp_path):
    settings = replace(ServerSettings(), slots=2, ctx=2 * 4096)
    log = tmp_path / "server.log"
    server = LlamaServer(server_binary, model_path, settings, log)
    try:
        await server.start()
        tokenizer = ServerTokenizer(server.base_url, "completions")
        return await micro_batches(server, tokenizer, log, time.monotonic() + 300)
    finally:
        await asyncio.to_thread(server.stop)


def test_the_same_prompts_at_another_ub_cost_each_micro_batch_more(
    server_binary, model_path, tmp_path, capsys
):
    first, second, at = asyncio.run(measured(server_binary, model_path, tmp_path))
    assert at == 64
    other_log = (tmp_path / "server-ub64.log").read_text(errors="replace")
    assert re.search(r"n_ubatch\s*=\s*64\b", other_log), "the second server runs at -ub 64"
    for records in (first, second):
        assert all(r.ok for r in records), [r.error for r in records]
        timings = [r.timings for r in records]
        assert [t["cache_n"] for t in timings] == [0, 0]  # fresh: each prompt whole
        assert all(
            abs(t["prompt_n"] - n) <= 3 for t, n in zip(timings, UBATCH_PROMPTS, strict=True)
        )
    own = {r.timings["prompt_n"]: r.timings["prompt_ms"] for r in first}
    other = {r.timings["prompt_n"]: r.timings["prompt_ms"] for r in second}
    longest = max(own)
    with capsys.disabled():
        print(f"\n{longest} tokens: {own[longest]:.0f} ms at -ub 512, {other[longest]:.0f} at 64")
    assert other[longest] > own[longest]
    found = micro_batch_cost(first, 512, second, at)
    assert found is not None and found.measured_at == 64
    assert found.base_ms + found.per_context_token_ms > 0
