"""The memory a server should need, from the buffers its startup log reports: the one rule
the window's memory plot and the CLI's memory check both draw their prediction from."""

from __future__ import annotations

from workbench.engine.base.records import StartupFacts


def predicted_footprint_mib(facts: StartupFacts) -> float | None:
    """Model + KV + compute buffers, as the server logged them at start-up; None unless it
    logged all three. A prediction missing a part would read the part's size as the
    runtime's own use (what the measured memory above the buffers is taken for)."""
    model, kv, compute = facts.model_buffer_mib, facts.kv_buffer_mib, facts.compute_buffer_mib
    if model is None or kv is None or compute is None:
        return None
    return float(model + kv + compute)
