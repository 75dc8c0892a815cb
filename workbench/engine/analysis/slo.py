"""Latency direction of capacity: which slot count serves the load within the SLOs.

Goodput is what vLLM and DistServe call it: requests per second that met every per-request
SLO (TTFT, TPOT, decode speed, end-to-end latency). A configuration is acceptable when its TTFT
and E2E percentiles meet the SLO too, and at most a tenth of its requests miss a per-request
TPOT or decode limit; the recommendation is the acceptable one with the most goodput (fewer
slots on a tie: less memory). The planning arithmetic: peak concurrent users = registered
users x share online at peak.

vLLM's spelling (``vllm bench serve --goodput ttft:500 tpot:50 e2el:3000``) is read by
``parse_goodput``: its ttft and e2el limits are this module's TTFT and E2E limits, its tpot
the per-request TPOT limit, and a request is good by its rule (``calculate_metrics`` in
``vllm/benchmarks/serve.py``): successful, and each of its values at most its limit, a
request of one token counting as TPOT 0.

The configuration's percentiles that the SLOs judge (TTFT p50/p90, E2E p90) are the results
table's, by the catalogue's rule (mean of per-repeat values), so the SLO tab and the table
never show two TTFT p50s for one configuration; goodput pools all repeats' requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from workbench.engine.base.states import ConfigStatus
from workbench.engine.figures.metrics import figure
from workbench.engine.figures.per_request import request_metrics
from workbench.engine.store import Session, summarize_config_records

# What the SLO views (the window's SLO tab, ``workbench slo``) show per configuration.
SHOWN = ("goodput_rps", "throughput_rps", "ttft_p50_s")


@dataclass(frozen=True)
class Slo:
    ttft_s: float | None = None  # per request, and for the configuration's p50
    ttft_p90_s: float | None = None  # the configuration's p90
    decode_tok_s: float | None = None  # per request (1 / TPOT)
    e2e_p90_s: float | None = None  # per request limit and the configuration's p90
    tpot_s: float | None = None  # per request, vLLM's TPOT (a one-token request counts 0)

    def __post_init__(self) -> None:
        if all(getattr(self, f.name) is None for f in fields(self)):
            raise ValueError("give at least one SLO")

    def describe(self) -> str:
        parts = []
        if self.ttft_s is not None:
            parts.append(f"TTFT <= {self.ttft_s:g} s")
        if self.ttft_p90_s is not None:
            parts.append(f"TTFT p90 <= {self.ttft_p90_s:g} s")
        if self.decode_tok_s is not None:
            parts.append(f"decode >= {self.decode_tok_s:g} tok/s")
        if self.e2e_p90_s is not None:
            parts.append(f"E2E p90 <= {self.e2e_p90_s:g} s")
        if self.tpot_s is not None:
            parts.append(f"TPOT <= {self.tpot_s * 1000:g} ms")
        return ", ".join(parts)


# vLLM's --goodput keys and the Slo field each limits (vllm/benchmarks/serve.py's
# check_goodput_args: ttft, tpot and e2el, in milliseconds).
GOODPUT_KEYS = {"ttft": "ttft_s", "tpot": "tpot_s", "e2el": "e2e_p90_s"}


def parse_goodput(pairs: Sequence[str]) -> dict[str, float]:
    """vLLM's ``--goodput`` pairs (``ttft:500 tpot:50 e2el:3000``, milliseconds) as Slo
    fields in seconds; ValueError, naming the pair, for a pair that is not ``KEY:MS``, a key
    vLLM does not know, a value that is not a number of milliseconds >= 0, or a key given
    twice."""
    limits: dict[str, float] = {}
    for pair in pairs:
        key, _, value = pair.partition(":")
        if pair.count(":") != 1:
            raise ValueError(f"--goodput {pair!r}: give KEY:MILLISECONDS, e.g. ttft:500")
        if key not in GOODPUT_KEYS:
            raise ValueError(f"--goodput {pair!r}: the key is one of {', '.join(GOODPUT_KEYS)}")
        try:
            ms = float(value)
        except ValueError:
            ms = math.nan
        if not math.isfinite(ms) or ms < 0:
            raise ValueError(f"--goodput {pair!r}: the limit is a number of milliseconds >= 0")
        if GOODPUT_KEYS[key] in limits:
            raise ValueError(f"--goodput: {key} is given twice")
        limits[GOODPUT_KEYS[key]] = ms / 1000.0
    return limits


@dataclass
class ConfigGoodput:
    label: str
    slots: int | None  # None: not known (a server the workbench did not start)
    concurrency: int
    requests: int
    good: int
    goodput_rps: float
    throughput_rps: float
    acceptable: bool
    ttft_p50_s: float | None
    ttft_p90_s: float | None
    e2e_p90_s: float | None
    reasons: list[str] = field(default_factory=list)


def request_ok(metrics, slo: Slo) -> bool:
    if slo.ttft_s is not None and metrics.ttft_s > slo.ttft_s:
        return False
    if slo.ttft_p90_s is not None and metrics.ttft_s > slo.ttft_p90_s:
        return False
    if slo.decode_tok_s is not None and (metrics.decode_tok_s or 0.0) < slo.decode_tok_s:
        return False
    if slo.tpot_s is not None and (metrics.tpot_s or 0.0) > slo.tpot_s:
        return False
    return not (slo.e2e_p90_s is not None and metrics.e2e_s > slo.e2e_p90_s)


def _over(key: str, value: float | None, limit: float) -> str:
    """Why a configuration misses a percentile SLO, in the catalogue's words and format,
    with more decimals where those would round the value to the limit: the comparison
    shown reads true (2.0004 s > 2 s, never 2.000 s > 2 s)."""
    f = figure(key)
    if value is None:
        return f"no {f.title}"
    shown, digits = f.text(value), f.digits or 0
    while float(shown) <= limit and digits < 17:
        digits += 1
        shown = f"{value:.{digits}f}"
    typed = f"{limit:g}" if float(f"{limit:g}") == limit else repr(limit)
    return f"{f.title} {shown} {f.unit} > {typed} {f.unit}"


def goodput(session: Session, slo: Slo) -> list[ConfigGoodput]:
    out = []
    for config in session.configs:
        records = [r for r in session.records(config.index) if not r.warmup]
        summary = summarize_config_records(config, records, managed=session.managed)
        metrics = [m for m in (request_metrics(r) for r in records) if m is not None]
        # All repeats together: their requests over their summed run time.
        makespan = sum(run.makespan_s or 0.0 for run in summary.runs)
        good = sum(request_ok(m, slo) for m in metrics)
        decodes = [m.decode_tok_s for m in metrics if m.decode_tok_s is not None]
        p50, p90, e2e90 = (figure(k).of(summary) for k in ("ttft_p50_s", "ttft_p90_s", "e2e_p90_s"))
        reasons = [
            _over(key, value, limit)
            for key, value, limit in (
                ("ttft_p50_s", p50, slo.ttft_s),
                ("ttft_p90_s", p90, slo.ttft_p90_s),
                ("e2e_p90_s", e2e90, slo.e2e_p90_s),
            )
            if limit is not None and (value is None or value > limit)
        ]
        if slo.decode_tok_s is not None:
            slow = sum(d < slo.decode_tok_s for d in decodes)
            if not decodes or slow > len(decodes) // 10:
                reasons.append(
                    f"{slow} of {len(decodes)} requests decode slower than "
                    f"{slo.decode_tok_s:g} tok/s"
                )
        if slo.tpot_s is not None:
            over = sum((m.tpot_s or 0.0) > slo.tpot_s for m in metrics)
            if not metrics or over > len(metrics) // 10:
                reasons.append(
                    f"{over} of {len(metrics)} requests over TPOT {slo.tpot_s * 1000:g} ms"
                )
        failed = figure("failed").of(summary)
        if failed:
            reasons.append(f"{failed} requests failed")
        out.append(
            ConfigGoodput(
                label=config.label,
                slots=summary.slots,
                concurrency=summary.concurrency,
                requests=len(records),
                good=good,
                goodput_rps=good / makespan if makespan else 0.0,
                throughput_rps=len(metrics) / makespan if makespan else 0.0,
                acceptable=not reasons and summary.status == ConfigStatus.OK,
                ttft_p50_s=p50,
                ttft_p90_s=p90,
                e2e_p90_s=e2e90,
                reasons=reasons,
            )
        )
    return out


@dataclass(frozen=True)
class Recommendation:
    choice: ConfigGoodput | None
    text: str


def recommend(results: list[ConfigGoodput]) -> Recommendation:
    acceptable = [r for r in results if r.acceptable]
    if not acceptable:
        return Recommendation(
            None,
            "no configuration meets the SLOs at this load: add a "
            "machine, reduce the load, or relax the SLOs",
        )
    best = max(acceptable, key=lambda r: (round(r.goodput_rps, 3), -(r.slots or 0)))
    return Recommendation(
        best,
        f"{best.label}: {best.goodput_rps:.2f} good requests/s with "
        f"{best.concurrency} concurrent requests",
    )


def peak_users(registered: int, online_share: float) -> int:
    """Peak concurrent users = registered users x share online at peak (rounded up). The
    product is rounded to 9 places first: 50 x 0.14 is 7.000000000000001 in floating point,
    and 7 people online are not 8."""
    return math.ceil(round(registered * online_share, 9))


def machines_needed(peak: int, served_per_machine: int) -> int | None:
    return math.ceil(peak / served_per_machine) if served_per_machine > 0 else None
