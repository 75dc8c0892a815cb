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

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from workbench.engine.base.errors import ExperimentError, ImportFileError
from workbench.engine.base.validation import validated
from workbench.engine.interop.files import bounded_lines, json_line, read_json
from workbench.engine.measure.conversations import RecordedConversation

MAX_CONVERSATIONS = 100_000
MAX_USER_TURNS = 100_000  # a repeat's requests, as ``requests`` bounds them
MAX_TURNS_PER_CONVERSATION = 1000  # as ``turns`` bounds a made-up conversation's
MAX_MESSAGES_PER_CONVERSATION = 4 * MAX_TURNS_PER_CONVERSATION
MAX_LINE_BYTES = 8 * 2**20
MAX_MESSAGE_CHARS = 2**20

Content = Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)]


class _Table(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True, defer_build=True)


class Message(_Table):
    """An OpenAI message."""

    role: Literal["system", "user", "assistant"]
    content: Content


class ShareGPTMessage(_Table):
    """A ShareGPT message: ``from`` (``human``, ``gpt``, ``system``) and its ``value``."""

    speaker: Literal["system", "human", "gpt"] = Field(alias="from")
    value: Content

    @property
    def role(self) -> str:
        return {"human": "user", "gpt": "assistant"}.get(self.speaker, self.speaker)

    @property
    def content(self) -> str:
        return self.value


def _turns(messages: list[Any]) -> list[Any]:
    """A conversation a replay can send: a system message only first, and 1 to
    ``MAX_TURNS_PER_CONVERSATION`` user messages."""
    roles = [m.role for m in messages]
    if "system" in roles[1:]:
        at = roles.index("system", 1)
        raise ValueError(f"has a system message at [{at}], after the first (a replay sends one)")
    users = roles.count("user")
    if not users:
        raise ValueError("has no user message, so nothing to send")
    if users > MAX_TURNS_PER_CONVERSATION:
        raise ValueError(
            f"has {users:,} user messages, over the {MAX_TURNS_PER_CONVERSATION:,} "
            "a conversation may hold"
        )
    return messages


Bounded = Field(max_length=MAX_MESSAGES_PER_CONVERSATION)


class Conversation(_Table):
    """One conversation, in either format: ``messages`` (OpenAI) or ``conversations``
    (ShareGPT)."""

    messages: Annotated[list[Message], Bounded, AfterValidator(_turns)] | None = None
    conversations: Annotated[list[ShareGPTMessage], Bounded, AfterValidator(_turns)] | None = None

    @model_validator(mode="after")
    def _one_format(self) -> Conversation:
        if (self.messages is None) == (self.conversations is None):
            raise ValueError(
                "a conversation has either 'messages' (OpenAI) or 'conversations' (ShareGPT)"
            )
        return self

    def recorded(self) -> RecordedConversation:
        """What a replay sends: the system message, and the user messages in order."""
        messages: list[Message] | list[ShareGPTMessage] = self.messages or self.conversations or []
        system = messages[0].content if messages[0].role == "system" else ""
        return RecordedConversation(system, tuple(m.content for m in messages if m.role == "user"))


def read_conversations(path: Path) -> tuple[RecordedConversation, ...]:
    """Every conversation of ``path`` in file order, or one ``ExperimentError`` naming the
    file, the line and the field (a ``.json`` file is one array, the rest JSON Lines)."""
    items = _array_items(path) if path.suffix.lower() == ".json" else _line_items(path)
    if not items:
        raise ExperimentError(f"{path.name}: no conversations in the file")
    conversations = []
    user_turns = 0
    for where, item in items:
        found = validated(Conversation, item, f"{path.name}:{where}", ExperimentError)
        conversation = found.recorded()
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
        if line.strip():
            items.append((str(number), json_line(line, f"{path.name}:{number}", ExperimentError)))
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
