"""A later turn against the cache: what it had sent before, what the server reused, what it
processed again. The counts' meaning was measured on the real llama-server:
``usage.prompt_tokens`` is ``timings.cache_n + prompt_n`` (42 = 41 + 1 on a repeated prompt),
and a conversation's next turn can reuse more than its previous prompt (43 of a 42-token
prompt: part of the answer was in the slot too)."""

from __future__ import annotations

from workbench.engine.base.records import RequestRecord
from workbench.engine.figures.conversation_cache import TurnCache, turn_caches


def turn(index: int, cid: str, n: int, prompt: int, cache_n: int, ok: bool = True, repeat=0):
    return RequestRecord(
        0, repeat, index, "q", ok=ok, conversation_id=cid, turn=n,
        usage={"prompt_tokens": prompt},
        timings={"prompt_n": prompt - cache_n, "cache_n": cache_n},
    )  # fmt: skip


def test_a_turn_that_found_its_history_kept_it():
    kept = TurnCache(seen=101, cached=101)
    assert kept.reprefilled == 0 and not kept.lost
    assert TurnCache(seen=42, cached=43).reprefilled == 0  # the answer's start too


def test_a_turn_that_processed_most_of_its_history_again_lost_it():
    lost = TurnCache(seen=177, cached=26)  # measured at 1 slot: only the template's opening
    assert lost.reprefilled == 151 and lost.lost
    assert not TurnCache(seen=100, cached=50).lost  # half is the line, not over it
    assert not TurnCache(seen=0, cached=0).lost


def test_later_turns_are_paired_with_their_own_conversation_previous_turn():
    records = [
        turn(0, "r1u1", 1, prompt=100, cache_n=0),
        turn(1, "r1u2", 1, prompt=90, cache_n=0),
        turn(2, "r1u1", 2, prompt=180, cache_n=100),
        turn(3, "r1u2", 2, prompt=170, cache_n=10),
        turn(4, "r1u1", 3, prompt=260, cache_n=5, ok=False),  # failed: none
        turn(5, "r2u1", 2, prompt=180, cache_n=100, repeat=1),  # no turn 1 in its repeat
    ]
    caches = turn_caches(records)
    assert caches == {
        records[2].key: TurnCache(100, 100),
        records[3].key: TurnCache(90, 10),
    }
    assert caches[records[3].key].lost


def test_independent_requests_and_missing_counts_have_no_turn_cache():
    plain = RequestRecord(0, 0, 0, "q", ok=True, timings={"cache_n": 5})
    uncounted = turn(2, "r1u1", 2, prompt=10, cache_n=0)
    uncounted.timings = {}
    assert turn_caches([plain, turn(1, "r1u1", 1, 10, 0), uncounted]) == {}
