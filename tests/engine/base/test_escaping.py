"""Text from a server or a file made inert where it is written out: a terminal, a Markdown
page, a spreadsheet."""

from __future__ import annotations

from workbench.engine.base.escaping import csv_cell, markdown, printable


def test_control_characters_show_as_text_instead_of_acting() -> None:
    assert printable("a\x1b[2Jb\tc\nd\x9b\x7f") == "a\ufffd[2Jb\tc\nd\ufffd\ufffd"
    assert printable("\x1b]8;;http://x\x07") == "\ufffd]8;;http://x\ufffd"  # a terminal link


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
