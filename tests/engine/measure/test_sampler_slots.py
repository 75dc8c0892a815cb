"""What the sampler keeps from /slots, and the share of a slot's context its task holds: the
answer is untrusted, so only whole, bounded counts pass."""

from __future__ import annotations

import json

import pytest

from workbench.engine.measure.sampler import (
    MAX_COUNT,
    MAX_SLOTS,
    normalise_slots,
    slot_context_share,
)

# As the real server (this build) answers while decoding (``params`` cut short).
DECODING = {
    "id": 0,
    "n_ctx": 2048,
    "speculative": False,
    "is_processing": True,
    "id_task": 6,
    "n_prompt_tokens": 1451,
    "n_prompt_tokens_processed": 1450,
    "n_prompt_tokens_cache": 0,
    "params": {"n_predict": 200},
    "next_token": [{"has_next_token": True, "n_remain": 199, "n_decoded": 1}],
}
IDLE = {"id": 1, "n_ctx": 2048, "speculative": False, "is_processing": False}


def test_the_counts_of_a_real_answer_are_kept():
    busy, idle = normalise_slots([DECODING, IDLE])
    assert busy == {
        "id": 0,
        "is_processing": True,
        "id_task": 6,
        "n_decoded": 1,
        "n_ctx": 2048,
        "n_prompt_tokens": 1451,
        "n_prompt_tokens_processed": 1450,
        "n_prompt_tokens_cache": 0,
    }
    assert idle == {
        "id": 1,
        "is_processing": False,
        "id_task": None,
        "n_decoded": None,
        "n_ctx": 2048,
        "n_prompt_tokens": None,
        "n_prompt_tokens_processed": None,
        "n_prompt_tokens_cache": None,
    }
    # Older builds answer next_token as an object, not a one-element list.
    (old,) = normalise_slots([{**DECODING, "next_token": {"n_decoded": 7}}])
    assert old["n_decoded"] == 7


@pytest.mark.parametrize(
    "bad",
    ["12", 1.5, -1, True, None, [3], {"n": 3}, MAX_COUNT + 1, 10**400, float("nan")],
)
def test_anything_but_a_whole_bounded_count_is_no_count(bad):
    hostile = {
        "id": bad,
        "is_processing": True,
        "id_task": bad,
        "n_ctx": bad,
        "n_prompt_tokens": bad,
        "n_prompt_tokens_processed": bad,
        "n_prompt_tokens_cache": bad,
        "next_token": [{"n_decoded": bad}],
    }
    (slot,) = normalise_slots([hostile])
    assert {k: v for k, v in slot.items() if k != "is_processing"} == dict.fromkeys(
        [
            "id",
            "id_task",
            "n_decoded",
            "n_ctx",
            "n_prompt_tokens",
            "n_prompt_tokens_processed",
            "n_prompt_tokens_cache",
        ]
    )
    assert slot_context_share(slot) is None
    json.dumps(slot, allow_nan=False)  # what the session stores


def test_a_hostile_answer_is_cut_to_what_a_server_can_have():
    assert normalise_slots({"slots": [DECODING]}) == []
    assert normalise_slots("[]") == []
    assert normalise_slots([1, "x", None, [DECODING]]) == []
    huge = normalise_slots([DECODING] * (MAX_SLOTS * 50))
    assert len(huge) == MAX_SLOTS
    (beyond,) = normalise_slots([{**DECODING, "id": MAX_SLOTS}])
    assert beyond["id"] is None  # a row far below the strip's last slot is no slot
    # Only JSON's true is busy: a string "false" is not.
    flags = normalise_slots([{"is_processing": v} for v in (True, "false", 1, None)])
    assert [s["is_processing"] for s in flags] == [True, False, False, False]
    for next_token in ([], [None], "n_decoded", [[{"n_decoded": 3}]], {"n_decoded": "3"}):
        (slot,) = normalise_slots([{**DECODING, "next_token": next_token}])
        assert slot["n_decoded"] is None


def test_the_share_is_the_sequence_the_task_holds_over_n_ctx():
    (decoding,) = normalise_slots([DECODING])
    assert slot_context_share(decoding) == 1451 / 2048
    # In prefill the server already counts the whole prompt, and nothing processed yet.
    prefill = {**decoding, "n_prompt_tokens": 1450, "n_prompt_tokens_processed": 0}
    assert slot_context_share({**prefill, "n_decoded": 0}) == 1450 / 2048
    # A prompt found in the cache: 649 reused, 1 processed, 2 decoded.
    cached = {"n_prompt_tokens_cache": 649, "n_prompt_tokens_processed": 1, "n_decoded": 2}
    assert slot_context_share({**decoding, **cached, "n_prompt_tokens": 652}) == 652 / 2048
    # A build whose n_prompt_tokens is the prompt alone: the counts still add the tokens out.
    assert slot_context_share({**decoding, "n_prompt_tokens": 1450, "n_decoded": 40}) == (
        1490 / 2048
    )
    # A build that gives only the counts, not the sequence.
    assert slot_context_share({**decoding, "n_prompt_tokens": None}) == 1451 / 2048


def test_an_idle_slot_holds_nothing_and_a_full_one_is_full():
    (idle,) = normalise_slots([IDLE])
    assert slot_context_share(idle) == 0.0
    # A finished slot keeps its last sequence as a cache: no request holds it.
    finished = {**DECODING, "is_processing": False, "n_prompt_tokens": 1649}
    assert slot_context_share(normalise_slots([finished])[0]) == 0.0
    overfull = {**DECODING, "n_prompt_tokens": 5000}
    assert slot_context_share(normalise_slots([overfull])[0]) == 1.0


def test_no_share_where_the_server_does_not_say():
    # A build before the prompt counts, a zero context, and a session kept before them.
    older = {**DECODING, "n_prompt_tokens": None, "n_prompt_tokens_processed": None}
    assert slot_context_share(normalise_slots([older])[0]) is None
    assert slot_context_share(normalise_slots([{**DECODING, "n_ctx": 0}])[0]) is None
    assert slot_context_share({"id": 0, "is_processing": True, "n_decoded": 5}) is None
    # What a replayed session hands over is checked again, not trusted.
    assert slot_context_share({**DECODING, "n_ctx": "2048"}) is None
    tampered = {**DECODING, "n_prompt_tokens": -5, "n_prompt_tokens_processed": 1e9}
    assert slot_context_share(tampered) is None
