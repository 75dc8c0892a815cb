"""The conversations file reader fed conversations of any values, the shipped samples (OpenAI
messages as JSON Lines, ShareGPT as a JSON array) changed in a few places, and their bytes
changed: the conversations are read or the file refused in one line naming the file and the
line (or the array's item), never a traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tests.fuzz.json_documents import JSON, NEAR, NESTED, dumped, mutated, mutated_bytes
from workbench.engine.base.errors import ExperimentError
from workbench.engine.interop.conversation_file import read_conversations
from workbench.engine.measure.conversations import RecordedConversation

SAMPLES = Path(__file__).parents[2] / "resources" / "conversations"
LINES = (SAMPLES / "sample.jsonl").read_text()
ARRAY = (SAMPLES / "sample-sharegpt.json").read_text()
OPENAI = [json.loads(line) for line in LINES.splitlines() if line.strip()]
SHAREGPT = json.loads(ARRAY)
# file:line:, file:item k: (the conversation), or file: (the file as a whole)
NAMED = re.compile(r"chats\.jsonl?(:(\d+|item \d+))?: ")

VALUES = JSON | NEAR
MESSAGE = st.dictionaries(
    st.sampled_from(["role", "content", "from", "value", "name"]),
    st.sampled_from(["system", "user", "assistant", "human", "gpt"]) | VALUES,
)
CONVERSATION = st.dictionaries(
    st.sampled_from(["messages", "conversations", "id"]),
    st.lists(MESSAGE | VALUES, max_size=4) | VALUES,
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("conversations")


def read(path: Path) -> tuple[RecordedConversation, ...] | None:
    """The conversations of ``path``; None where the file is refused, in one line naming
    it."""
    try:
        found = read_conversations(path)
    except ExperimentError as exc:
        line = str(exc)
        assert "\n" not in line and "\r" not in line and len(line) < 500, line
        assert NAMED.match(line), line
        return None
    assert found and all(c.questions for c in found)
    return found


def written(folder: Path, conversations: object, array: bool) -> Path:
    """As a ``.json`` array, or one a line (not a list: one line of it)."""
    if array:
        path = folder / "chats.json"
        path.write_text(dumped(conversations))
        return path
    path = folder / "chats.jsonl"
    lines = conversations if isinstance(conversations, list) else [conversations]
    path.write_text("".join(dumped(c) + "\n" for c in lines))
    return path


def test_the_samples_read(folder):
    assert read(written(folder, OPENAI, array=False)) == read(written(folder, SHAREGPT, True))


@given(st.lists(CONVERSATION | VALUES, max_size=4), st.booleans())
def test_conversations_of_any_values_are_read_or_refused_in_one_line(folder, found, array):
    event("read" if read(written(folder, found, array)) else "refused")


@given(mutated(OPENAI), st.booleans())
def test_a_changed_openai_file_is_read_or_refused_in_one_line(folder, found, array):
    event("read" if read(written(folder, found, array)) else "refused")


@given(mutated(SHAREGPT), st.booleans())
def test_a_changed_sharegpt_file_is_read_or_refused_in_one_line(folder, found, array):
    event("read" if read(written(folder, found, array)) else "refused")


@given(mutated_bytes(LINES) | mutated_bytes(ARRAY), st.booleans())
def test_a_file_with_changed_bytes_is_read_or_refused_in_one_line(folder, data, array):
    path = folder / ("chats.json" if array else "chats.jsonl")
    path.write_bytes(data)
    event("read" if read(path) else "refused")


@given(NESTED, st.booleans())
def test_a_file_nested_deep_is_refused_in_one_line(folder, text, array):
    path = folder / ("chats.json" if array else "chats.jsonl")
    path.write_text(text)
    assert read(path) is None
