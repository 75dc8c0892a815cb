"""Values a server or a file sent: numbers kept only within bounds, text made inert for a
terminal, a Markdown page and a spreadsheet."""

from __future__ import annotations

import math

from workbench.engine.base.untrusted import (
    MAX_KEYS,
    MAX_NUMBER,
    MAX_TEXT,
    as_text,
    csv_cell,
    label,
    markdown,
    numbers,
    printable,
)


def test_numbers_within_bounds_are_kept_anything_else_becomes_text() -> None:
    kept = numbers(
        {
            "n": 12,
            "ms": 4.5,
            "none": None,
            "edge": MAX_NUMBER,
            "huge": 2**70,
            "nan": math.nan,
            "inf": -math.inf,
            "flag": True,
            "list": [1, 2],
            "details": {"cached_tokens": 3, "odd": 10**13, "deeper": {"x": 1}},
        }
    )
    assert kept == {
        "n": 12,
        "ms": 4.5,
        "none": None,
        "edge": MAX_NUMBER,
        "huge": str(2**70),
        "nan": "NaN",
        "inf": "-Infinity",
        "flag": "true",
        "list": "[1, 2]",
        "details": {"cached_tokens": 3, "odd": str(10**13), "deeper": '{"x": 1}'},
    }


def test_a_mapping_is_cut_to_its_bounds() -> None:
    wide = numbers({f"k{i}": i for i in range(MAX_KEYS + 10)})
    assert len(wide) == MAX_KEYS
    long_key = numbers({"k" * 500: 1})
    assert [len(k) for k in long_key] == [64]


def test_as_text_is_bounded_and_never_raises() -> None:
    assert as_text("x" * 1000) == "x" * MAX_TEXT
    assert as_text({"a": 1}) == '{"a": 1}'
    loop: list = []
    loop.append(loop)
    assert as_text(loop) == "[[...]]"  # JSON cannot: its repr


def test_control_characters_show_as_text_instead_of_acting() -> None:
    assert printable("a\x1b[2Jb\tc\nd\x9b\x7f") == "a\ufffd[2Jb\tc\nd\ufffd\ufffd"
    assert label("\x1b]8;;http://x\x07") == "\ufffd]8;;http://x\ufffd"  # a terminal link
    assert label({"reason": 1}) == '{"reason": 1}'
    assert len(label("s" * 100)) == 64


def test_markdown_text_stays_text_on_one_line() -> None:
    assert markdown("<script>a | b</script>\nnext") == "\\<script>a \\| b\\</script> next"
    assert markdown("&lt; \\") == "\\&lt; \\\\"  # an entity, a backslash: as written
    assert markdown("> quoted") == "\\> quoted"


def test_markdown_source_reads_as_written() -> None:
    """A report's Markdown is read as text too: an arrow stays an arrow, not ``-&gt;``."""
    assert markdown("1->2 slots: 3.0 -> 5.0 tok/s") == "1->2 slots: 3.0 -> 5.0 tok/s"


def test_a_csv_cell_that_looks_like_a_formula_is_quoted_numbers_are_not() -> None:
    for text in ("=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"):
        assert csv_cell(text) == "'" + text
    assert csv_cell("ok") == "ok" and csv_cell(-1) == -1 and csv_cell(None) is None
