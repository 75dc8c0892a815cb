"""A server's own figures (``usage``, ``timings``) and ``finish_reason`` as the client keeps
them: numbers within bounds as they came, anything else as bounded text, never an error."""

from __future__ import annotations

import math

from workbench.engine.base.validation import MAX_NUMBER, adapter
from workbench.engine.measure.client import MAX_KEYS, FinishReason, numbers


def test_numbers_within_bounds_are_kept_anything_else_becomes_text() -> None:
    kept = numbers(
        {
            "n": 12,
            "ms": 4.5,
            "whole_float": 4.0,
            "none": None,
            "edge": MAX_NUMBER,
            "below": -MAX_NUMBER,
            "huge": 2**70,
            "nan": math.nan,
            "inf": -math.inf,
            "flag": True,
            "word": "fast",
            "long": "x" * 500,
            "list": [1, 2],
            "details": {"cached_tokens": 3, "odd": 10**13, "deeper": {"x": 1}, "no": False},
        }
    )
    assert kept == {
        "n": 12,
        "ms": 4.5,
        "whole_float": 4.0,
        "none": None,
        "edge": MAX_NUMBER,
        "below": -MAX_NUMBER,
        "huge": str(2**70),
        "nan": "NaN",
        "inf": "-Infinity",
        "flag": "true",
        "word": "fast",
        "long": "x" * 200,
        "list": "[1, 2]",
        "details": {"cached_tokens": 3, "odd": str(10**13), "deeper": '{"x": 1}', "no": "false"},
    }
    assert type(kept["n"]) is int and type(kept["whole_float"]) is float


def test_a_table_is_cut_to_its_bounds() -> None:
    wide = numbers({f"k{i}": i for i in range(MAX_KEYS + 10)})
    assert list(wide) == [f"k{i}" for i in range(MAX_KEYS)]
    nested = numbers({"d": {f"k{i}": i for i in range(MAX_KEYS + 10)}})
    assert len(nested["d"]) == MAX_KEYS
    assert [len(k) for k in numbers({"k" * 500: 1})] == [64]
    # Keys cut to the same text: the last value, in the first one's place, as a dict builds.
    assert numbers({"k" * 70 + "a": 1, "b": 2, "k" * 70 + "b": 3}) == {"k" * 64: 3, "b": 2}
    assert numbers({1: 2}) == {"1": 2}  # a key that is not text: its text


def test_a_finish_reason_is_a_short_printable_label() -> None:
    def label(value: object) -> str:
        return adapter(FinishReason).validate_python(value, strict=True)

    assert label("stop") == "stop"
    assert label("\x1b]8;;http://x\x07") == "\ufffd]8;;http://x\ufffd"  # a terminal link
    assert label({"reason": 1}) == '{"reason": 1}'
    assert label(["stop", 1]) == '["stop", 1]'
    assert label("s" * 100) == "s" * 64
