"""One repeat's speculative decoding, from the server's counters just before and after it.

A server started with a draft model counts the drafts it verified, the tokens drafted and
those the model accepted (``server_kinds``: llama.cpp's ``spec_decode_*_total``, as vLLM
names them); the counters are cumulative and add every slot's drafts, so a repeat's figures
are their differences. The share accepted is what makes a draft pay: each accepted token is
one the model did not have to decode on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.engine.base.server_kinds import (
    ACCEPTED_TOKEN_COUNTERS,
    DRAFT_COUNTERS,
    DRAFT_TOKEN_COUNTERS,
)
from workbench.engine.base.validation import MAX_NUMBER
from workbench.engine.figures.cross_checks import counter_delta


@dataclass(frozen=True)
class SpecFigures:
    """A repeat's drafts, drafted and accepted tokens, and the share accepted; None each
    where the server drafted nothing (no draft model) or does not count drafts."""

    spec_drafts: int | None = None
    spec_draft_tokens: int | None = None
    spec_accepted_tokens: int | None = None
    spec_acceptance: float | None = None


def _count(value: float | None) -> int | None:
    """A counter's difference as a count: a whole number from 0 to ``MAX_NUMBER`` (the
    counters are untrusted: a server restarted between the two reads counts backwards)."""
    if value is None or not 0 <= value <= MAX_NUMBER or value != int(value):
        return None
    return int(value)


def spec_figures(before: dict[str, float] | None, after: dict[str, float] | None) -> SpecFigures:
    """The figures of the repeat between ``before`` and ``after`` (a ``/metrics`` each)."""
    drafts = _count(counter_delta(before, after, DRAFT_COUNTERS))
    drafted = _count(counter_delta(before, after, DRAFT_TOKEN_COUNTERS))
    accepted = _count(counter_delta(before, after, ACCEPTED_TOKEN_COUNTERS))
    if not drafts or not drafted or accepted is None or accepted > drafted:
        return SpecFigures()
    return SpecFigures(drafts, drafted, accepted, accepted / drafted)
