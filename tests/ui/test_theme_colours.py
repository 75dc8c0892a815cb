"""Every colour the window draws comes from ``theme.json``: no module of the UI writes a colour
of its own, so one edit of the theme file changes it everywhere."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

import workbench.resources
import workbench.ui
from workbench.ui.exports.gantt_html import gantt_document
from workbench.ui.run_model import RunModel
from workbench.ui.theme import qt_theme
from workbench.ui.theme.palette import theme_data

UI = Path(workbench.ui.__file__).parent
HEX_COLOUR = re.compile(r"#(?:[0-9a-fA-F]{8}|[0-9a-fA-F]{6}|[0-9a-fA-F]{3})\b")


def hex_literals(source: str) -> list[str]:
    """The colours written in ``source``'s string literals (comments do not count)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [m for t in tokens if t.type == tokenize.STRING for m in HEX_COLOUR.findall(t.string)]


def test_the_finder_sees_a_colour_in_a_string_and_not_in_a_comment():
    assert hex_literals('RED = "#e5484d"  # #00ff00\nstyle = f"color:#abc;"\n') == [
        "#e5484d",
        "#abc",
    ]
    assert hex_literals('title = f"#{number}"\n') == []


def test_the_gantt_page_takes_its_colours_from_the_theme():
    """The exported Gantt page's own colours (its text, grid, tooltip) are the theme's too:
    the page's template names none."""
    page = (Path(workbench.resources.__file__).parent / "gantt.html").read_text("utf-8")
    assert HEX_COLOUR.findall(page) == []
    colours = gantt_document(RunModel(), "t")["page"]
    assert colours == theme_data()["gantt_page"]


def test_no_ui_module_writes_a_colour_of_its_own():
    written = {
        str(path.relative_to(UI)): found
        for path in sorted(UI.rglob("*.py"))
        if (found := hex_literals(path.read_text(encoding="utf-8")))
    }
    assert written == {}, "colours belong in workbench/resources/theme.json"


@pytest.fixture
def error_in_green(monkeypatch):
    """The theme file, its error colour changed: what follows it changes too."""
    data = {**theme_data(), "signals": {**theme_data()["signals"], "error": "#00ff00"}}
    monkeypatch.setattr(qt_theme, "theme_data", lambda: data)
    return "#00ff00"


def test_a_wrong_field_is_marked_in_the_themes_error_colour(window, qtbot, error_in_green):
    window.form.load_file("experiments/slots-1-2-4.toml")
    slots = window.form.fields[("server", "slots")]
    slots.setText("1, two")
    window.start_run()
    assert error_in_green in slots.styleSheet()
