"""A conversations file replayed on the real llama-server, two users at 2 slots, the
server's RAM prompt cache off: each later turn carries the server's own earlier answers (its
slot's cache holds them, so it takes the previous turn whole: a recorded answer sent instead
would break the match there), and with ``id_slot = "conversation"`` the server runs user *n*'s
conversations on slot (*n* - 1) mod 2, as the log's slot lines say: the third conversation on
the slot of the user that came free for it.

Measured first on the pinned llama-server at ``-np 2``: a request with ``"id_slot": 1`` to
/v1/chat/completions on an idle server is logged ``selected slot by id (1)`` and runs on
slot 1, then one with ``"id_slot": 0`` on slot 0. Left to itself, the server puts a request
on the slot holding the most of its prompt (``selected slot by LCP similarity``; the chat
template's opening is shared by all), so with ``auto`` one conversation at a time all three
ran on one slot."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict

import pytest

from workbench.engine.base.records import RequestRecord
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.run.lifecycle import run_experiment
from workbench.engine.run.runner import RunOptions
from workbench.engine.store import open_session

pytestmark = pytest.mark.server

MAX_TOKENS = 8
CONVERSATIONS = [
    [
        {"role": "system", "content": "You answer in one short sentence."},
        {"role": "user", "content": "Name a colour of the sea."},
        {"role": "assistant", "content": "RECORDED ANSWER, NOT SENT"},
        {"role": "user", "content": "And one of the sky at night?"},
    ],
    [
        {"role": "user", "content": "What do bees make?"},
        {"role": "assistant", "content": "RECORDED ANSWER, NOT SENT"},
        {"role": "user", "content": "Where do they keep it?"},
    ],
    [{"role": "user", "content": "Say hello in French."}],
]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> dict[str, dict[str, list[RequestRecord]]]:
    """Each configuration's conversations by id (its label: id_slot=auto, =conversation)."""
    folder = tmp_path_factory.mktemp("replay")
    chats = folder / "chats.jsonl"
    chats.write_text("".join(json.dumps({"messages": c}) + "\n" for c in CONVERSATIONS))
    text = f"""name = 'replay'
[server]
slots = 2
ctx = 4096
cache_ram_mib = 0
cache_idle_slots = false
cache_reuse = 256
[workload]
kind = "conversations"
conversations_file = "{chats}"
users = 2
id_slot = ["auto", "conversation"]
max_tokens = {MAX_TOKENS}
warmup = 0
"""
    path = folder / "replay.toml"
    path.write_text(text)
    result = run_experiment(parse_experiment(text, path=str(path)), RunOptions(folder / "out"))
    assert [s.status for s in result.summaries] == ["ok", "ok"]
    by_config: dict[str, dict[str, list[RequestRecord]]] = defaultdict(lambda: defaultdict(list))
    with open_session(result.session_path) as session:
        for config in session.configs:
            for record in sorted(session.records(config.index), key=lambda r: r.turn or 0):
                assert record.ok, record.error
                by_config[config.label][record.conversation_id or ""].append(record)
    return by_config


def test_every_user_message_of_the_file_is_a_turn_once(replayed):
    for conversations in replayed.values():
        assert {cid: [r.turn for r in turns] for cid, turns in conversations.items()} == {
            "r1u1": [1, 2],
            "r1u2": [1, 2],
            "r1u3": [1],
        }
        assert [r.prompt for r in conversations["r1u2"]] == [
            "What do bees make?",
            "Where do they keep it?",
        ]


def test_each_later_turn_carries_the_servers_own_answer(replayed):
    for turns in replayed["id_slot=conversation"].values():
        for before, after in itertools.pairwise(turns):
            assert before.usage is not None and after.usage is not None
            assert after.timings is not None and before.text
            # The previous prompt and its answer as generated, found in the slot's cache
            # (all but the answer's last token, which no slot holds; one spared for a text
            # that re-tokenizes differently).
            assert after.timings["cache_n"] >= before.usage["prompt_tokens"] + MAX_TOKENS - 2


def test_a_pinned_conversation_runs_on_its_own_slot(replayed):
    pinned = replayed["id_slot=conversation"]
    slots = {cid: {r.slot for r in turns} for cid, turns in pinned.items()}
    assert slots["r1u1"] == {0} and slots["r1u2"] == {1}
    # The third goes to the user whose conversation ended first, on that user's slot.
    freed = min(("r1u1", "r1u2"), key=lambda cid: pinned[cid][-1].t_done_ns or 0)
    assert pinned["r1u3"][0].t_intended_ns >= pinned[freed][-1].t_done_ns
    assert slots["r1u3"] == slots[freed]
