"""A session file can come from anyone: every value read from one is checked before use.

A value of the wrong type raises ``TypeError``, a JSON text that does not parse
``ValueError``; the reader turns either into one ``SessionError`` naming the file.
"""

from __future__ import annotations

import json
from typing import Any

INT_OR_NONE = (int, type(None))
TEXT_OR_NONE = (str, type(None))


def typed(value: Any, kinds: type | tuple[type, ...], what: str) -> Any:
    """``value`` if it has one of ``kinds`` (None passes where ``kinds`` has NoneType; a
    bool is no int here)."""
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise TypeError(f"{what} is a {type(value).__name__}")
    return value


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


def fingerprint(hw: dict[str, Any] | None) -> dict[str, Any]:
    """The fingerprint, with only GPU entries that are objects (views read their names)."""
    hw = dict(hw or {})
    gpus = hw.get("gpus")
    hw["gpus"] = [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []
    return hw
