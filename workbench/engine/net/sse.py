"""A small Server-Sent Events parser that survives UTF-8 split across network reads.

It works line by line on what each read adds, so its time is linear in the bytes received
however long a line grows, and it refuses a line or an event past a bound: a server must not
be able to make the client hold or re-scan an endless line.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

MAX_LINE_CHARS = 1024 * 1024
MAX_EVENT_CHARS = 4 * 1024 * 1024
_LINE_END = re.compile(r"\r\n|\r|\n")


class SSEError(Exception):
    """A stream past the parser's bounds."""


@dataclass(frozen=True)
class SSEEvent:
    event: str | None
    data: str


class SSEParser:
    """Feed raw bytes as they arrive; get back the events they complete."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._line: list[str] = []  # the pieces of a line not ended yet
        self._line_chars = 0
        self._after_cr = False
        self._name: str | None = None
        self._data: list[str] = []
        self._event_chars = 0
        self._first = True

    def feed(self, data: bytes) -> list[SSEEvent]:
        return self._text(self._decoder.decode(data))

    def close(self) -> list[SSEEvent]:
        """Flush a final event that was not followed by a blank line."""
        events = self._text(self._decoder.decode(b"", final=True))
        if self._line:
            events += self._end_line()
        if self._data or self._name is not None:
            events += self._dispatch()
        return events

    @property
    def pending(self) -> str:
        """The line received so far and not ended."""
        return "".join(self._line)

    def _text(self, text: str) -> list[SSEEvent]:
        if self._first:
            self._first = not text
            text = text.removeprefix("\ufeff")  # a byte-order mark opens no field
        # A CRLF split across two reads must not count as two line ends.
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
            self._after_cr = False
        if text:
            self._after_cr = text.endswith("\r")
        events: list[SSEEvent] = []
        start = 0
        for end in _LINE_END.finditer(text):
            self._add(text[start : end.start()])
            events += self._end_line()
            start = end.end()
        self._add(text[start:])
        return events

    def _add(self, piece: str) -> None:
        if not piece:
            return
        self._line_chars += len(piece)
        if self._line_chars > MAX_LINE_CHARS:
            raise SSEError(f"malformed stream: a line longer than {MAX_LINE_CHARS} characters")
        self._line.append(piece)

    def _end_line(self) -> list[SSEEvent]:
        line = "".join(self._line)
        self._line, self._line_chars = [], 0
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return []
        key, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if key == "data":
            self._data.append(value)
            self._event_chars += len(value)
            if self._event_chars > MAX_EVENT_CHARS:
                raise SSEError(f"malformed stream: an event over {MAX_EVENT_CHARS} characters")
        elif key == "event":
            self._name = value
        elif key == "error":
            # llama-server reports some streaming errors as an `error:` field.
            self._name, self._data = "error", [value]
        return []

    def _dispatch(self) -> list[SSEEvent]:
        name, data = self._name, self._data
        self._name, self._data, self._event_chars = None, [], 0
        if not data and name is None:
            return []
        return [SSEEvent(name, "\n".join(data))]
