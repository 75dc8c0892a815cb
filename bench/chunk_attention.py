"""What a chunk of prompt costs a token pair over a cache, by the chunk's size, on the real
llama-server: where the scheduler model's one attention cost per token pair (fitted from
long prompts) holds for the chunks a small ``-b`` makes.

For each size, a fresh prompt of that many tokens and the same number of new tokens after a
cached 1,500-token prompt (in one slot, by ``id_slot``), sent in turn, ``--repeats`` times, so
that both are measured in the same moments (this machine's pace drifts by a quarter from
minute to minute). The extra cost a token over the cache, per cached token, is the chunk's
cost a token pair; the last column sets it against the largest size's:

  .venv/bin/python bench/chunk_attention.py [--sizes 32,48,60,63,64,65,96,128,256,512]
      [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

import httpx

from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.models.model_file import resolve_model
from workbench.engine.server.discovery import find_server_binary
from workbench.engine.server.llama_server import LlamaServer

CACHED = 1500
SLOT = 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="32,48,60,63,64,65,96,128,256,512")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    settings = replace(ServerSettings(), slots=2, ctx=2 * 4096)
    log = Path(tempfile.mkdtemp(prefix="chunk-attention-")) / "server.log"
    server = LlamaServer(find_server_binary(None).path, resolve_model("default"), settings, log)
    rng = random.Random(5)

    def tokens(n: int) -> list[int]:
        return [rng.randrange(100, 40000) for _ in range(n)]

    async def measure() -> dict[int, tuple[list[float], list[float]]]:
        await server.start()
        found: dict[int, tuple[list[float], list[float]]] = {n: ([], []) for n in sizes}
        async with httpx.AsyncClient(base_url=server.base_url, timeout=600) as client:

            async def prompt_ms(ids: list[int], slot: int, cache: bool) -> float:
                body = {"prompt": ids, "n_predict": 1, "id_slot": slot, "cache_prompt": cache}
                answer = (await client.post("/completion", json=body)).json()
                return float(answer["timings"]["prompt_ms"])

            cached = tokens(CACHED)
            await prompt_ms(cached, SLOT, True)
            for _ in range(args.repeats):
                for n in sizes:
                    found[n][0].append(await prompt_ms(tokens(n), 1 - SLOT, False))
                    found[n][1].append(await prompt_ms(cached + tokens(n), SLOT, True))
        return found

    try:
        found = asyncio.run(measure())
    finally:
        server.stop()
    pair_us = {}
    for n, (alone, beside) in found.items():
        pair_us[n] = (statistics.median(beside) - statistics.median(alone)) / (n * CACHED) * 1e3
    print(f"| chunk | alone ms | on {CACHED:,} cached ms | µs a token pair | vs {sizes[-1]} |")
    print("|---|---|---|---|---|")
    for n, (alone, beside) in found.items():
        print(
            f"| {n} | {statistics.median(alone):.1f} | {statistics.median(beside):.1f} | "
            f"{pair_us[n]:.2f} | {pair_us[n] / pair_us[sizes[-1]]:.2f}x |"
        )


if __name__ == "__main__":
    main()
