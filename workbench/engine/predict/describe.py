"""A calibration in plain words, as ``workbench calibrate`` prints it and the window shows it."""

from __future__ import annotations

from workbench.engine.predict.calibration import Calibration


def describe(calibration: Calibration) -> list[str]:
    """The costs in plain words, and how well they reproduce what they were fitted to."""
    d, p, q = calibration.costs.decode, calibration.costs.prefill, calibration.quality
    rate = f" ({1000 / p.per_token_ms:,.0f} tok/s)" if p.per_token_ms > 0 else ""
    return [
        f"decode: {d.base_ms:.2f} ms a step + {d.per_sequence_ms:.2f} ms per sequence + "
        f"{d.per_context_token_ms * 1000:.2f} µs per context token",
        f"prefill: {p.base_ms:.1f} ms + {p.per_token_ms:.3f} ms a token{rate}",
        f"request overhead {calibration.costs.request_overhead_ms:.1f} ms; a step of prompt "
        f"beside generating ones {calibration.costs.interleaved_ms:+.1f} ms besides both",
        f"fit: prompt times within {q.prefill_median_error:.0%} "
        f"(worst {q.prefill_worst_error:.0%}) of {q.prefill_requests} requests, "
        f"decode times within {q.decode_median_error:.0%} "
        f"(worst {q.decode_worst_error:.0%}) of {q.decode_requests}",
        f"for {calibration.model}, {calibration.machine}; from {calibration.source}",
    ]
