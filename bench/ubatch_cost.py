"""What ``-ub`` does to a prompt's cost on the real llama-server: one server per ``-ub``, all
started at once (an idle server costs nothing), the same prompts sent to each in turn
``--repeats`` times, so that every ``-ub`` is measured in the same moments (this machine's
pace drifts by a quarter from minute to minute).

Each prompt is fresh (no cache) and alone; ``-b`` holds it whole, so ``-ub`` alone splits it,
into ``ceil(tokens / ub)`` micro-batches. The last columns set each ``-ub`` against the
largest: the extra cost, and that extra per extra micro-batch:

  .venv/bin/python bench/ubatch_cost.py [--ubatches 64,128,256,512] [--prompts 256,1024,2048]
      [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import math
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

BATCH = 2048


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ubatches", default="64,128,256,512")
    parser.add_argument("--prompts", default="256,1024,2048")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    ubatches = [int(s) for s in args.ubatches.split(",")]
    prompts = [int(s) for s in args.prompts.split(",")]
    folder = Path(tempfile.mkdtemp(prefix="ubatch-cost-"))
    binary, model = find_server_binary(None).path, resolve_model("default")
    servers = {
        ub: LlamaServer(
            binary,
            model,
            replace(ServerSettings(), slots=4, ctx=4 * 4096, batch_size=BATCH, ubatch_size=ub),
            folder / f"ub{ub}.log",
        )
        for ub in ubatches
    }
    rng = random.Random(7)

    async def measure() -> dict[tuple[int, int], list[float]]:
        for server in servers.values():
            await server.start()
        found: dict[tuple[int, int], list[float]] = {}
        for _ in range(args.repeats):
            for n in prompts:
                ids = [rng.randrange(100, 40000) for _ in range(n)]
                for ub, server in servers.items():
                    async with httpx.AsyncClient(base_url=server.base_url, timeout=600) as client:
                        body = {"prompt": ids, "n_predict": 1, "cache_prompt": False}
                        answer = (await client.post("/completion", json=body)).json()
                    found.setdefault((ub, n), []).append(float(answer["timings"]["prompt_ms"]))
        return found

    try:
        found = asyncio.run(measure())
    finally:
        for server in servers.values():
            server.stop()
    top = max(ubatches)
    print(
        f"| prompt | -ub | micro-batches | ms (median of {args.repeats}) | vs -ub {top} | "
        "extra ms a micro-batch |"
    )
    print("|---|---|---|---|---|---|")
    for n in prompts:
        base = statistics.median(found[(top, n)])
        for ub in ubatches:
            ms = statistics.median(found[(ub, n)])
            extra = math.ceil(n / ub) - math.ceil(n / top)
            each = f"{(ms - base) / extra:.1f}" if extra else ""
            print(f"| {n} | {ub} | {math.ceil(n / ub)} | {ms:.0f} | {ms / base:.2f}x | {each} |")
    print("raw:", {f"{ub}/{n}": [round(v) for v in vs] for (ub, n), vs in found.items()})


if __name__ == "__main__":
    main()
