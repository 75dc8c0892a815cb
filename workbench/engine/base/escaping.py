"""Text from a server or a file, escaped for where it is shown: a terminal or a label, a
Markdown page, a spreadsheet. What reads an input checks it; this makes what is kept inert
where it is written out, so a name like ``<script>`` or ``=cmd()`` stays text.
"""

from __future__ import annotations

import re
from typing import Any

# C0 controls but tab and newline, DEL, C1 controls: what lets text move a terminal's cursor,
# clear its screen, set its title or plant a link (ESC sequences begin with one of them).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


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
