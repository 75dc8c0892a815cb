"""The mock's token generator: how many tokens a request gets, when each is due, and the
chunks that carry them.

Deadlines are offsets from the moment the request took a slot (its arrival, unless it
waited in the queue): first chunk at ``ttft``, chunk k at ``ttft + k * itl``, never a chain
of sleeps, so lateness does not add up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.mock_server.framing import DONE, LAST_CHUNK, chunk, sse_event


@dataclass(frozen=True)
class Timing:
    """The schedule every request is streamed on."""

    ttft_ms: float = 100.0
    itl_ms: float = 20.0
    tokens: int = 64  # per request, unless the request's max_tokens is smaller
    tokens_per_chunk: int = 1
    slots: int = 256
    keep_alive: bool = True
    # A chat answer's first tokens are reasoning, streamed apart from the answer after them
    # (as a reasoning model's, within the same max_tokens): TTFO comes this many ITLs after
    # TTFT.
    reasoning_tokens: int = 0
    # A request that finds all ``slots`` busy waits for one, first come first served, as in
    # a real server's queue; without it, it streams at once beyond the slots.
    queue: bool = False

    def __post_init__(self) -> None:
        if self.ttft_ms < 0 or self.itl_ms < 0:
            raise ValueError("ttft_ms and itl_ms must be >= 0")
        if self.tokens < 1 or self.tokens_per_chunk < 1 or self.slots < 1:
            raise ValueError("tokens, tokens_per_chunk and slots must be >= 1")
        if self.reasoning_tokens < 0:
            raise ValueError("reasoning_tokens must be >= 0")

    def tokens_for(self, body: dict[str, Any]) -> int:
        """The tokens a request is answered with: ``tokens``, or its smaller ``max_tokens``."""
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, int) and 0 < max_tokens < self.tokens:
            return max_tokens
        return self.tokens

    def chunk_after(self, sent: int, tokens: int, reasoning: int) -> int:
        """How many tokens the chunk after ``sent`` of ``tokens`` carries: ``tokens_per_chunk``,
        fewer at the end, and none of the answer in a chunk of the ``reasoning`` first ones."""
        end = reasoning if sent < reasoning else tokens
        return min(self.tokens_per_chunk, end - sent)

    def due_s(self, sent: int, count: int) -> float:
        """When the chunk after ``sent`` tokens, carrying ``count``, is due, in seconds after
        the request took its slot: tokens come every ``itl_ms``, a chunk leaves when its
        last is ready."""
        return (self.ttft_ms + (sent + count - 1) * self.itl_ms) / 1000.0

    def predicted_ms(self, first_to_last_ns: int, tokens: int) -> float:
        """Decoding time as llama.cpp times it: from the first token to the last, the tokens
        the first chunk held back included."""
        return first_to_last_ns / 1e6 + (min(self.tokens_per_chunk, tokens) - 1) * self.itl_ms


@dataclass
class Served:
    """What the server did with one request, on its own clock. ``t_slot_ns``: when it took a
    slot and its schedule started (its arrival, unless it waited in the queue), so a test
    knows each request's true wait; None while it waits, and for good where it never took
    one (it went away while waiting, or the queue was full)."""

    prompt: str
    t_received_ns: int
    t_slot_ns: int | None = None
    sent_ns: list[int] = field(default_factory=list)  # one per text chunk

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "t_received_ns": self.t_received_ns,
            "t_slot_ns": self.t_slot_ns,
            "sent_ns": self.sent_ns,
        }


def prompt_tokens(body: dict[str, Any]) -> int:
    """A stand-in tokenizer: one token per four bytes of prompt, at least one."""
    if isinstance(body.get("messages"), list):
        text = "".join(
            m.get("content", "") for m in body["messages"] if isinstance(m.get("content"), str)
        )
    else:
        text = body.get("prompt") if isinstance(body.get("prompt"), str) else ""
    return max(1, len(text.encode()) // 4)


def prompt_text(body: dict[str, Any]) -> str:
    """The prompt a request is logged under: a chat's last message, or the prompt."""
    if isinstance(body.get("messages"), list) and body["messages"]:
        content = body["messages"][-1].get("content")
        return content if isinstance(content, str) else ""
    prompt = body.get("prompt")
    return prompt if isinstance(prompt, str) else ""


ANSWER = "content"  # a chat delta's answer field; the reasoning's is the server kind's


def _choice(chat: bool, text: str, finish: str | None, delta_field: str = ANSWER) -> dict[str, Any]:
    if chat:
        delta = {delta_field: text} if text else {}
        return {"index": 0, "delta": delta, "finish_reason": finish}
    return {"index": 0, "text": text, "finish_reason": finish}


class TokenChunks:
    """The chunks carrying tokens, each rendered once: 64 streams send the same few."""

    def __init__(self) -> None:
        self._chunks: dict[tuple[bool, int, int, str], bytes] = {}

    def carrying(self, chat: bool, first: int, count: int, delta_field: str = ANSWER) -> bytes:
        """The chunk carrying tokens ``first`` .. ``first + count - 1``, a chat's in its
        delta's ``delta_field`` (the answer's, or the reasoning's)."""
        key = (chat, first, count, delta_field)
        rendered = self._chunks.get(key)
        if rendered is None:
            text = "".join(f"t{first + i} " for i in range(count))
            rendered = chunk(sse_event({"choices": [_choice(chat, text, None, delta_field)]}))
            self._chunks[key] = rendered
        return rendered


def final_chunks(
    chat: bool,
    finish: str,
    n_prompt: int,
    tokens: int,
    timings: dict[str, Any] | None,
    reasoning_tokens: int | None = None,
) -> bytes:
    """A stream's end: the finish reason with ``usage`` (and llama.cpp's ``timings``; and
    ``completion_tokens_details.reasoning_tokens`` where the server kind counts them), then
    ``[DONE]`` and the end of the chunked body."""
    usage: dict[str, Any] = {
        "prompt_tokens": n_prompt,
        "completion_tokens": tokens,
        "total_tokens": n_prompt + tokens,
    }
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    final: dict[str, Any] = {"choices": [_choice(chat, "", finish)], "usage": usage}
    if timings is not None:
        final["timings"] = timings
    return chunk(sse_event(final)) + chunk(DONE) + LAST_CHUNK
