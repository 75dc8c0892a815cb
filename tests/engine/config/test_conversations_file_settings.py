"""A conversations file, the slot pin and the prompt cache's server knobs are settings like
any other; what a file replaces, or a field that only a conversations run takes, is refused
in one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.engine.base.errors import ExperimentError
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.server.llama_server import server_arguments

FILE = '[workload]\nkind = "conversations"\nconversations_file = "chats.jsonl"\n'


def test_a_file_run_counts_its_requests_from_what_setup_read():
    """Before setup reads the file no count is known; setup sets ``requests`` to its user
    messages, which is what a repeat then sends (``users`` x ``turns`` no longer)."""
    (config,) = parse_experiment(FILE + "users = 2\n").configs()
    assert config.workload.conversations_file == "chats.jsonl"
    assert config.workload.cache_prompt is True
    assert config.workload.per_repeat == config.workload.requests
    assert config.workload.longest_prompt_tokens == 0  # the file's messages, as written
    assert config.workload.effective_concurrency == 2


def test_slots_and_the_pin_are_a_sweep():
    text = "[server]\nslots = [1, 4]\n" + FILE + 'id_slot = ["auto", "conversation"]\n'
    labels = [c.label for c in parse_experiment(text).configs()]
    assert labels == [
        "np=1 id_slot=auto",
        "np=1 id_slot=conversation",
        "np=4 id_slot=auto",
        "np=4 id_slot=conversation",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[workload]\nconversations_file = "chats.jsonl"\n',
            r'\[workload\] conversations_file is a field of kind = "conversations", not of this '
            r'workload \(kind = "requests"\)',
        ),
        (
            '[workload]\nid_slot = "conversation"\n',
            r'\[workload\] id_slot is a field of kind = "conversations", not of this workload',
        ),
        (
            '[workload]\nkind = "conversations"\nid_slot = "user"\n',
            r"\[workload\] id_slot must be one of auto, conversation",
        ),
        (
            FILE + "turns = 5\n",
            r"\[workload\] turns = 5: a conversations_file replays each conversation's own "
            r"turns; leave turns out",
        ),
        (
            FILE + "user_tokens = 32\n",
            r"\[workload\] user_tokens = 32: a conversations_file sends its user messages as "
            r"written; leave user_tokens out",
        ),
        (
            FILE + "system_prompt_tokens = 100\n",
            r"\[workload\] system_prompt_tokens = 100: a conversations_file sends each "
            r"conversation's own system message",
        ),
        (
            FILE + 'prompts = "p.txt"\n',
            r"\[workload\] prompts = 'p.txt': a conversations_file takes its user messages "
            r"from the file",
        ),
        ("[server]\ncache_reuse = -1\n", r"\[server\] cache_reuse must be between 0 and"),
        ('[server]\ncache_idle_slots = "yes"\n', r"\[server\] cache_idle_slots must be"),
    ],
)
def test_what_does_not_go_together_is_refused_by_name(text, message):
    with pytest.raises(ExperimentError, match=message):
        parse_experiment(text)


def test_the_cache_knobs_become_their_flags_and_are_left_out_unset():
    def args(**settings) -> str:
        return " ".join(server_arguments(ServerSettings(**settings), Path("/m.gguf"), 9000))

    assert "--no-cache-idle-slots" in args(cache_idle_slots=False)
    assert "--cache-idle-slots" in args(cache_idle_slots=True).split()
    assert "--cache-reuse 256" in args(cache_reuse=256)
    assert "cache-idle" not in args() and "--cache-reuse" not in args()
