"""A calibration in plain words, as ``workbench calibrate`` prints it and the window shows it,
and what makes a prediction from it doubtful (``doubts``): a fit that predicts the requests
it was not fitted to badly, one of too few requests to tell, or one asked about far more than
its requests spanned."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.engine.predict.calibration import PROBE, Calibration, Coverage
from workbench.engine.predict.costs import StepCosts
from workbench.engine.predict.probe import LONG, SEQUENCES, SHORT

DECODE_BAR = 0.25
"""The held-back median error of ``predicted_ms`` a fit must keep within: a 60 s probe on a
quiet 2-core machine keeps within a few %, one on a machine loaded four times over does not."""
PROMPT_BAR = 0.5
"""The same of ``prompt_ms``: prompts of a few ms are timed less exactly."""
MIN_HELD_BACK = 8
"""Fewer generating requests than this tell too little of the fit, however well they agree."""
OUTSIDE = 2.0
"""Asked about more than this many times what its requests spanned, a fit extrapolates."""


def describe(calibration: Calibration) -> list[str]:
    """The costs in plain words, how well they reproduce what they were fitted to and the
    requests held back from the fit, and what those requests spanned."""
    d, p, q = calibration.costs.decode, calibration.costs.prefill, calibration.quality
    rate = f" ({1000 / p.per_token_ms:,.0f} tok/s)" if p.per_token_ms > 0 else ""
    interleaved = calibration.costs.interleaved_ms
    return [
        f"decode: {d.base_ms:.2f} ms a step + {d.per_sequence_ms:.2f} ms per sequence + "
        f"{d.per_context_token_ms * 1000:.2f} µs per context token",
        f"prefill: {p.base_ms:.1f} ms + {p.per_token_ms:.3f} ms a token{rate} + "
        f"{p.per_token_context_ms * 1000:.2f} µs a token pair over the cache"
        + (
            f" ({p.small_chunk_context_ms * 1000:.2f} µs in chunks of at most "
            f"{p.small_chunk_tokens} tokens)"
            if p.small_chunk_tokens
            else ""
        ),
        _micro_batch_line(calibration.costs),
        f"request overhead {calibration.costs.request_overhead_ms:.1f} ms; a step of prompt "
        f"beside generating ones {interleaved:+.1f} ms besides both"
        + (" (a saving: never below the dearer part alone)" if interleaved < 0 else ""),
        f"fit: prompt times within {q.prefill_median_error:.0%} "
        f"(worst {q.prefill_worst_error:.0%}) of {q.prefill_requests} requests, "
        f"decode times within {q.decode_median_error:.0%} "
        f"(worst {q.decode_worst_error:.0%}) of {q.decode_requests}",
        _held_back_line(calibration),
        _spans_line(calibration.coverage),
        f"for {calibration.model}, {calibration.machine}; from {calibration.source}",
    ]


def _micro_batch_line(costs: StepCosts) -> str:
    m = costs.micro_batch
    if m is None:
        return f"measured at -ub {costs.ubatch_size}; another -ub not measured: it holds there only"
    return (
        f"measured at -ub {costs.ubatch_size}; each micro-batch {m.base_ms:.1f} ms + "
        f"{m.per_context_token_ms * 1000:.2f} µs per context token besides its tokens "
        f"(from -ub {m.measured_at} against {costs.ubatch_size})"
    )


def _held_back_line(calibration: Calibration) -> str:
    q = calibration.quality
    if q.held_back_decode_median_error is None and q.held_back_prefill_median_error is None:
        return "held back: no request held back from the fit (too few, or an older file)"
    parts = []
    for name, median, worst in (
        ("prompt", q.held_back_prefill_median_error, q.held_back_prefill_worst_error),
        ("decode", q.held_back_decode_median_error, q.held_back_decode_worst_error),
    ):
        if median is not None and worst is not None:
            parts.append(f"{name} times within {median:.0%} (worst {worst:.0%})")
    return "held back (each request predicted by a fit to the others): " + ", ".join(parts)


def _spans_line(spanned: Coverage | None) -> str:
    if spanned is None:
        return "its requests' span was not stored (an older file)"
    return (
        f"its requests spanned prompts of up to {spanned.prompt_tokens:,} tokens, "
        f"{spanned.sequences} generating at once, contexts of up to "
        f"{spanned.context_tokens:,} tokens"
    )


@dataclass(frozen=True)
class Doubt:
    """Why a prediction from a calibration is doubtful, and what would do better."""

    why: str
    better: str

    def line(self) -> str:
        return f"{self.why}: {self.better}"


def doubts(calibration: Calibration, asked: Coverage | None = None) -> list[Doubt]:
    """What makes a prediction from ``calibration`` of requests spanning ``asked``
    doubtful: its held-back error above the bar (``DECODE_BAR``, ``PROMPT_BAR``), too few
    requests held back to tell (``MIN_HELD_BACK``), or a prompt length, sequences or a
    context more than ``OUTSIDE`` times what its requests spanned. None: it holds."""
    q = calibration.quality
    probe = calibration.source == PROBE
    again = (
        "calibrate again on a quiet machine (`workbench calibrate`)"
        if probe
        else f"`workbench calibrate` (the probe: prompts of {SHORT:,} to {LONG:,} tokens, "
        f"{SEQUENCES[0]} to {SEQUENCES[-1]} generating at once)"
    )
    found = []
    if q.decode_requests < MIN_HELD_BACK or q.held_back_decode_median_error is None:
        found.append(
            Doubt(
                f"fitted to {q.decode_requests} generating requests, fewer than the "
                f"{MIN_HELD_BACK} that tell a fit's error on requests it was not fitted to",
                again,
            )
        )
    else:
        for name, median, bar in (
            ("decode", q.held_back_decode_median_error, DECODE_BAR),
            ("prompt", q.held_back_prefill_median_error, PROMPT_BAR),
        ):
            if median is not None and median > bar:
                found.append(
                    Doubt(
                        f"held back from the fit, its requests' {name} times were off by "
                        f"{median:.0%} (median), above the {bar:.0%} bar",
                        again,
                    )
                )
    spanned = calibration.coverage
    if asked is not None and spanned is not None:
        beyond = [
            f"{what} of up to {wanted:,} (its requests: {had:,})"
            for what, wanted, had in (
                ("prompts", asked.prompt_tokens, spanned.prompt_tokens),
                ("sequences generating at once", asked.sequences, spanned.sequences),
                ("contexts", asked.context_tokens, spanned.context_tokens),
            )
            if wanted > OUTSIDE * max(had, 1)
        ]
        if beyond:
            wider = (
                "`workbench calibrate --from SESSION` of a run at those sizes"
                if probe or asked.prompt_tokens > OUTSIDE * LONG
                else again
            )
            found.append(Doubt("asked about " + "; ".join(beyond), wider))
    return found
