"""Values a server sent, made safe to keep before anything stores or computes with them.

A server's ``usage``, ``timings`` and ``finish_reason`` reach the session file and the
analysis. One odd value (a count of 2**70, a list where a string belongs, a float that is not
finite) must neither stop the session writer nor turn into a figure: numbers outside sane
bounds are kept as text, so the raw value stays visible, and the analysis, which reads only
numbers, passes over them.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_KEYS = 64
MAX_TEXT = 200
MAX_NUMBER = 10**12  # far above any token count or duration in ms a real server reports
# C0 controls but tab and newline, DEL, C1 controls: what lets text move a terminal's cursor,
# clear its screen, set its title or plant a link (ESC sequences begin with one of them).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def as_text(value: Any, limit: int = MAX_TEXT) -> str:
    """Any value as bounded text: JSON where it can be, else its repr."""
    try:
        text = value if isinstance(value, str) else json.dumps(value, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text[:limit]


def _number(value: Any) -> int | float | str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return as_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return as_text(value)
    return value if abs(value) <= MAX_NUMBER else as_text(value)


def numbers(mapping: dict[str, Any]) -> dict[str, Any]:
    """A server's dict of figures (``usage``, ``timings``): numbers within bounds kept,
    anything else as bounded text; nested dicts (``prompt_tokens_details``) once more."""
    out: dict[str, Any] = {}
    for key, value in list(mapping.items())[:MAX_KEYS]:
        name = as_text(key, 64)
        if isinstance(value, dict):
            out[name] = {
                as_text(k, 64): _number(v) if not isinstance(v, dict) else as_text(v)
                for k, v in list(value.items())[:MAX_KEYS]
            }
        else:
            out[name] = _number(value)
    return out


def label(value: Any) -> str:
    """A short label such as ``finish_reason``: a string, else its text, 64 characters."""
    return printable(as_text(value, 64))


def printable(text: str) -> str:
    """Text a server sent, safe for a terminal or a label: control characters become
    U+FFFD, so an escape sequence shows as text instead of acting."""
    return _CONTROL.sub("\ufffd", text)


# What Markdown could read as other than text: a backslash (its escape), an HTML tag or
# entity, a table's cell border.
_MARKDOWN_SYNTAX = re.compile(r"[\\<&|]")


def markdown(text: str) -> str:
    """Text from a session for a generated Markdown page: on one line, with HTML and table
    syntax backslash-escaped, so a name like ``<script>`` or ``a | b`` stays text, and the
    page's source reads as written (``1->2 slots``, not an HTML entity). A ``>`` opening the
    text would open a quote: it is escaped too."""
    one_line = _MARKDOWN_SYNTAX.sub(r"\\\g<0>", printable(text).replace("\n", " "))
    return "\\" + one_line if one_line.startswith(">") else one_line


FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell that a spreadsheet will not run: text starting like a formula gets a
    leading apostrophe. Numbers (a negative one included) are left alone."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value
