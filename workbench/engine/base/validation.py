"""Every file, message and flag that comes in is validated by pydantic; this is its one voice.

A pydantic model (strict, with ``Annotated`` constraints) declares what an input may hold;
``validated`` checks a value against it and turns the library's report into the one line a
user reads: where (the file, the table and field, the line), what is wrong, and the value cut
short, so a line never echoes the megabyte a file held.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from workbench.engine.base.errors import WorkbenchError

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
}


def shown(value: Any) -> str:
    """A value as an error line names it: its repr, cut short (a few items, a few levels,
    80 characters of text)."""
    return _SHORT.repr(value)


def place(loc: Sequence[str | int]) -> str:
    """A location in an input as a user reads it: ``runs[2].ttft_ms``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
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
    if first["type"] == "extra_forbidden":
        return f"{place(loc)} is not a field here"
    where = place(loc)
    shown_input = shown(first.get("input"))
    return f"{where + ' ' if where else ''}{what}, got {shown_input}"


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
    strict: bool = True,
) -> Any:
    """``value`` as ``kind`` (a model or any type pydantic knows), or ``error`` raised with
    ``where: the problem``. Strict by default: text is not a number, 1.0 is not a count."""
    try:
        return _adapter(kind).validate_python(value, strict=strict)
    except ValidationError as exc:
        raise error(f"{where}: {problem(exc)}") from None
    except RecursionError:
        raise error(f"{where}: nested too deeply to read") from None


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(kind: Any) -> TypeAdapter[Any]:
    adapter = _ADAPTERS.get(kind)
    if adapter is None:
        adapter = _ADAPTERS[kind] = TypeAdapter(kind)
    return adapter
