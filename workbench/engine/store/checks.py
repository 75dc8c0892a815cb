"""A session file can come from anyone: every value read from one is checked before use.

A value of the wrong type raises ``TypeError``, a JSON text that does not parse
``ValueError``; the reader turns either into one ``SessionError`` naming the file. Inside
the startup facts and the hardware fingerprint, which views show and summaries fall back
from, a wrong value reads as unknown instead, so one odd entry costs only itself.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from typing import Any, TypeVar

from workbench.engine.base.records import Hardware, StartupFacts

R = TypeVar("R")

INT_OR_NONE = (int, type(None))
TEXT_OR_NONE = (str, type(None))


def typed(value: Any, kinds: type | tuple[type, ...], what: str) -> Any:
    """``value`` if it has one of ``kinds`` (None passes where ``kinds`` has NoneType; a
    bool is no int here)."""
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise TypeError(f"{what} is a {type(value).__name__}")
    return value


def checked_values(row: Any) -> dict[str, Any]:
    """A stored row's values by column name, each of the kind its annotation names (``str``,
    ``int``, ``float``, or one of them or None; a bool is no number and a float must be
    finite): for a row whose every value is used as it is, such as the header's clock origin
    that every time is measured from."""
    hints = typing.get_type_hints(type(row))
    values = {}
    for f in dataclasses.fields(row):
        hint, value = hints[f.name], getattr(row, f.name)
        if not any(_is(value, kind) for kind in typing.get_args(hint) or (hint,)):
            raise TypeError(f"{f.name} is a {type(value).__name__}")
        values[f.name] = value
    return values


def json_dict(text: Any, what: str, optional: bool = True) -> dict[str, Any] | None:
    """A JSON object stored as text (None stays None where ``optional``)."""
    if text is None and optional:
        return None
    value = json.loads(typed(text, str, what))
    return typed(value, dict, what)


def json_strings(text: Any, what: str) -> list[str] | None:
    """A list of strings stored as JSON text (none when empty)."""
    value = json.loads(text) if text else None
    if value is not None and not (
        isinstance(value, list) and all(isinstance(a, str) for a in value)
    ):
        raise TypeError(f"{what} is not a list of strings")
    return value


def counters(text: Any) -> dict[str, float] | None:
    """Stored /metrics, kept only if it is what was written: names to numbers (anything
    else reads as not recorded, never as an error)."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return {
        str(k): float(v)
        for k, v in value.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


def startup_facts(stored: dict[str, Any]) -> StartupFacts:
    """Stored startup facts: a value of the wrong type reads as not stated (None), an
    unknown key is dropped."""
    return stored_record(StartupFacts, stored)


def fingerprint(stored: dict[str, Any]) -> Hardware:
    """A stored fingerprint: a value of the wrong type reads as not known (None), a GPU
    entry that is not an object is dropped, and so is an unknown key."""
    return stored_record(Hardware, stored)


def stored_record(cls: type[R], stored: dict[str, Any]) -> R:
    """A record of optional fields read back from its JSON, each field checked against the
    record's own annotation (so a field added to the record is checked with no change
    here): ``X | None`` keeps a value of kind X (a bool is no int, a float must be finite)
    else None; ``tuple[X, ...]`` keeps the entries of a list that are X, or, for a record
    X, the entries that are objects, each read the same way."""
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        hint, value = hints[f.name], stored.get(f.name)
        if typing.get_origin(hint) is tuple:
            (kind, _) = typing.get_args(hint)
            entries = value if isinstance(value, list) else []
            if dataclasses.is_dataclass(kind):
                values[f.name] = tuple(
                    stored_record(kind, e) for e in entries if isinstance(e, dict)
                )
            else:
                values[f.name] = tuple(e for e in entries if _is(e, kind))
        else:
            (kind,) = [a for a in typing.get_args(hint) if a is not type(None)]
            values[f.name] = value if _is(value, kind) else None
    return cls(**values)


def _is(value: Any, kind: type) -> bool:
    """Whether ``value`` is a ``kind``: a bool is no number, a number no bool, and a float
    (which also takes an int) must be finite."""
    if isinstance(value, bool) != (kind is bool):
        return False
    if kind is float:
        return isinstance(value, int | float) and math.isfinite(value)
    return isinstance(value, kind)
