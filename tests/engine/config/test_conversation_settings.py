"""A conversations workload: its fields are settings like any other (checked, swept), it
turns the prompt cache on unless the file says otherwise, a repeat sends users x turns
requests whatever ``requests`` says, and what it cannot take is refused naming the field."""

from __future__ import annotations

import pytest

from workbench.engine.base.errors import ExperimentError
from workbench.engine.config.experiment import (
    ConversationsWorkload,
    RequestsWorkload,
    parse_experiment,
)

CONVERSATIONS = '[workload]\nkind = "conversations"\n'


def test_the_prompt_cache_is_on_unless_the_file_says_otherwise():
    (on,) = parse_experiment(CONVERSATIONS).configs()
    assert on.workload.cache_prompt is True
    (off,) = parse_experiment(CONVERSATIONS + "cache_prompt = false\n").configs()
    assert off.workload.cache_prompt is False
    (requests,) = parse_experiment("[workload]\nrequests = 3\n").configs()
    assert requests.workload.cache_prompt is False


def test_a_repeat_sends_every_turn_of_every_conversation():
    (config,) = parse_experiment(CONVERSATIONS + "users = 3\nturns = 5\nrequests = 2\n").configs()
    assert config.workload.per_repeat == 15
    assert config.workload.effective_concurrency == 3
    (plain,) = parse_experiment("[workload]\nrequests = 2\n").configs()
    assert plain.workload.per_repeat == 2
    with pytest.raises(ExperimentError, match=r"\[workload\] users is a field of kind = "):
        parse_experiment("[workload]\nrequests = 2\nusers = 3\n")  # not of a requests one


def test_the_last_turn_is_the_longest_prompt_a_slot_must_hold():
    text = (
        CONVERSATIONS + "turns = 3\nuser_tokens = 50\nmax_tokens = 20\nsystem_prompt_tokens = 7\n"
    )
    (config,) = parse_experiment(text).configs()
    assert config.workload.longest_prompt_tokens == 7 + 3 * 50 + 2 * 20
    (plain,) = parse_experiment("[workload]\ninput_tokens = 300\n").configs()
    assert plain.workload.longest_prompt_tokens == 300


def test_slots_by_users_is_a_sweep():
    text = "[server]\nslots = [1, 4]\n" + CONVERSATIONS + "users = [1, 4]\n"
    configs = parse_experiment(text).configs()
    assert [c.label for c in configs] == [
        "np=1 users=1",
        "np=1 users=4",
        "np=4 users=1",
        "np=4 users=4",
    ]
    assert {c.workload.kind for c in configs} == {"conversations"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('kind = "chats"', r"\[workload\] kind must be one of requests, conversations"),
        ("users = 0", r"\[workload\] users must be between 1 and"),
        ("turns = 0", r"\[workload\] turns must be between 1 and"),
        ("think_time_s = -1", r"\[workload\] think_time_s must be between 0 and"),
        ("user_tokens = 0", r"\[workload\] user_tokens must be between 1 and"),
        (
            'think_time_spread = "gamma"',
            r"\[workload\] think_time_spread must be one of fixed, exp",
        ),
        (
            "stop_when_saturated = true",
            r'\[workload\] stop_when_saturated is a field of kind = "requests" or '
            r'arrival = "trace", '
            r'not of this workload \(kind = "conversations"\)',
        ),
        ('endpoint = "completion"', r"\[workload\] endpoint = 'completion': kind = 'conv"),
        (
            'arrival = "poisson"\nrate = 2',
            r'\[workload\] arrival is a field of kind = "requests" or arrival = "trace", not of '
            r'this workload \(kind = "conversations"\)',
        ),
        ("input_tokens = 128", r'\[workload\] input_tokens is a field of kind = "requests", not'),
        (
            "shared_prefix_tokens = 8",
            r'\[workload\] shared_prefix_tokens is a field of kind = "req',
        ),
    ],
)
def test_what_a_conversations_workload_cannot_take_is_refused_by_name(extra, message):
    text = f"[workload]\n{extra}\n" if extra.startswith("kind") else CONVERSATIONS + extra + "\n"
    with pytest.raises(ExperimentError, match=message):
        parse_experiment(text)


def test_a_swept_kind_is_checked_for_its_conversations():
    with pytest.raises(ExperimentError, match=r"endpoint = 'completion'"):
        parse_experiment(
            '[workload]\nkind = ["requests", "conversations"]\nendpoint = "completion"\n'
        )
    assert (
        len(parse_experiment('[workload]\nkind = ["requests", "conversations"]\n').configs()) == 2
    )


def test_a_swept_kind_gives_each_configuration_its_own_kinds_fields():
    """Each configuration is the kind it says, with that kind's fields: the requests one has
    no users, the conversations one no concurrency; a field of neither is refused."""
    text = '[workload]\nkind = ["requests", "conversations"]\nusers = 2\nconcurrency = 1\n'
    requests, chats = parse_experiment(text).configs()
    assert isinstance(requests.workload, RequestsWorkload) and requests.workload.concurrency == 1
    assert not hasattr(requests.workload, "users")
    assert isinstance(chats.workload, ConversationsWorkload) and chats.workload.users == 2
    assert "concurrency" not in chats.to_dict()["workload"]
    with pytest.raises(ExperimentError, match=r"\[workload\] time_scale is a field of arrival"):
        parse_experiment(text + "time_scale = 2.0\n")
