"""What llama-server's token counters count, and when (b11434), as the ledger of unseen
tasks relies on it; and its estimate against a known number of requests sent."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

import httpx
import pytest

from tests.engine.watch.test_watch_real import watched_while
from workbench.engine.base.server_kinds import LLAMACPP, parse_metrics, total
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.server.llama_server import LlamaServer
from workbench.engine.watch.summary import summarize

pytestmark = pytest.mark.server

NAMES = {
    "prompt": LLAMACPP.prompt_tokens,
    "cached": LLAMACPP.cached_tokens,
    "prompt_s": LLAMACPP.prompt_seconds,
    "output": LLAMACPP.output_tokens,
    "output_s": LLAMACPP.output_seconds,
}


async def counters(client: httpx.AsyncClient) -> dict[str, float]:
    values = parse_metrics((await client.get("/metrics")).text)
    found = {name: total(values, names) for name, names in NAMES.items()}
    assert None not in found.values(), found
    return found  # type: ignore[return-value]


def grown(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: after[name] - before[name] for name in before}


async def counted_as_it_goes(server: LlamaServer) -> None:
    prompt = {"prompt": "Counted, not read. " * 60, "n_predict": 200, "ignore_eos": True}
    fresh = httpx.Limits(max_keepalive_connections=0)  # a connection a request, as polls
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60, limits=fresh) as client:
        before = await counters(client)
        answer = asyncio.create_task(client.post("/completion", json=prompt))
        during = None
        while not answer.done():  # mid-answer: its prompt counted whole, no answer yet
            now = grown(before, await counters(client))
            if now["prompt"] and during is None:
                during = now
            await asyncio.sleep(0.02)
        timings = (await answer).json()["timings"]
        after = grown(before, await counters(client))
        assert during is not None and during["output"] == 0 and during["output_s"] == 0
        assert during["prompt"] == timings["prompt_n"] and during["cached"] == 0
        assert (after["output"], after["prompt"]) == (timings["predicted_n"], timings["prompt_n"])
        assert after["output_s"] == pytest.approx(timings["predicted_ms"] / 1000, rel=0.01)
        assert after["prompt_s"] == pytest.approx(timings["prompt_ms"] / 1000, rel=0.01)
        # the same prompt again: its cached part in a counter of its own
        before = await counters(client)
        timings = (await client.post("/completion", json=prompt)).json()["timings"]
        again = grown(before, await counters(client))
        assert (again["prompt"], again["cached"]) == (timings["prompt_n"], timings["cache_n"])
        assert timings["cache_n"] > 0


def test_the_prompt_counters_grow_when_a_prompt_is_done_and_the_answer_ones_at_its_end(
    server_binary, model_path, tmp_path
):
    settings = replace(ServerSettings(), slots=1)
    server = LlamaServer(server_binary, model_path, settings, tmp_path / "server.log")

    async def main() -> None:
        await server.start()
        try:
            await counted_as_it_goes(server)
        finally:
            await asyncio.to_thread(server.stop)

    asyncio.run(main())


SENT = 4 * 10


async def short_requests(server: LlamaServer) -> list:
    """Four users, ten requests each of 3 to 60 words and 2 to 40 tokens, a pause of up to
    0.3 s between: tasks that often start and end between two polls 1 s apart."""

    async def user(number: int) -> None:
        chosen = random.Random(number)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as client:
            for request in range(SENT // 4):
                words = " ".join(chosen.choice(("alpha", "beta", "gamma")) for _ in range(60))
                body = {
                    "prompt": f"{number} {request} {words[: chosen.randint(10, 360)]}",
                    "n_predict": chosen.randint(2, 40),
                    "ignore_eos": True,
                }
                (await client.post("/completion", json=body)).raise_for_status()
                await asyncio.sleep(chosen.random() * 0.3)

    await asyncio.gather(*(user(n) for n in range(4)))
    return []


def test_the_tasks_no_poll_saw_are_estimated_from_the_counters(server_binary, model_path, tmp_path):
    watched, _, _ = asyncio.run(
        watched_while(server_binary, model_path, tmp_path, 1.0, short_requests)
    )
    s = summarize(watched)
    assert s.tasks_running == 0 and s.unseen is not None
    unseen = SENT - s.tasks_ended
    estimated = s.tasks_ended + s.unseen.tasks
    print(f"sent {SENT}, seen {s.tasks_ended}, estimated {estimated:.1f} ({s.unseen})")
    # at least half of the tasks no poll saw are found again, and few made up
    assert abs(estimated - SENT) <= max(6.0, unseen / 2)
