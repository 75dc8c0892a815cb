"""The sentence per conversations configuration that says whether its slots held the
conversations' caches, from the catalogue's figures, set beside another configuration of the
sweep; and the lab's hypothesis judged on those sentences."""

from __future__ import annotations

from tests.engine.figures.test_conversation_figures import WORKLOAD, chats
from tests.made_sessions import request, server_of, workload_of
from workbench.engine.analysis.verdicts import (
    HELD,
    INCONCLUSIVE,
    LOST,
    NOT_SUPPORTED,
    PARTLY_HELD,
    SUPPORTED,
    cache_verdicts,
    lab_verdicts,
    slots_hold_conversations,
)
from workbench.engine.base.records import StartupFacts
from workbench.engine.figures.summaries import ConfigSummary, summarize

HELD_CACHE, LOST_CACHE, HALF = (107, 187), (26, 26), (107, 26)


def config(index: int, slots: int, cache_n: tuple[int, int], ttft: float) -> ConfigSummary:
    """Two conversations at ``slots``, their later turns finding ``cache_n`` in the cache."""
    records = [r for r in chats(cache_n, ttft) if not setattr(r, "config_index", index)]
    return summarize(
        index,
        f"np={slots}",
        server_of({"slots": slots}),
        workload_of(WORKLOAD),
        StartupFacts(),
        records,
    )


def test_each_configuration_gets_one_sentence_beside_the_other():
    lost, held = config(0, 1, LOST_CACHE, 0.41), config(1, 2, HELD_CACHE, 0.09)
    first, second = cache_verdicts([lost, held])
    assert (first.state, second.state) == (LOST, HELD)
    assert first.sentence == (
        "np=1: the conversations lost their caches: 4 of 4 later turns re-prefilled, 456 "
        "history tokens processed again; later turns' TTFT p50 0.410 s vs 0.090 s at np=2"
    )
    assert second.sentence == (
        "np=2: the slots held the conversations' caches: later turns took 100% of their "
        "history from the cache (0 tokens re-prefilled); later turns' TTFT p50 0.090 s vs "
        "0.410 s at np=1"
    )


def test_alone_a_configuration_is_judged_on_its_own_numbers():
    (alone,) = cache_verdicts([config(0, 1, HALF, 0.2)])
    assert alone.state == PARTLY_HELD  # 2 of 4 lost: not most
    assert alone.sentence == (
        "np=1: the slots held only some of the conversations' caches: 2 of 4 later turns "
        "re-prefilled, 308 history tokens processed again"
    )


def test_a_run_that_is_not_a_conversations_run_has_no_sentence_and_no_hypothesis():
    plain = summarize(
        0, "np=1", server_of({"slots": 1}), workload_of({}), StartupFacts(), [request(0)]
    )
    assert cache_verdicts([plain]) == []
    assert slots_hold_conversations([plain]) is None
    assert len(lab_verdicts([plain])) == 4  # the lab's four, nothing added


def test_the_hypothesis_holds_where_a_slot_each_held_and_shared_slots_lost():
    lost, held = config(0, 1, LOST_CACHE, 0.4), config(1, 2, HELD_CACHE, 0.05)
    verdict = lab_verdicts([lost, held])[-1]
    assert verdict.verdict == SUPPORTED
    assert verdict.numbers == [v.sentence for v in cache_verdicts([lost, held])]
    # Held at one slot for two conversations: the server kept caches beyond its slots.
    beyond = slots_hold_conversations([config(0, 1, HELD_CACHE, 0.05)])
    assert beyond is not None and beyond.verdict == NOT_SUPPORTED
    assert beyond.numbers[0] == f"np=1: {HELD} at 2 conversations per slot"
    facts, records = StartupFacts(), chats(HELD_CACHE)
    unknown = summarize(
        0, "ext", server_of({}), workload_of(WORKLOAD), facts, records, managed=False
    )
    assert slots_hold_conversations([unknown]).verdict == INCONCLUSIVE  # type: ignore[union-attr]


def test_caches_held_from_the_ram_cache_while_conversations_share_slots_are_not_judged():
    """With ``--cache-ram`` a conversation's history comes back from host memory into any
    slot: held at one slot then says nothing about slots (measured: 90-95 % of the history
    reused at 1, 2 and 4 slots for 8 users with 256 MiB, 46-47 % without)."""
    records = chats(HELD_CACHE, 0.05)
    server = server_of({"slots": 1, "cache_ram_mib": 256})
    ram = summarize(0, "np=1 cram=256", server, workload_of(WORKLOAD), StartupFacts(), records)
    (alone,) = cache_verdicts([ram])
    assert alone.state == HELD and alone.ram_cache
    verdict = slots_hold_conversations([ram])
    assert verdict is not None and verdict.verdict == INCONCLUSIVE
    assert verdict.numbers[-1] == (
        "held with more conversations than slots, the RAM prompt cache on (cache_ram_mib), "
        "so not judged: np=1 cram=256"
    )
    lost, held = config(1, 1, LOST_CACHE, 0.4), config(2, 2, HELD_CACHE, 0.05)
    assert slots_hold_conversations([ram, lost, held]).verdict == SUPPORTED  # type: ignore[union-attr]
