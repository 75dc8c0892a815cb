"""The reference the benchmarks measure the workbench against: a minimal raw httpx loop.

One shared ``httpx.AsyncClient``, one task per stream, a ``perf_counter_ns`` at each read and
a JSON decode per event, one request first to warm up (as the workbench's warm-up does).
Run in a process of its own, it prints one JSON document:

    python bench/raw_client.py URL STREAMS TOKENS
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import httpx


async def raw_loop(url: str, streams: int, tokens: int) -> dict:
    """Per request its prompt, send time, each text chunk's read time and its end; and the
    process's CPU seconds while the measured streams ran."""
    results: list[dict] = []
    async with httpx.AsyncClient(
        base_url=url, timeout=600, limits=httpx.Limits(max_connections=streams)
    ) as client:

        async def one(i: int) -> None:
            prompt = f"Request {i}. raw loop"
            body = {
                "model": "mock",
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": tokens,
                "stream": True,
            }
            chunk_ns: list[int] = []
            buffer = b""
            t_submit = time.perf_counter_ns()
            async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                async for data in response.aiter_bytes():
                    t = time.perf_counter_ns()
                    buffer += data
                    *events, buffer = buffer.split(b"\n\n")
                    for event in events:
                        payload = event.removeprefix(b"data: ")
                        if payload == b"[DONE]":
                            continue
                        choices = json.loads(payload).get("choices") or []
                        if choices and choices[0].get("delta", {}).get("content"):
                            chunk_ns.append(t)
            results.append(
                {
                    "prompt": prompt,
                    "t_submit_ns": t_submit,
                    "chunk_ns": chunk_ns,
                    "t_end_ns": time.perf_counter_ns(),
                }
            )

        await one(-1)
        results.clear()
        cpu = time.process_time()
        await asyncio.gather(*(one(i) for i in range(streams)))
        cpu = time.process_time() - cpu
    return {"cpu_s": cpu, "requests": results}


def run(url: str, streams: int, tokens: int, pin_core: int | None = None) -> dict:
    """The loop in a fresh process (optionally pinned to one core); its document."""
    import subprocess

    cmd = [sys.executable, __file__, url, str(streams), str(tokens)]
    if pin_core is not None:
        cmd.append(str(pin_core))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=True)
    return json.loads(done.stdout)


if __name__ == "__main__":
    if len(sys.argv) > 4 and hasattr(__import__("os"), "sched_setaffinity"):
        import os

        if (os.cpu_count() or 1) > int(sys.argv[4]):
            os.sched_setaffinity(0, {int(sys.argv[4])})
    print(json.dumps(asyncio.run(raw_loop(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))))
