"""Values read from another tool's result file, checked before they reach a session: a file
can come from anyone, so a wrong type or an absurd value is one clear error naming where it
is in the file, never a traceback or a stored NaN."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from workbench.engine.base.errors import ImportFileError
from workbench.engine.base.untrusted import MAX_NUMBER, MAX_TEXT

MAX_REQUESTS = 100_000  # per run, as an experiment's ``requests``
MAX_CHUNKS = 2_000_000  # in the whole file: each becomes a row (a 2 GB, 100 s write at 10 M)
MAX_ANSWER = 1_000_000  # characters of one answer kept
MAX_ERROR = 2_000  # characters of a request's error kept
MAX_FIGURES = 1_000  # figures a file states per run
MAX_PROBLEM = 300  # characters of a value quoted in an error
MAX_SECONDS = 1e7  # a duration (115 days): beyond it a value is not a time but damage
MAX_CLOCK_S = 1e10  # a clock reading (seconds since any origin a tool uses, epoch included)


class Fields:
    """Checked reads from one file, each error prefixed by the file's name."""

    def __init__(self, file_name: str) -> None:
        self.file_name = file_name
        self.chunks = 0  # chunk times read so far, against MAX_CHUNKS

    def error(self, where: str, problem: str) -> ImportFileError:
        if len(problem) > MAX_PROBLEM:
            problem = problem[:MAX_PROBLEM] + "…"
        return ImportFileError(f"{self.file_name}: {where} {problem}")

    def number(self, value: Any, where: str, *, optional: bool = True) -> float | None:
        """A finite number (an int or a float, never a bool), or None where allowed."""
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(where, f"should be a number, not {type(value).__name__}")
        try:
            number = float(value)
        except OverflowError:
            raise self.error(where, "is too large a number") from None
        if not math.isfinite(number):
            raise self.error(where, f"is {value}, not a finite number")
        return number

    def mapping(self, value: Any, where: str) -> dict[str, Any]:
        """An object (None reads as an empty one: the file does not say)."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(where, f"should be an object, not {type(value).__name__}")
        return value

    def seconds(self, value: Any, where: str, *, optional: bool = True) -> float | None:
        """A duration: a finite number, not negative, under ``MAX_SECONDS``."""
        seconds = self.number(value, where, optional=optional)
        if seconds is not None and seconds < 0:
            raise self.error(where, f"is {seconds}, a negative time")
        if seconds is not None and seconds > MAX_SECONDS:
            raise self.error(where, f"is {seconds:g} s, not a plausible duration")
        return seconds

    def clock(self, value: Any, where: str) -> float | None:
        """A moment on the tool's clock, in seconds (any origin)."""
        moment = self.number(value, where)
        if moment is not None and abs(moment) > MAX_CLOCK_S:
            raise self.error(where, f"is {moment:g} s, not a plausible clock reading")
        return moment

    def moment(self, value: Any, where: str, text_format: str | None = None) -> str | None:
        """When the file says its benchmark ran, as a session's ``created_at`` (ISO 8601, to
        the second): epoch seconds, ISO 8601 text, or text in ``text_format`` (strptime's).
        A time without a zone stays without one: the file does not say which it was."""
        if value is None:
            return None
        if isinstance(value, str):
            text = self.text(value, where)
            try:
                if text_format is not None:
                    when = datetime.strptime(text, text_format)
                else:
                    when = datetime.fromisoformat(text)
            except ValueError:
                raise self.error(where, f"is {text!r}, not a date") from None
        else:
            epoch = self.clock(value, where)
            if epoch is None or epoch < 0:
                raise self.error(where, f"is {value}, not a date")
            when = datetime.fromtimestamp(epoch, UTC)
        return when.isoformat(timespec="seconds")

    def count(self, value: Any, where: str) -> int | None:
        """A count of tokens or requests: a whole number, not negative (None: not given)."""
        number = self.number(value, where)
        if number is None:
            return None
        if number < 0 or number != int(number) or number > MAX_NUMBER:
            raise self.error(where, f"is {value}, not a count")
        return int(number)

    def text(self, value: Any, where: str, limit: int = MAX_TEXT) -> str:
        """Text, cut to ``limit`` characters (a name or a label; an answer is longer)."""
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.error(where, f"should be text, not {type(value).__name__}")
        return value[:limit]

    def listed(self, value: Any, where: str, length: int | None = None) -> list[Any]:
        if not isinstance(value, list):
            raise self.error(where, f"should be a list, not {type(value).__name__}")
        if length is not None and len(value) != length:
            raise self.error(where, f"has {len(value)} entries for {length} requests")
        return value

    def gaps(self, value: Any, where: str) -> tuple[float, ...]:
        """Times between chunks, in seconds."""
        gaps = self.listed(value, where)
        self.chunks += len(gaps)
        if self.chunks > MAX_CHUNKS:
            raise self.error(where, f"brings the file's chunks over {MAX_CHUNKS:,}")
        return tuple(
            self.seconds(g, f"{where}[{k}]", optional=False) or 0.0 for k, g in enumerate(gaps)
        )

    def requests(self, n: int, where: str) -> int:
        if n > MAX_REQUESTS:
            raise self.error(where, f"has {n} requests, over the {MAX_REQUESTS:,} a run may hold")
        return n


def figures(found: dict[str, Any]) -> dict[str, float]:
    """Figures a file states, kept under its own names: the finite numbers among ``found``,
    at most ``MAX_FIGURES`` of them, each name cut to ``MAX_TEXT`` characters."""
    kept: dict[str, float] = {}
    for key, value in found.items():
        if len(kept) >= MAX_FIGURES:
            break
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        try:
            number = float(value)
        except OverflowError:
            continue
        if math.isfinite(number) and abs(number) <= MAX_NUMBER:
            kept[str(key)[:MAX_TEXT]] = number
    return kept
