"""A conversations run's figures per repeat and per configuration: TTFT of turn 1 against
the later turns, how much of the later turns' history came from the cache, what was
re-prefilled, the turns that lost their cache and conversations per slot; TTFO where reasoning
was streamed. Empty for a run they do not apply to, and a table shows them only where a
configuration has them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.made_sessions import request, server_of, turn, workload_of
from workbench.engine.base.records import StartupFacts
from workbench.engine.figures.metrics import View, field_at, figure, shown_in
from workbench.engine.figures.per_run import summarize_run
from workbench.engine.figures.summaries import summarize

WORKLOAD = {"kind": "conversations", "users": 2, "turns": 3, "cache_prompt": True}


def chats(later_cache_n: tuple[int, int], later_ttft_s: float = 0.4) -> list:
    """Two conversations of three turns (prompts 100, 180, 260 tokens): each later turn
    found ``later_cache_n`` (turn 2's, turn 3's) in the cache."""
    return [
        turn(
            2 * (n - 1) + user - 1,
            user,
            n,
            cache_n=0 if n == 1 else later_cache_n[n - 2],
            submit_s=2.0 * (n - 1),
            ttft_s=0.2 if n == 1 else later_ttft_s,
            slot=0,
        )
        for n in (1, 2, 3)
        for user in (1, 2)
    ]


def test_later_turns_that_lost_their_cache_are_counted_and_their_history_summed():
    run = summarize_run(chats((26, 26)))
    assert (run.conversation.turn1_ttft_p50_s, run.conversation.later_ttft_p50_s) == pytest.approx(
        (0.2, 0.4)
    )
    # 100 - 26 and 180 - 26 re-prefilled, per conversation
    assert run.conversation.reprefilled_tokens == 2 * (74 + 154)
    assert run.conversation.later_cache_share == pytest.approx(4 * 26 / (2 * (100 + 180)))
    assert (
        run.conversation.later_turns,
        run.conversation.lost_turns,
        run.conversation.lost_turn_share,
    ) == (4, 4, 1.0)


def test_history_and_more_from_the_cache_is_a_share_of_one_and_nothing_re_prefilled():
    run = summarize_run(chats((107, 187), later_ttft_s=0.05))  # the answer's start too
    assert run.conversation.later_cache_share == 1.0 and run.conversation.reprefilled_tokens == 0
    assert (
        run.conversation.later_turns,
        run.conversation.lost_turns,
        run.conversation.lost_turn_share,
    ) == (4, 0, 0.0)
    # Half of turn 3's history lost: re-prefilled, but not over the line of a lost cache.
    run = summarize_run(chats((100, 90)))
    assert run.conversation.reprefilled_tokens == 2 * 90 and run.conversation.lost_turns == 0


def test_repeats_combine_by_the_catalogue_rule_and_slots_are_shared_by_the_users():
    second = [
        replace(r, repeat=1, conversation_id=f"r2{r.conversation_id[2:]}")
        for r in chats((107, 187))
    ]
    summary = summarize(
        0,
        "np=1",
        server_of({"slots": 1}),
        workload_of(WORKLOAD),
        StartupFacts(),
        [*chats((26, 26)), *second],
    )
    assert summary.value("reprefilled_tokens") == 456  # summed: 456 + 0
    assert (summary.value("later_turns"), summary.value("lost_turns")) == (8, 4)
    assert summary.value("lost_turn_share") == 0.5  # the mean of 1 and 0
    assert summary.value("later_ttft_p50_s") == pytest.approx(0.4)
    assert summary.value("conversations_per_slot") == 2.0
    plain = summarize(
        0, "np=1", server_of({"slots": 1}), workload_of({}), StartupFacts(), [request(0)]
    )
    assert plain.conversations_per_slot is None  # not a conversations run
    auto = summarize(
        0,
        "np=auto",
        server_of({"slots": -1}),
        workload_of(WORKLOAD),
        StartupFacts(),
        chats((26, 26)),
    )
    assert auto.conversations_per_slot is None  # the server chose: unknown


def test_a_run_of_independent_requests_has_none_of_them():
    run = summarize_run([request(0), request(1, submit_s=0.5)])
    keys = (
        "turn1_ttft_p50_s", "turn1_ttft_p90_s", "later_ttft_p50_s", "later_ttft_p90_s",
        "later_cache_share", "reprefilled_tokens", "later_turns", "lost_turns",
        "lost_turn_share", "ttfo_p50_s", "ttfo_p90_s",
    )  # fmt: skip
    assert {key: field_at(run, figure(key).path) for key in keys} == dict.fromkeys(keys)


def test_ttfo_has_percentiles_only_where_reasoning_was_streamed():
    # Each streams 3 chunks of reasoning 0.1 s apart after a 0.1 s TTFT: TTFO is 0.4 s.
    reasoned = summarize_run([request(k, reasoning=3) for k in range(3)])
    assert reasoned.reasoning.ttfo_p50_s == pytest.approx(
        0.4
    ) and reasoned.reasoning.ttfo_p90_s == pytest.approx(0.4)
    # Told apart but none streamed: TTFO is TTFT, and says nothing more.
    plain = summarize_run([request(k, reasoning=0) for k in range(3)])
    assert plain.reasoning.ttfo_p50_s is None and plain.reasoning.ttfo_p90_s is None


def test_a_table_shows_an_optional_figure_only_where_a_configuration_has_it():
    chat = summarize(
        0, "np=1", server_of({"slots": 1}), workload_of(WORKLOAD), StartupFacts(), chats((26, 26))
    )
    plain = summarize(
        1, "np=2", server_of({"slots": 2}), workload_of({}), StartupFacts(), [request(0)]
    )
    optional = {f.key for f in shown_in(View.TERMINAL) if f.optional}
    assert not optional  # with no configurations to ask, none
    shown = {f.key for f in shown_in(View.TERMINAL, having=[plain, chat])}
    assert {"later_ttft_p50_s", "reprefilled_tokens", "conversations_per_slot"} <= shown
    assert not {"ttfo_p50_s", "steady_agg_tok_s"} & shown  # none has them
    alone = {f.key for f in shown_in(View.TERMINAL, having=[plain])}
    assert alone == {f.key for f in shown_in(View.TERMINAL)}
    assert figure("reprefilled_tokens").cell(plain) == "-"
