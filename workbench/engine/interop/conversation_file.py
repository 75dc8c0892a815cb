"""A conversations file, read whole and checked before a run starts: OpenAI messages as JSON
Lines (``{"messages": [{"role": ..., "content": ...}, ...]}`` a line) or ShareGPT
(``{"conversations": [{"from": ..., "value": ...}, ...]}`` a line, or a ``.json`` array of
such objects, as ShareGPT's own files are), told apart by each conversation's key.

Only what a replay sends is kept: each conversation's system message and its user messages
in order; the recorded answers are not kept, the server's own are sent back. Whatever the
file holds is untrusted: its size, its lines, the conversations, their turns and every
message's length are bounded, and each error names the file, the line (or the array's item)
and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench.engine.base.errors import ExperimentError, ImportFileError
from workbench.engine.interop.files import bounded_lines, read_json
from workbench.engine.measure.conversations import RecordedConversation

MAX_CONVERSATIONS = 100_000
MAX_USER_TURNS = 100_000  # a repeat's requests, as ``requests`` bounds them
MAX_TURNS_PER_CONVERSATION = 1000  # as ``turns`` bounds a made-up conversation's
MAX_MESSAGES_PER_CONVERSATION = 4 * MAX_TURNS_PER_CONVERSATION
MAX_LINE_BYTES = 8 * 2**20
MAX_MESSAGE_CHARS = 2**20

# Each format's conversation key, its messages' keys, and what each role name means here.
_FORMATS = {
    "messages": (
        "OpenAI",
        "role",
        "content",
        {"system": "system", "user": "user", "assistant": "assistant"},
    ),
    "conversations": (
        "ShareGPT",
        "from",
        "value",
        {"system": "system", "human": "user", "gpt": "assistant"},
    ),
}


def read_conversations(path: Path) -> tuple[RecordedConversation, ...]:
    """Every conversation of ``path`` in file order, or one ``ExperimentError`` naming the
    file, the line and the field (a ``.json`` file is one array, the rest JSON Lines)."""
    items = _array_items(path) if path.suffix.lower() == ".json" else _line_items(path)
    if not items:
        raise ExperimentError(f"{path.name}: no conversations in the file")
    conversations = []
    user_turns = 0
    for where, item in items:
        conversation = _conversation(f"{path.name}:{where}", item)
        user_turns += len(conversation.questions)
        if user_turns > MAX_USER_TURNS:
            raise ExperimentError(
                f"{path.name}:{where}: over {MAX_USER_TURNS:,} user messages in the file, "
                "the most a repeat sends"
            )
        conversations.append(conversation)
    return tuple(conversations)


def _line_items(path: Path) -> list[tuple[str, Any]]:
    """Each non-blank line's JSON, with its line number."""
    items = []
    lines = bounded_lines(path, ExperimentError, MAX_CONVERSATIONS, MAX_LINE_BYTES)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            items.append((str(number), json.loads(line)))
        except (ValueError, RecursionError) as exc:
            raise ExperimentError(f"{path.name}:{number}: not valid JSON ({exc})") from None
    return items


def _array_items(path: Path) -> list[tuple[str, Any]]:
    """A ``.json`` file's conversations, each named by its place in the array."""
    try:
        data = read_json(path)
    except ImportFileError as exc:
        raise ExperimentError(str(exc)) from None
    if not isinstance(data, list):
        raise ExperimentError(
            f"{path.name}: a .json conversations file holds a JSON array of conversations, "
            f"not {type(data).__name__}"
        )
    if len(data) > MAX_CONVERSATIONS:
        raise ExperimentError(
            f"{path.name}: over {MAX_CONVERSATIONS:,} conversations, the most it may hold"
        )
    return [(f"item {k}", item) for k, item in enumerate(data, 1)]


def _conversation(where: str, item: Any) -> RecordedConversation:
    if not isinstance(item, dict):
        raise ExperimentError(f"{where}: a conversation is a JSON object, not {_kind(item)}")
    keys = [key for key in _FORMATS if key in item]
    if len(keys) != 1:
        raise ExperimentError(
            f"{where}: a conversation has either 'messages' (OpenAI) or 'conversations' "
            f"(ShareGPT), found {'both' if keys else sorted(item)[:5] or 'no keys'}"
        )
    (key,) = keys
    name, role_key, content_key, roles = _FORMATS[key]
    messages = item[key]
    if not isinstance(messages, list):
        raise ExperimentError(f"{where}: {key}: a list of messages, not {_kind(messages)}")
    if len(messages) > MAX_MESSAGES_PER_CONVERSATION:
        raise ExperimentError(
            f"{where}: {key}: over {MAX_MESSAGES_PER_CONVERSATION:,} messages in a conversation"
        )
    system = ""
    questions: list[str] = []
    for k, message in enumerate(messages):
        field = f"{key}[{k}]"
        if not isinstance(message, dict):
            raise ExperimentError(f"{where}: {field}: a message is an object, not {_kind(message)}")
        for needed in (role_key, content_key):
            if needed not in message:
                raise ExperimentError(
                    f"{where}: {field}: no '{needed}' ({name} messages have "
                    f"'{role_key}' and '{content_key}')"
                )
        role = roles.get(message[role_key]) if isinstance(message[role_key], str) else None
        if role is None:
            raise ExperimentError(
                f"{where}: {field}.{role_key}: {message[role_key]!r:.60} is not one of "
                f"the {name} roles ({', '.join(roles)})"
            )
        content = message[content_key]
        if not isinstance(content, str):
            raise ExperimentError(f"{where}: {field}.{content_key}: a string, not {_kind(content)}")
        if len(content) > MAX_MESSAGE_CHARS:
            raise ExperimentError(
                f"{where}: {field}.{content_key}: over {MAX_MESSAGE_CHARS:,} characters"
            )
        if role == "system":
            if k:
                raise ExperimentError(
                    f"{where}: {field}: a system message after the first (a replay sends "
                    "one, first)"
                )
            system = content
        elif role == "user":
            questions.append(content)
    if not questions:
        raise ExperimentError(f"{where}: {key}: no user message, so nothing to send")
    if len(questions) > MAX_TURNS_PER_CONVERSATION:
        raise ExperimentError(
            f"{where}: {key}: over {MAX_TURNS_PER_CONVERSATION:,} user messages in a conversation"
        )
    return RecordedConversation(system, tuple(questions))


def _kind(value: Any) -> str:
    """A JSON value's kind, as an error says it."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")
