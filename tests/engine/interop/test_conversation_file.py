"""A conversations file is read whole before a run, in either format, and a file that is not
what it claims is refused in one line naming the file, the line (or item) and the field,
found by the bounds, not by reading whatever the file holds."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from workbench.engine.base.errors import ExperimentError
from workbench.engine.interop import conversation_file
from workbench.engine.interop.conversation_file import read_conversations
from workbench.engine.measure.conversations import RecordedConversation

SAMPLES = Path(__file__).parents[3] / "resources" / "conversations"
FAST_S = 5.0  # far above what a bounded refusal takes, far below reading what it refuses


def openai(*messages: tuple[str, str]) -> str:
    return json.dumps({"messages": [{"role": r, "content": c} for r, c in messages]})


def write(tmp_path: Path, *lines: str, name: str = "chats.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_the_shipped_sample_is_a_dozen_short_conversations_in_both_formats():
    sample = read_conversations(SAMPLES / "sample.jsonl")
    assert len(sample) == 12
    assert all(2 <= len(c.questions) <= 5 for c in sample)
    assert sample[0].system.startswith("You are a patient cooking assistant")
    assert sample[0].questions[0].startswith("I have eggs, spinach and some feta")
    assert sample[1].system == ""
    assert read_conversations(SAMPLES / "sample-sharegpt.json") == sample


def test_only_the_system_message_and_the_user_messages_are_kept(tmp_path):
    path = write(
        tmp_path,
        openai(("system", "Be brief."), ("user", "q1"), ("assistant", "a1"), ("user", "q2")),
        "",  # a blank line is no conversation
        openai(("user", "only")),
    )
    assert read_conversations(path) == (
        RecordedConversation("Be brief.", ("q1", "q2")),
        RecordedConversation("", ("only",)),
    )


def test_each_line_or_item_says_its_own_format(tmp_path):
    sharegpt = json.dumps(
        {
            "id": "x",
            "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "a"}],
        }
    )
    mixed = write(tmp_path, sharegpt, openai(("user", "q")))
    assert [c.questions for c in read_conversations(mixed)] == [("hi",), ("q",)]
    array = tmp_path / "chats.json"
    array.write_text(f"[{sharegpt}, {openai(('user', 'q'))}]")
    assert [c.questions for c in read_conversations(array)] == [("hi",), ("q",)]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"msgs": []}', r"chats\.jsonl:2: a conversation has either 'messages' \(OpenAI\) or"),
        (
            json.dumps(
                {
                    "messages": [{"role": "user", "content": "q"}],
                    "conversations": [{"from": "human", "value": "q"}],
                }
            ),
            r"chats\.jsonl:2: a conversation has either 'messages' \(OpenAI\) or "
            r"'conversations' \(ShareGPT\)$",  # the rule says it all: the table not echoed
        ),
        ("[1, 2]", r"chats\.jsonl:2: must be a table, got \[1, 2\]"),
        ("{not json", r"chats\.jsonl:2: not valid JSON"),
        ('{"messages": "hi"}', r"chats\.jsonl:2: messages must be a list, got 'hi'"),
        (
            openai(("tool", "x")),
            r"chats\.jsonl:2: messages\[0\]\.role must be 'system', 'user' or 'assistant', "
            r"got 'tool'",
        ),
        (
            '{"conversations": [{"from": "user", "value": "x"}]}',
            r"chats\.jsonl:2: conversations\[0\]\.from must be 'system', 'human' or 'gpt', "
            r"got 'user'",
        ),
        (
            '{"messages": [{"role": "user", "content": ["parts"]}]}',
            r"chats\.jsonl:2: messages\[0\]\.content must be text, got \['parts'\]",
        ),
        (
            '{"messages": [{"role": "user", "content": null}]}',
            r"chats\.jsonl:2: messages\[0\]\.content must be text, got None",
        ),
        (
            '{"messages": [{"role": "user"}]}',
            r"chats\.jsonl:2: messages\[0\]\.content is missing",
        ),
        (
            '{"conversations": [{"value": "x"}]}',
            r"chats\.jsonl:2: conversations\[0\]\.from is missing",
        ),
        (
            openai(("system", "s"), ("assistant", "a")),
            r"chats\.jsonl:2: messages has no user message, so nothing to send",
        ),
        (
            openai(("user", "q"), ("system", "s")),
            r"chats\.jsonl:2: messages has a system message at \[1\], after the first "
            r"\(a replay sends one\)$",
        ),
        (
            openai(*[("user", "q")] * 1001),
            r"chats\.jsonl:2: messages has 1,001 user messages, over the 1,000 a conversation",
        ),
        (
            openai(("user", "x" * (2**20 + 1))),
            r"chats\.jsonl:2: messages\[0\]\.content string should have at most 1048576 "
            r"characters",
        ),
    ],
)
def test_a_bad_conversation_names_its_line_and_field(tmp_path, line, message):
    path = write(tmp_path, openai(("user", "fine")), line)
    with pytest.raises(ExperimentError, match=message):
        read_conversations(path)


def test_a_bad_item_of_an_array_is_named_by_its_place(tmp_path):
    path = tmp_path / "chats.json"
    path.write_text(json.dumps([{"conversations": [{"from": "human", "value": "q"}]}, {"x": 1}]))
    with pytest.raises(ExperimentError, match=r"chats\.json:item 2: a conversation has either"):
        read_conversations(path)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("chats.jsonl", "\n\n", r"chats\.jsonl: no conversations in the file"),
        ("chats.json", "[]", r"chats\.json: no conversations in the file"),
        (
            "chats.json",
            '{"messages": []}',
            r"chats\.json: a \.json conversations file holds a JSON",
        ),
        ("chats.json", "[{", r"chats\.json: not valid JSON"),
    ],
)
def test_a_file_with_no_conversations_says_so(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ExperimentError, match=message):
        read_conversations(path)


def test_too_many_user_messages_in_the_file_is_refused_at_the_line_that_passes_the_bound(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(conversation_file, "MAX_USER_TURNS", 3)
    path = write(
        tmp_path, openai(("user", "a"), ("user", "b")), openai(("user", "c"), ("user", "d"))
    )
    with pytest.raises(ExperimentError, match=r"chats\.jsonl:2: over 3 user messages in the file"):
        read_conversations(path)


def test_a_line_more_than_the_most_conversations_is_refused(tmp_path):
    path = tmp_path / "chats.jsonl"
    path.write_text("\n" * (conversation_file.MAX_CONVERSATIONS + 1))
    with pytest.raises(ExperimentError, match=r"chats\.jsonl: over 100,000 lines"):
        read_conversations(path)


def test_a_billion_lines_are_refused_by_the_file_size_before_a_line_is_read(tmp_path):
    path = tmp_path / "chats.jsonl"
    with path.open("wb") as fh:  # sparse: as long as a billion newlines, written in no time
        fh.truncate(10**9)
    started = time.monotonic()
    with pytest.raises(ExperimentError, match=r"chats\.jsonl: 954 MiB, over the 128 MiB"):
        read_conversations(path)
    assert time.monotonic() - started < FAST_S


def test_a_line_of_100_mb_is_refused_after_the_line_bound_is_read(tmp_path):
    path = tmp_path / "chats.jsonl"
    with path.open("wb") as fh:  # sparse: one line of 100 MB with no newline
        fh.write(b'{"messages": [{"role": "user", "content": "')
        fh.truncate(100 * 10**6)
    started = time.monotonic()
    with pytest.raises(ExperimentError, match=r"chats\.jsonl:1: a line over 8,388,608 bytes"):
        read_conversations(path)
    assert time.monotonic() - started < FAST_S


@pytest.mark.parametrize("name", ["pipe.jsonl", "pipe.json"])
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    with pytest.raises(ExperimentError, match=rf"{name.replace('.', '[.]')}: not a file"):
        read_conversations(fifo)
