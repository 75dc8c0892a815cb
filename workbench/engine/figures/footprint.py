"""The memory a server should need, from the buffers its startup log reports: the one rule
the window's memory plot and the CLI's memory check both draw their prediction from
(``models.memory.logged_memory``, the same weights + KV + overhead a plan adds up)."""

from __future__ import annotations

from workbench.engine.base.records import StartupFacts
from workbench.engine.models.memory import logged_memory


def predicted_footprint_mib(facts: StartupFacts) -> float | None:
    """Model + KV + compute buffers, as the server logged them at start-up; None unless it
    logged all three. A prediction missing a part would read the part's size as the
    runtime's own use (what the measured memory above the buffers is taken for)."""
    memory = logged_memory(facts)
    return None if memory is None else memory.total_mib
