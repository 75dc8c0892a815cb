"""The figures of one run as ``vllm bench serve`` names and computes them, so that a session
can be read by vLLM's own plotting and comparison scripts, and a vLLM result compared with
ours figure for figure.

vLLM's rules (``calculate_metrics`` in ``vllm/benchmarks/serve.py``): every time in ms; mean,
median, population standard deviation and percentiles (numpy's linear interpolation) of TTFT,
TPOT, ITL and E2EL over the successful requests; TPOT = (latency - TTFT) / (output tokens - 1)
for requests of more than one token; ITL pools every gap between chunks; throughputs divide by
the run's duration. An empty list counts as 0, as vLLM's ``np.mean(values or 0)`` does.

Ours differ in two places only, both said where the figures are shown: the duration is the
run's makespan (first submit to last done), where vLLM times its whole benchmark loop; and a
request's latency ends at its last token, where vLLM's ends when the stream closes. The median
and p99 are the program's one percentile (``per_request.percentile``, numpy's definition), so
``median_ttft_ms`` is the run's ``ttft_p50_s`` in ms to the last digit, not a second
computation that could differ from it in its last.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from workbench.engine.figures.per_request import RequestMetrics, percentile

LATENCIES = ("ttft", "tpot", "itl", "e2el")
STATISTICS = ("mean", "median", "std", "p99")
COUNTS = ("completed", "total_input_tokens", "total_output_tokens")
THROUGHPUTS = ("request_throughput", "output_throughput", "total_token_throughput")

COLUMNS = (
    *COUNTS,
    *THROUGHPUTS,
    *(f"{stat}_{name}_ms" for name in LATENCIES for stat in STATISTICS),
)
"""The vLLM-named figures of a run, in the order ``concurrency.csv`` gives them (after every
column of its own). vLLM's ``failed`` and ``duration`` are not among them: ``failed`` is
already a column, with the same meaning, and the duration is our makespan (``total_s``)."""


def statistics_ms(name: str, seconds: Sequence[float]) -> dict[str, float]:
    """``mean_/median_/std_/p99_<name>_ms`` of values in seconds, as vLLM computes them."""
    values = list(seconds) or [0.0]
    return {
        f"mean_{name}_ms": float(np.mean(values)) * 1000,
        f"median_{name}_ms": _ms(percentile(values, 50)),
        f"std_{name}_ms": float(np.std(values)) * 1000,
        f"p99_{name}_ms": _ms(percentile(values, 99)),
    }


def _ms(seconds: float | None) -> float:
    return (seconds or 0.0) * 1000.0


def vllm_figures(
    completed: Sequence[RequestMetrics], duration_s: float | None
) -> dict[str, float | None]:
    """One run's successful requests as vLLM's result names them, over ``duration_s``; the
    throughputs are None when the run has no duration."""
    total_input = sum(m.prompt_tokens or 0 for m in completed)
    total_output = sum(m.output_tokens for m in completed)
    figures: dict[str, float | None] = {
        "completed": len(completed),
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
    }
    for name, count in zip(
        THROUGHPUTS, (len(completed), total_output, total_input + total_output), strict=True
    ):
        figures[name] = count / duration_s if duration_s else None
    figures |= statistics_ms("ttft", [m.ttft_s for m in completed])
    figures |= statistics_ms("tpot", [m.tpot_s for m in completed if m.tpot_s is not None])
    figures |= statistics_ms("itl", [gap for m in completed for gap in m.itl_s])
    figures |= statistics_ms("e2el", [m.e2e_s for m in completed])
    return figures
