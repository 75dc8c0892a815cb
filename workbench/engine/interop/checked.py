"""Values read from another tool's result file, checked before they reach a session: a file
can come from anyone, so a wrong type or an absurd value is one clear error naming where it
is in the file, never a traceback or a stored NaN."""

from __future__ import annotations

import math
from typing import Any

from workbench.engine.base.errors import ImportFileError

MAX_REQUESTS = 100_000  # per run, as an experiment's ``requests``
MAX_CHUNKS = 1_000_000  # per request
MAX_TEXT = 1_000_000  # characters of one answer kept
MAX_SECONDS = 1e7  # a duration (115 days): beyond it a value is not a time but damage
MAX_CLOCK_S = 1e10  # a clock reading (seconds since any origin a tool uses, epoch included)


class Fields:
    """Checked reads from one file, each error prefixed by the file's name."""

    def __init__(self, file_name: str) -> None:
        self.file_name = file_name

    def error(self, where: str, problem: str) -> ImportFileError:
        return ImportFileError(f"{self.file_name}: {where} {problem}")

    def number(self, value: Any, where: str, *, optional: bool = True) -> float | None:
        """A finite number (an int or a float, never a bool), or None where allowed."""
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(where, f"should be a number, not {type(value).__name__}")
        if not math.isfinite(value):
            raise self.error(where, f"is {value}, not a finite number")
        return float(value)

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

    def count(self, value: Any, where: str) -> int | None:
        """A count of tokens or requests: a whole number, not negative (None: not given)."""
        number = self.number(value, where)
        if number is None:
            return None
        if number < 0 or number != int(number):
            raise self.error(where, f"is {value}, not a count")
        return int(number)

    def text(self, value: Any, where: str) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.error(where, f"should be text, not {type(value).__name__}")
        return value[:MAX_TEXT]

    def listed(self, value: Any, where: str, length: int | None = None) -> list[Any]:
        if not isinstance(value, list):
            raise self.error(where, f"should be a list, not {type(value).__name__}")
        if length is not None and len(value) != length:
            raise self.error(where, f"has {len(value)} entries for {length} requests")
        return value

    def gaps(self, value: Any, where: str) -> tuple[float, ...]:
        """Times between chunks, in seconds."""
        gaps = self.listed(value, where)
        if len(gaps) > MAX_CHUNKS:
            raise self.error(where, f"has {len(gaps)} chunks, over {MAX_CHUNKS:,}")
        return tuple(
            self.seconds(g, f"{where}[{k}]", optional=False) or 0.0 for k, g in enumerate(gaps)
        )

    def requests(self, n: int, where: str) -> int:
        if n > MAX_REQUESTS:
            raise self.error(where, f"has {n} requests, over the {MAX_REQUESTS:,} a run may hold")
        return n


def stated_figures(doc: dict[str, Any], names: set[str] | None = None) -> dict[str, float]:
    """The finite numbers among a document's top-level values (those in ``names`` only, if
    given): the figures a file states, kept under its own names."""
    return {
        str(key): float(value)
        for key, value in doc.items()
        if (names is None or key in names)
        and isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
    }
