"""Whether a conversation found its history in the server's cache when it came back.

Each turn of a conversation resends the whole conversation so far, so everything the previous
turn's prompt held is a prefix the server has already processed once. What it took from its
cache this time (``timings.cache_n``) against that prefix says whether the slot still held
the conversation: the difference is history it had to process again, "re-prefilled".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from workbench.engine.base.records import RequestKey, RequestRecord
from workbench.engine.figures.per_request import prompt_tokens, token_count

LOST_SHARE = 0.5
"""A turn that re-prefilled more than this share of the history it had sent before lost its
cache: the slot served another conversation in between (a few tokens at the end of a prefix
are re-processed whatever the cache holds)."""


@dataclass(frozen=True)
class TurnCache:
    """A later turn's history against the server's cache, in tokens: ``seen`` the previous
    turn's prompt (the server's count), ``cached`` what the server reused this time."""

    seen: int
    cached: int

    @property
    def reprefilled(self) -> int:
        """History processed again although the server had processed it once (the cache can
        hold more than ``seen``, part of the previous answer too: that is no loss)."""
        return max(0, self.seen - self.cached)

    @property
    def lost(self) -> bool:
        return self.seen > 0 and self.reprefilled > LOST_SHARE * self.seen


def turn_caches(records: Iterable[RequestRecord]) -> dict[RequestKey, TurnCache]:
    """Every later turn (turn 2 on) whose own and previous turn's counts the server gave,
    by its request's key. A turn after a failed turn has none: its conversation ended."""
    by_turn = {
        (r.config_index, r.repeat, r.conversation_id, r.turn): r
        for r in records
        if r.conversation_id is not None and r.turn is not None and r.ok and not r.warmup
    }
    caches: dict[RequestKey, TurnCache] = {}
    for (config_index, repeat, cid, turn), record in by_turn.items():
        previous = by_turn.get((config_index, repeat, cid, turn - 1))
        if previous is None:
            continue
        seen = prompt_tokens(previous)
        cached = token_count((record.timings or {}).get("cache_n"))
        if seen is not None and cached is not None:
            caches[record.key] = TurnCache(seen, cached)
    return caches
