"""SLO targets as a user types them (``ttft_p90:2000``) and as the catalogue holds their
figures: each metric and percentile is one catalogue key (``ttft_p90_s``, ``tpot_p50_ms``,
``itl_p99_ms``, ``e2e_p99_s``, ``stall_p99_s``), read in ms whatever unit the catalogue
keeps it in."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.tune.records import METRICS, ONLY, PERCENTILES, SloTarget

# (catalogue key's stem, its unit's ms): vLLM's names for the metrics, the catalogue's keys.
_KEYS = {
    "ttft": ("ttft", "s"),
    "tpot": ("tpot", "ms"),
    "itl": ("itl", "ms"),
    "e2el": ("e2e", "s"),
    "stall": ("stall", "s"),
}
_SPELLING = re.compile(r"^([a-z0-9]+)_p(\d+):(.*)$")


class SloError(WorkbenchError):
    """An SLO the user typed that is not one (a metric, percentile or limit)."""


def parse_slo(text: str) -> SloTarget:
    """``METRIC_PCT:MS``, one clear error naming what is wrong."""
    found = _SPELLING.match(text.strip().lower())
    if found is None:
        raise SloError(
            f"--slo {text!r}: write METRIC_PCT:MS, e.g. ttft_p90:2000 (metrics "
            f"{', '.join(METRICS)}; p{', p'.join(map(str, PERCENTILES))})"
        )
    metric, percentile, limit = found.groups()
    if metric not in METRICS:
        raise SloError(f"--slo {text!r}: the metric is one of {', '.join(METRICS)}, not {metric!r}")
    allowed = ONLY.get(metric, PERCENTILES)
    if int(percentile) not in allowed:
        raise SloError(
            f"--slo {text!r}: the percentile is p{', p'.join(map(str, allowed))}, not p{percentile}"
        )
    try:
        limit_ms = float(limit)
    except ValueError:
        raise SloError(f"--slo {text!r}: the limit is a time in ms, not {limit!r}") from None
    if not math.isfinite(limit_ms) or limit_ms <= 0:
        raise SloError(f"--slo {text!r}: the limit is a time above 0 ms, not {limit!r}")
    return SloTarget(metric, int(percentile), limit_ms)


def slo_text(slo: SloTarget) -> str:
    """``slo`` as a user types it (``ttft_p90:2000``), which ``parse_slo`` reads back to the
    same target: its limit in the fewest digits that keep it exact."""
    return f"{slo.name}:{repr(slo.limit_ms).removesuffix('.0')}"


def parse_slos(texts: Sequence[str]) -> tuple[SloTarget, ...]:
    """Every ``--slo``; the same metric and percentile twice is an error."""
    slos = tuple(parse_slo(t) for t in texts)
    names = [s.name for s in slos]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise SloError(f"--slo {twice[0]} is given twice: give each limit once")
    if not slos:
        raise SloError("give at least one --slo METRIC_PCT:MS, e.g. --slo ttft_p90:2000")
    return slos


def key_of(slo: SloTarget) -> str:
    """The catalogue key of the figure ``slo`` limits."""
    stem, unit = _KEYS[slo.metric]
    return f"{stem}_p{slo.percentile}_{unit}"


def value_ms(slo: SloTarget, figures: Mapping[str, float | None]) -> float | None:
    """The figure ``slo`` limits, in ms, from figures by catalogue key. Streams judged and
    none stalled have no stall percentile: their stalls are 0 ms (streams too short to
    judge leave it not measured)."""
    value = figures.get(key_of(slo))
    if value is None and slo.metric == "stall" and figures.get("stalled_stream_share") == 0:
        return 0.0
    if value is None:
        return None
    return value * 1000 if key_of(slo).endswith("_s") else value


def misses(slos: Sequence[SloTarget], figures: Mapping[str, float | None]) -> list[str]:
    """Each SLO the figures miss, in words (a figure not there misses: nothing says it
    meets): ``TTFT p90 2600 ms > 2000 ms``."""
    out = []
    for slo in slos:
        value = value_ms(slo, figures)
        if value is None:
            out.append(f"{slo.metric.upper()} p{slo.percentile} not measured")
        elif value > slo.limit_ms:
            out.append(
                f"{slo.metric.upper()} p{slo.percentile} {value:.0f} ms > {slo.limit_ms:g} ms"
            )
    return out


def meets(slos: Sequence[SloTarget], figures: Mapping[str, float | None]) -> bool:
    return not misses(slos, figures)


def worst_ratio(slos: Sequence[SloTarget], figures: Mapping[str, float | None]) -> float:
    """How far the figures are from the SLO at their worst: the largest value over its limit
    (below 1: every one met; infinite: one is not there)."""
    ratios = [math.inf if (v := value_ms(s, figures)) is None else v / s.limit_ms for s in slos]
    return max(ratios, default=0.0)
