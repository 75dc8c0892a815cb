"""Conversations against the real llama-server, 4 users of 3 turns at 1 slot and at 4, no
RAM prompt cache (``cache_ram_mib = 0``): with a slot each, every later turn comes back to
its conversation's slot and the server takes the whole previous turn from it; with one slot
shared by four, the slot always holds another conversation, and each turn is prefilled again
but for the chat template's opening, which every conversation shares.

Measured on SmolLM2-135M (its chat template adds 30 tokens around one message, a default
system prompt among them): at 4 slots ``timings.cache_n`` of turn k is turn k-1's prompt
and all but the last of its answer's tokens (94, 8 -> 101; 177, 8 -> 184); at 1 slot it is
26 on every turn after the very first."""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path

import pytest

from workbench.engine.analysis.verdicts import HELD, LOST, SUPPORTED, cache_verdicts, lab_verdicts
from workbench.engine.base.records import RequestRecord
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.run.lifecycle import run_experiment
from workbench.engine.run.runner import RunOptions
from workbench.engine.store import open_session

pytestmark = pytest.mark.server

USERS, TURNS, USER_TOKENS, MAX_TOKENS = 4, 3, 64, 8
TEMPLATE_TOKENS = 30  # SmolLM2's chat template around one user message (measured)
EXPERIMENT = f"""name = 'conversations'
[server]
slots = [1, 4]
ctx = 8192
cache_ram_mib = 0
[workload]
kind = "conversations"
users = {USERS}
turns = {TURNS}
user_tokens = {USER_TOKENS}
max_tokens = {MAX_TOKENS}
warmup = 0
"""


@pytest.fixture(scope="module")
def session_path(tmp_path_factory) -> Path:
    """The session of the experiment's run, both configurations ok."""
    result = run_experiment(
        parse_experiment(EXPERIMENT), RunOptions(tmp_path_factory.mktemp("conversations"))
    )
    assert [s.status for s in result.summaries] == ["ok", "ok"]
    assert result.session_path is not None
    return result.session_path


@pytest.fixture(scope="module")
def conversed(session_path) -> dict[int, dict[str, list[RequestRecord]]]:
    """Each configuration's conversations (0: one slot, 1: four), turn 1 first."""
    by_config: dict[int, dict[str, list[RequestRecord]]] = defaultdict(lambda: defaultdict(list))
    with open_session(session_path) as session:
        for config in session.configs:
            for record in sorted(session.records(config.index), key=lambda r: r.turn or 0):
                assert record.ok, record.error
                by_config[config.index][record.conversation_id or ""].append(record)
    return by_config


def figures(record: RequestRecord) -> tuple[int, int, int]:
    """The prompt as the server counted it, what it took from the cache, what it processed."""
    assert record.usage is not None and record.timings is not None
    return record.usage["prompt_tokens"], record.timings["cache_n"], record.timings["prompt_n"]


def test_every_request_is_a_numbered_turn_of_a_conversation(conversed):
    for conversations in conversed.values():
        assert len(conversations) == USERS
        for turns in conversations.values():
            assert [r.turn for r in turns] == list(range(1, TURNS + 1))


def test_the_prompts_are_exact_and_carry_the_real_answers(conversed):
    """Turn 1 is one message of ``user_tokens`` in the template; each later turn's prompt is
    the previous one, its answer as generated, and a new message of ``user_tokens`` in the
    same few template tokens, for every conversation alike."""
    growth = set()
    for conversations in conversed.values():
        for turns in conversations.values():
            assert figures(turns[0])[0] == TEMPLATE_TOKENS + USER_TOKENS
            for before, after in itertools.pairwise(turns):
                assert before.output_tokens == (MAX_TOKENS, "usage") and before.text
                growth.add(figures(after)[0] - figures(before)[0] - MAX_TOKENS)
    (added,) = growth
    assert USER_TOKENS < added <= USER_TOKENS + 16  # the message and its turn's markers


def test_at_a_slot_per_user_each_turn_reuses_the_previous_one(conversed):
    for turns in conversed[1].values():
        assert len({r.slot for r in turns}) == 1  # back to its own slot
        for before, after in itertools.pairwise(turns):
            prompt, cached, processed = figures(after)
            # The previous prompt and its answer, sent back as the server generated it
            # (all but the answer's last token, which no slot holds; one more spared for a
            # text that re-tokenizes differently).
            assert figures(before)[0] + MAX_TOKENS - 2 <= cached < prompt
            assert processed == prompt - cached
            assert processed <= USER_TOKENS + 16 + 1
    assert len({turns[0].slot for turns in conversed[1].values()}) == USERS


def test_at_one_slot_each_turn_is_prefilled_again(conversed):
    for turns in conversed[0].values():
        assert {r.slot for r in turns} == {0}
        for before, after in itertools.pairwise(turns):
            prompt, cached, processed = figures(after)
            assert cached <= TEMPLATE_TOKENS  # at most the template's shared opening
            assert cached * 2 < figures(before)[0]
            assert processed == prompt - cached


def test_the_verdict_says_four_slots_held_the_caches_and_one_lost_them(session_path):
    """The figures and the sentences, from the session as ``show`` reads it."""
    with open_session(session_path) as session:
        one, four = session.summaries()
    later = USERS * (TURNS - 1)
    assert (one.value("later_turns"), one.value("lost_turns")) == (later, later)
    assert (four.value("later_turns"), four.value("lost_turns")) == (later, 0)
    assert four.value("reprefilled_tokens") == 0 and four.value("later_cache_share") == 1.0
    assert one.value("reprefilled_tokens") > later * USER_TOKENS  # the history, each time
    assert one.value("later_ttft_p50_s") > four.value("later_ttft_p50_s")
    assert (one.value("conversations_per_slot"), four.value("conversations_per_slot")) == (4, 1)
    lost, held = cache_verdicts([one, four])
    assert (lost.state, held.state) == (LOST, HELD)
    assert lost.sentence.startswith(
        f"np=1: the conversations lost their caches: {later} of {later}"
    )
    assert held.sentence.startswith(
        "np=4: the slots held the conversations' caches: later turns took 100%"
    )
    assert lab_verdicts([one, four])[-1].verdict == SUPPORTED
