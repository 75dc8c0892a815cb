"""A small Server-Sent Events parser that survives UTF-8 split across network reads."""

from __future__ import annotations

import codecs
from dataclasses import dataclass


@dataclass(frozen=True)
class SSEEvent:
    event: str | None
    data: str


class SSEParser:
    """Feed raw bytes as they arrive; get back the events they complete."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._after_cr = False

    def feed(self, data: bytes) -> list[SSEEvent]:
        text = self._decoder.decode(data)
        # A CRLF split across two reads must not count as two line ends.
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
        if text:
            self._after_cr = text.endswith("\r")
        self._buffer += text
        return self._drain()

    def close(self) -> list[SSEEvent]:
        """Flush a final event that was not followed by a blank line."""
        self._buffer += self._decoder.decode(b"", final=True)
        if self._buffer.strip():
            self._buffer += "\n\n"
        return self._drain()

    @property
    def pending(self) -> str:
        return self._buffer

    def _drain(self) -> list[SSEEvent]:
        self._buffer = self._buffer.replace("\r\n", "\n").replace("\r", "\n")
        events = []
        while "\n\n" in self._buffer:
            block, self._buffer = self._buffer.split("\n\n", 1)
            event = _parse_block(block)
            if event is not None:
                events.append(event)
        return events


def _parse_block(block: str) -> SSEEvent | None:
    name: str | None = None
    data: list[str] = []
    for line in block.split("\n"):
        if not line or line.startswith(":"):
            continue
        key, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if key == "data":
            data.append(value)
        elif key == "event":
            name = value
        elif key == "error":
            # llama-server reports some streaming errors as an `error:` field.
            name, data = "error", [value]
    if not data and name is None:
        return None
    return SSEEvent(name, "\n".join(data))
