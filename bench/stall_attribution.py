"""Does laying stalls on their causes stay linear in a repeat's requests?

Every stall is laid against the other requests' prompt processing, and every request's wait
for its first token against the longer prompts (``figures.stalls.repeat_stalls``): done
naively, each against every other request, a repeat of 4,000 requests took 20 s and one of
100,000 would take hours. This builds a repeat of streamed requests (one in ten stalls once,
prompts of seven lengths, all with the server's timings; ``--untimed``: none, as vLLM's)
at a few sizes and prints the time per request at each, and the ratio of the largest
size's to the smallest's.

  .venv/bin/python bench/stall_attribution.py [--sizes 1000,4000,20000] [--untimed]

Goal: a ratio near 1 (linear), whatever the size.
"""

from __future__ import annotations

import argparse
import time

from workbench.engine.base.records import RequestRecord, TokenChunk
from workbench.engine.figures.per_request import request_metrics
from workbench.engine.figures.stalls import repeat_stalls

S = 1_000_000_000


def repeat(n: int, timed: bool) -> list[RequestRecord]:
    """``n`` requests sent 50 ms apart, 20 tokens 30 ms apart, one in ten frozen 1 s."""
    out = []
    for i in range(n):
        submit = i * S // 20
        times = [submit + S // 5 + k * 3 * S // 100 for k in range(20)]
        if i % 10 == 0:
            times = times[:10] + [t + S for t in times[10:]]
        prompt = 50 + (i % 7) * 100
        timings = {"prompt_ms": 150.0, "prompt_n": prompt, "cache_n": 0} if timed else None
        out.append(
            RequestRecord(
                0, 0, i, "p", t_submit_ns=submit, t_first_token_ns=times[0],
                t_last_token_ns=times[-1], t_done_ns=times[-1], ok=True,
                usage={"prompt_tokens": prompt, "completion_tokens": 20}, timings=timings,
                chunks=[TokenChunk(t, "x") for t in times],
            )
        )  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,4000,20000")
    parser.add_argument("--untimed", action="store_true")
    args = parser.parse_args()
    per_request = []
    for n in (int(s) for s in args.sizes.split(",")):
        records = repeat(n, timed=not args.untimed)
        metrics = {r.key: m for r in records if (m := request_metrics(r)) is not None}
        started = time.perf_counter()
        found = repeat_stalls(records, metrics)
        seconds = time.perf_counter() - started
        stalls = sum(len(s.stalls or ()) for s in found.values())
        per_request.append(seconds / n)
        print(f"{n} requests, {stalls} stalls: {seconds:.2f} s, {1e6 * seconds / n:.0f} us each")
    print(f"largest / smallest, per request: {per_request[-1] / per_request[0]:.2f}")


if __name__ == "__main__":
    main()
