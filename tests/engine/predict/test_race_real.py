"""On the real llama-server: two prompts sent at once start in one step or one after the
other, never in between, which is what lets a measured run say which reading of the race
it took (``sweep.started_together``); a prompt sent once the first answers reads apart."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.figures.per_request import server_ms
from workbench.engine.measure.sized_prompts import ServerTokenizer, sized_prompt
from workbench.engine.predict.probe import Phase, send
from workbench.engine.predict.sweep import started_together
from workbench.engine.server.llama_server import LlamaServer

pytestmark = pytest.mark.server
PROMPT = 512


async def pairs(server_binary, model_path, tmp_path) -> dict[str, list]:
    """Three pairs sent together and one whose second goes once the first answers."""
    settings = replace(ServerSettings(), slots=2, ctx=2 * 2048)
    server = LlamaServer(server_binary, model_path, settings, tmp_path / "server.log")
    found: dict[str, list] = {}
    try:
        await server.start()
        tokenizer = ServerTokenizer(server.base_url, "completions")
        deadline = time.monotonic() + 300
        for name, late in (("pair 0", False), ("pair 1", False), ("pair 2", False), ("late", True)):
            texts = [
                (
                    await sized_prompt(tokenizer, f"{name} {k}.", PROMPT, 700 + len(found) * 2 + k)
                ).text
                for k in range(2)
            ]
            phase = Phase(name, (PROMPT, PROMPT), 4, interleaved=late)
            found[name] = await send(server, phase, texts, 0, deadline)
    finally:
        await asyncio.to_thread(server.stop)
    for records in found.values():
        assert all(r.ok for r in records), [r.error for r in records]
        for r in records:
            r.t_intended_ns = 0  # due together, as a burst's are
    return found


def test_prompts_sent_together_start_in_one_step_or_a_prompt_apart(
    server_binary, model_path, tmp_path, capsys
):
    found = asyncio.run(pairs(server_binary, model_path, tmp_path))
    for name, records in found.items():
        first, second = sorted(records, key=lambda r: r.t_first_token_ns)
        gap_ms = (second.t_first_token_ns - first.t_first_token_ns) / 1e6
        prompt_ms = server_ms(second.timings["prompt_ms"])
        with capsys.disabled():
            print(f"\n{name}: first tokens {gap_ms:.1f} ms apart, prompt_ms {prompt_ms:.0f}")
        assert prompt_ms is not None
        together = started_together(records)
        assert together is not None
        # one step: the same sampling pass; apart: the second's whole prompt between them
        assert gap_ms < 5 if together else gap_ms > prompt_ms / 2
    assert started_together(found["late"]) is False
