"""Every file, message and flag that comes in is validated by pydantic; this is its one voice.

A pydantic model (strict, with ``Annotated`` constraints) declares what an input may hold;
``validated`` checks a value against it and turns the library's report into the one line a
user reads: where (the file, the table and field, the line), what is wrong, and the value cut
short, so a line never echoes the megabyte a file held.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic_core import ValidationError

from workbench.engine.base.errors import WorkbenchError

if TYPE_CHECKING:
    from pydantic import TypeAdapter

T = TypeVar("T")

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict = 3, 6, 6, 4
_SHORT.maxstring = _SHORT.maxother = 80
_SHORT.maxlong = 40

# The names pydantic gives a value's kind, in the words an error line uses.
_KINDS = {
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "string_type": "text",
    "bool_type": "true or false",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
    "dataclass_type": "a table",
}


MAX_SHOWN = 160  # characters of a value an error line shows, however it nests
MAX_TEXT = 200  # characters of a name or label an input gives that are kept
MAX_NUMBER = 10**12  # far above any token count or duration in ms a real input holds


def as_text(value: Any, limit: int = MAX_TEXT) -> str:
    """Any value as bounded text: JSON where it can be, else its repr. What an input sent
    that is not what it should be is kept this way where it must stay visible (a server's
    figure of 2**70) without ever being taken for one."""
    try:
        text = value if isinstance(value, str) else json.dumps(value, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text[:limit]


def shown(value: Any) -> str:
    """A value as an error line names it: its repr, cut short (a few items, a few levels,
    80 characters of text, ``MAX_SHOWN`` in all)."""
    text = _SHORT.repr(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def place(loc: Sequence[str | int]) -> str:
    """A location in an input as a user reads it: ``runs[2].ttft_ms``. A key that is not a
    name (the input's own, as an unknown field: a line break, a megabyte) is shown as a value
    is, in brackets: ``runs[0]['\\r']``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not part.isidentifier() or len(part) > 80:
            out += f"[{shown(part)}]"
        else:
            out += f".{part}" if out else part
    return out


def problem(error: ValidationError) -> str:
    """The first thing wrong, in one line without the input's name: ``field: what, got X``.

    The first error is enough: a user fixes one thing at a time, and a line naming fifty
    problems would be a screen."""
    first = error.errors(include_url=False)[0]
    # A tagged union's branch name ("requests", "function-after[...]") is pydantic's, not the
    # file's: only string keys that are the input's own are kept.
    loc = [p for p in first["loc"] if isinstance(p, int) or not _internal(p)]
    kind = _KINDS.get(first["type"])
    what = f"must be {kind}" if kind else _message(first)
    if first["type"] == "missing":
        return f"{place(loc)} is missing"
    if first["type"] == "extra_forbidden":  # its last part is the input's own key, whatever
        *inside, key = first["loc"]  # it looks like ("a[0]" included)
        kept = [p for p in inside if isinstance(p, int) or not _internal(p)]
        return f"{place([*kept, key])} is not a field here"
    if first["type"] in ("union_tag_invalid", "union_tag_not_found"):  # a tagged union's tag
        key = str(first["ctx"]["discriminator"]).strip("'")
        if first["type"] == "union_tag_not_found":
            return f"{place([*loc, key])} is missing"
        given = first["input"].get(key) if isinstance(first["input"], dict) else None
        return f"{place([*loc, key])} is not a kind known here, got {shown(given)}"
    where = place(loc)
    said = f"{where + ' ' if where else ''}{what}"
    return said if _said_in_full(first, what) else f"{said}, got {shown(first.get('input'))}"


def _said_in_full(error: Any, message: str) -> bool:
    """A custom rule's message (a validator's ``ValueError`` or ``assert``) that says what
    is wrong in its own words: the value after it would repeat what the message quotes, or
    echo the whole table or list the rule judged. A rule on one value that does not name it
    (``must be at least 0``) and the library's own constraints keep ", got"."""
    if error["type"] not in ("value_error", "assertion_error"):
        return False
    given = error.get("input")
    named = re.escape(shown(given))
    return isinstance(given, dict | list | tuple) or bool(
        re.search(rf"(?<![\w.]){named}(?![\w.])", message)
    )


def _internal(part: str) -> bool:
    return "[" in part or part.startswith(("function-", "constrained-"))


def _message(error: Any) -> str:
    message = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    message = message.replace("Input should be", "must be", 1)
    return message[:1].lower() + message[1:]


def validated(
    kind: Any,
    value: Any,
    where: str,
    error: Callable[[str], WorkbenchError] = WorkbenchError,
    *,
    strict: bool | None = True,
    json: bool = False,
) -> Any:
    """``value`` as ``kind`` (a model or any type pydantic knows), or ``error`` raised with
    ``where: the problem``. Strict by default: text is not a number, 1.0 is not a count.
    ``strict=None``: as each field declares, for records (dataclasses) read from a parsed
    document: strict pydantic takes a dataclass only as an instance, never as a table.

    ``json``: ``value`` is JSON text, parsed and checked in one pass as pydantic reads JSON:
    an object is a record (a dataclass too), an array a tuple, a word its enum member."""
    try:
        if json:
            return adapter(kind).validate_json(value, strict=strict)
        return adapter(kind).validate_python(value, strict=strict)
    except ValidationError as exc:
        raise error(f"{where}: {problem(exc)}") from None
    except RecursionError:
        raise error(f"{where}: nested too deeply to read") from None


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def adapter(kind: Any) -> TypeAdapter[Any]:
    """The one pydantic adapter of ``kind``, made when first asked for and kept."""
    made = _ADAPTERS.get(kind)
    if made is None:
        # Imported when first used: pydantic's schema builder is a tenth of a second to
        # import, which a command that validates nothing (``workbench --help``) never pays.
        from pydantic import TypeAdapter

        made = _ADAPTERS[kind] = TypeAdapter(kind)
    return made
