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
from typing import Any

MAX_KEYS = 64
MAX_TEXT = 200
MAX_NUMBER = 10**12  # far above any token count or duration in ms a real server reports


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
    return as_text(value, 64)
