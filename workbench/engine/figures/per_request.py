"""One request's figures, exactly as the catalogue (``metrics``) defines them (vLLM bench
serve's terms): TTFT, E2E, TPOT, decode speed, ITL gaps, queue wait, prefill, dispatch delay,
connect time, latency from the intended time, and for a server that streams reasoning apart
from the answer, TTFO (AIPerf's time to first output token: the first answer text) and the
tokens spent reasoning.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from workbench.engine.base.records import RequestRecord

NS = 1e9


def percentile(values: Iterable[float], q: float) -> float | None:
    """The ``q``-th percentile of ``values`` (``q`` from 0 to 100), None when there are none:
    the program's one percentile, so that every p50, p90 and p99 it shows (the catalogue's,
    the steady state's, the vLLM-named figures, the benchmarks') is the same number for the
    same requests. Linear interpolation between the closest ranks, as the catalogue defines
    it (numpy's default ``linear`` method, Hyndman and Fan's type 7)."""
    data = sorted(values)
    if not data:
        return None
    pos = (len(data) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def dispatch_delay_s(record: RequestRecord) -> float | None:
    """Actual send minus when the request was free to go (its arrival time, or when a place
    under the client-side concurrency limit freed), less the part of that time spent
    opening its connection, which is reported on its own (a connection opened ahead of
    time costs the dispatch nothing)."""
    if record.t_submit_ns is None or record.t_ready_ns is None:
        return None
    window = record.t_submit_ns - record.t_ready_ns
    if record.connect_ns is not None and record.t_connected_ns is not None:
        start = max(record.t_ready_ns, record.t_connected_ns - record.connect_ns)
        window -= max(0, min(record.t_submit_ns, record.t_connected_ns) - start)
    return max(0, window) / NS


@dataclass(frozen=True)
class RequestMetrics:
    ttft_s: float
    e2e_s: float
    output_tokens: int
    token_source: str
    tpot_s: float | None
    decode_tok_s: float | None
    queue_wait_s: float | None
    prefill_s: float | None
    itl_s: list[float]
    cache_hit: bool
    dispatch_s: float | None = None
    connect_s: float | None = None
    ttft_from_intended_s: float | None = None
    e2e_from_intended_s: float | None = None
    prompt_tokens: int | None = None
    prefill_tok_s: float | None = None
    cached_tokens: int | None = None  # of the prompt, reused from the server's cache
    # The first answer text, after any reasoning: TTFT where there was none; None where no
    # answer came or the file (older than schema 7) did not tell reasoning from answer.
    ttfo_s: float | None = None
    reasoning_tokens: int | None = None
    reasoning_token_source: str = "none"  # usage, chunks (counted) or none


def token_count(value: Any) -> int | None:
    """A count a server stated (in ``usage`` or ``timings``), if it is one."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def server_ms(value: Any) -> float | None:
    """A time a server stated in ms (in ``timings``), if it is one."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
    return float(value) if ok else None


def prompt_tokens(record: RequestRecord) -> int | None:
    """The prompt's length by the server's count: ``usage.prompt_tokens``, else the tokens
    it processed and found cached (``timings.prompt_n + cache_n``)."""
    counted = token_count((record.usage or {}).get("prompt_tokens"))
    if counted is not None:
        return counted
    timings = record.timings or {}
    processed = token_count(timings.get("prompt_n"))
    return None if processed is None else processed + (token_count(timings.get("cache_n")) or 0)


def prefill_speed(record: RequestRecord) -> float | None:
    """Prompt tokens processed per second of prefill (``timings.prompt_n / prompt_ms``):
    cached tokens were not processed, so they do not count."""
    timings = record.timings or {}
    processed, ms = token_count(timings.get("prompt_n")), server_ms(timings.get("prompt_ms"))
    if not processed or not ms:
        return None
    return processed / (ms / 1000.0)


def request_metrics(record: RequestRecord) -> RequestMetrics | None:
    """The derived numbers of one successful request; None for failed or empty ones."""
    if (
        not record.ok
        or record.t_submit_ns is None
        or record.t_first_token_ns is None
        or record.t_last_token_ns is None
    ):
        return None
    ttft = (record.t_first_token_ns - record.t_submit_ns) / NS
    e2e = (record.t_last_token_ns - record.t_submit_ns) / NS
    tokens, source = record.output_tokens
    tokens = tokens or 0
    tpot = None
    # A whole answer shows no token times: TTFT is its first visible text, the whole
    # response, and TPOT, ITL and decode speed cannot be seen by the client.
    if tokens > 1 and record.streamed:
        tpot = (record.t_last_token_ns - record.t_first_token_ns) / NS / (tokens - 1)
    times = [c.t_ns for c in record.chunks]
    itl = [(b - a) / NS for a, b in itertools.pairwise(times)]
    timings = record.timings or {}
    prompt_ms = timings.get("prompt_ms")
    queue_wait = prefill = None
    if isinstance(prompt_ms, int | float):
        # Waiting is what the server's own work does not explain: before the first token,
        # or, for a whole answer, before it all.
        work_ms = prompt_ms
        if not record.streamed:
            predicted_ms = timings.get("predicted_ms")
            work_ms += predicted_ms if isinstance(predicted_ms, int | float) else 0.0
        queue_wait = max(0.0, ttft - work_ms / 1000.0)
        prefill = min(ttft, prompt_ms / 1000.0) if not record.streamed else ttft - queue_wait
    cache_n = timings.get("cache_n")
    intended = record.t_intended_ns
    answer = record.t_first_answer_ns
    if answer is not None and not record.t_first_token_ns <= answer <= record.t_last_token_ns:
        answer = None  # a file's time outside the tokens' own: no first answer known
    reasoning, reasoning_source = record.reasoning_tokens
    return RequestMetrics(
        ttft_s=ttft,
        e2e_s=e2e,
        output_tokens=tokens,
        token_source=source,
        tpot_s=tpot,
        decode_tok_s=(1.0 / tpot) if tpot and tpot > 0 else None,
        queue_wait_s=queue_wait,
        prefill_s=prefill,
        itl_s=itl,
        cache_hit=isinstance(cache_n, int) and cache_n > 0,
        dispatch_s=dispatch_delay_s(record),
        connect_s=None if record.connect_ns is None else record.connect_ns / NS,
        ttft_from_intended_s=None
        if intended is None
        else (record.t_first_token_ns - intended) / NS,
        e2e_from_intended_s=None if intended is None else (record.t_last_token_ns - intended) / NS,
        prompt_tokens=prompt_tokens(record),
        prefill_tok_s=prefill_speed(record),
        cached_tokens=token_count(cache_n),
        ttfo_s=None if answer is None else (answer - record.t_submit_ns) / NS,
        reasoning_tokens=reasoning,
        reasoning_token_source=reasoning_source,
    )
