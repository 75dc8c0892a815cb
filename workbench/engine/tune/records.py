"""What a tune is asked and what it answers, as plain records: the CLI, the window's Tune tab
and ``recommendation.json`` all read these, and only the search writes them.

A tried configuration's figures are either predicted (by the scheduler model, from a
calibration) or measured (by a verification run on the real server), and say which: a
predicted figure is never reported as measured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.engine.base.words import plural

DIGITS = 3
"""A rate or a throughput is said to 3 significant figures: a short run cannot tell more
(two runs of one configuration differ by several %)."""


def significant(value: float, digits: int = DIGITS) -> float:
    """``value`` rounded to ``digits`` significant figures (3.1475 is 3.15)."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def rounded(value: float, digits: int = DIGITS) -> str:
    """``value`` to ``digits`` significant figures at most, as words say it: 3.15, 59.9,
    1,230, 0.9 (no trailing zeros)."""
    value = significant(value, digits)
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


METRICS = ("ttft", "tpot", "itl", "e2el", "stall")
"""The latencies an SLO can limit: ``ttft``, ``tpot``, ``itl`` or ``e2el`` (vLLM's names),
and ``stall``, a stream's generation stalls (the catalogue's ``stall_p99_s``)."""

PERCENTILES = (50, 90, 99)
ONLY = {"stall": (99,)}
"""The percentiles of a metric that has fewer than ``PERCENTILES``: the catalogue keeps a
stall's 99th only (a stall is rare by its rule, and its median would be no limit)."""


@dataclass(frozen=True)
class SloTarget:
    """A percentile limit, ``METRIC_PCT:MS`` on the command line (``ttft_p90:2000``): the
    configuration's ``percentile`` of ``metric`` at most ``limit_ms``. Unlike ``--goodput``'s
    limits it judges the configuration's percentile, not each request."""

    metric: str
    percentile: int
    limit_ms: float

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"an SLO limits one of {', '.join(METRICS)}, not {self.metric!r}")
        allowed = ONLY.get(self.metric, PERCENTILES)
        if self.percentile not in allowed:
            raise ValueError(
                f"an SLO's percentile of {self.metric} is p{', p'.join(map(str, allowed))}, "
                f"not p{self.percentile}"
            )
        if not self.limit_ms > 0:
            raise ValueError(f"an SLO's limit is a time above 0 ms, not {self.limit_ms:g}")

    @property
    def name(self) -> str:
        """As the user wrote it, without the limit: ``ttft_p90``."""
        return f"{self.metric}_p{self.percentile}"

    def describe(self) -> str:
        return f"{self.metric.upper()} p{self.percentile} <= {self.limit_ms:g} ms"


@dataclass(frozen=True)
class TuneRequest:
    """Everything a tune is given. ``traffic`` is the experiment file's ``[workload]`` table
    the candidates are measured with (``input_tokens``/``max_tokens``, a trace or
    conversations; empty: the built-in prompts), its ``requests`` at ``users`` at once. A
    trace's window (``trace_start_s``, ``trace_duration_s``, ``max_requests``,
    ``time_scale``) is the load itself: ``users`` is not read with one (the CLI gives None),
    the window's requests at once are estimated and measured instead (``TraceLoad``).
    ``space`` is the ``--space`` text in the settings schema's names; ``budget_s`` bounds
    the whole search, probes and verification runs included."""

    slos: tuple[SloTarget, ...]
    users: int | None
    model: str | None = None
    traffic: dict[str, Any] = field(default_factory=dict)
    space: str = ""
    budget_s: float = 600.0
    out_dir: Path = Path("results")
    server_bin: str | None = None
    # speculative decoding as a dimension: each combination with this draft model and
    # without one (unless ``space`` names ``draft_model`` itself)
    draft_model: str | None = None


TRACE_WINDOW = ("trace_start_s", "trace_duration_s", "max_requests", "time_scale")
"""The trace settings that cut a tune's window of a trace (``TraceWorkload``'s), in the
order the CLI's flags and the Tune tab's fields ask them. Both take each within the trace
setting's own bounds, the one place they are declared."""
WINDOW_TIMES = ("trace_start_s", "trace_duration_s")
"""The window's settings typed as times (``90``, ``90s``, ``10m``, ``1h``: the settings'
``seconds_from_text``), on their flags and in the Tune tab alike."""


def trace_traffic(trace: str | Path, window: Mapping[str, float | None]) -> dict[str, Any]:
    """A trace window's ``traffic``: the trace, its path resolved, and each setting of
    ``TRACE_WINDOW`` given (None, or left out: not given, the trace setting's default). The
    CLI's ``--trace`` flags and the Tune tab's fields both make it here, already bounded as
    the trace settings are."""
    traffic: dict[str, Any] = {"arrival": "trace", "trace": str(Path(trace).resolve())}
    for name in TRACE_WINDOW:
        if (value := window.get(name)) is not None:
            traffic[name] = value
    return traffic


@dataclass(frozen=True)
class TriedConfig:
    """One candidate: its settings (schema names) and the ``llama-server`` arguments they
    make; its figures by catalogue key (``ttft_p90_s``, ``agg_tok_s``, ...) as predicted, and
    as measured where a verification run measured it (None: not run); ``meets_slo`` by the
    measured figures where there are some, else by the predicted ones; ``why_lost`` says in
    one line why it is not the recommendation (None for the winner)."""

    label: str
    settings: dict[str, Any]
    llama_server_args: tuple[str, ...]
    predicted: dict[str, float | None]
    measured: dict[str, float | None] | None
    meets_slo: bool
    why_lost: str | None = None
    fits_memory: bool = True

    @property
    def source(self) -> str:
        """``measured`` or ``predicted``: where this candidate's figures come from."""
        return "predicted" if self.measured is None else "measured"

    def figure(self, key: str) -> float | None:
        """A figure as this candidate knows it best: measured where it ran, else predicted."""
        known = self.predicted if self.measured is None else self.measured
        return known.get(key)


@dataclass(frozen=True)
class TuneProgress:
    """How far a tune is, for a progress bar and an ETA: ``phase`` is one of ``plan``,
    ``calibrate``, ``rank``, ``verify``, ``rate`` or ``done``; ``text`` says what it is doing
    now in one line."""

    phase: str
    elapsed_s: float
    budget_s: float
    eta_s: float | None
    text: str
    tried: tuple[TriedConfig, ...] = ()


@dataclass(frozen=True)
class TraceLoad:
    """A trace window as a tune's load: which rows it replays and how long they take to
    send, and how many requests it puts in flight at once at its peak: ``estimated`` before
    any run (``estimated_from`` says how), ``measured`` in the winner's verification run
    (None: none verified)."""

    trace: str  # the file's name
    rows: int
    start_s: float  # into the trace, as recorded
    duration_s: float  # as recorded; 0: to the end
    time_scale: float
    span_s: float  # its rows' sending, at its time scale (a later turn's as if replies took none)
    estimated: int
    estimated_from: str
    measured: int | None = None

    def window_said(self) -> str:
        """The window in one sentence: ``The trace window: 40 requests of t.jsonl from 0 s
        to 20 s, sent over 10 s at time scale 2.``"""
        end = f"to {self.start_s + self.duration_s:g} s" if self.duration_s else "to its end"
        return (
            f"The trace window: {plural(self.rows, 'request')} of {self.trace} from "
            f"{self.start_s:g} s {end}, sent over {rounded(self.span_s)} s at time scale "
            f"{self.time_scale:g}."
        )

    def peak_said(self) -> str:
        """Its requests at once, and where the figure comes from: a measured one first."""
        if self.measured is not None:
            return (
                f"{plural(self.measured, 'request')} at once at peak in the trace window "
                f"(measured in the winner's verification run; {self.estimated} estimated "
                f"beforehand from {self.estimated_from})."
            )
        return (
            f"{plural(self.estimated, 'request')} at once at peak in the trace window "
            f"(estimated from {self.estimated_from})."
        )


@dataclass(frozen=True)
class RateTried:
    """One probe of the rate search: the winner at ``rate_rps`` Poisson arrivals, whether
    it held the SLO, and why not (a missed limit, a queue that grew without bound)."""

    rate_rps: float
    met: bool
    why: str | None = None


@dataclass(frozen=True)
class Recommendation:
    """A tune's answer, as ``recommendation.json`` holds it. ``verified`` is true only when
    ``measured`` (the verification run's figure for every SLO metric) meets every SLO; with
    no candidate verified, ``winner`` is None and ``reason`` says why (an impossible SLO, a
    budget spent, nothing fitting in memory)."""

    slos: tuple[SloTarget, ...]
    winner: TriedConfig | None
    verified: bool
    # concurrent users the winner holds within the SLO (a trace: the most requests its
    # verification run had in flight at once)
    users: int | None
    rate_rps: float | None  # the highest Poisson request rate it sustains within the SLO
    runners_up: tuple[TriedConfig, ...]
    tried: tuple[TriedConfig, ...]
    command_line: str | None
    session_path: Path | None  # the session holding every verification run
    reason: str | None = None
    elapsed_s: float = 0.0
    rate_probes: tuple[RateTried, ...] = ()  # the rate search's probes, in order
    rate_session_path: Path | None = None  # the session holding them (Poisson arrivals)
    own_times: bool = False  # its traffic keeps its own times (a trace): no rate searched
    load: TraceLoad | None = None  # a trace window's, which ``users`` then counts at its peak

    @property
    def measured(self) -> dict[str, float | None]:
        return {} if self.winner is None or self.winner.measured is None else self.winner.measured

    def rate_said(self) -> str:
        """What the rate search found, in one sentence (as the CLI and the Tune tab say it)."""
        if self.rate_rps is not None:
            return f"It holds {rounded(self.rate_rps)} requests/s (Poisson) within the SLO."
        if self.rate_probes:
            return "No Poisson rate probe met the SLO."
        if self.own_times:
            return "Rate search: none, the traffic keeps its own times (a trace or conversations)."
        return "Rate search: no room left in the budget."
