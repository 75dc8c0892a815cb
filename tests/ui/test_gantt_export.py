"""The queue Gantt exported headless: PNG and SVG of rows per request and of lanes per slot,
and a self-contained interactive HTML page whose data is the window's bars."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from tests.made_sessions import Config, build_session, burst, failed, startup_facts
from tests.ui.test_report import png_size
from workbench.cli.main import main
from workbench.engine.store import open_session
from workbench.ui.exports.gantt_export import drawn_views, session_model
from workbench.ui.exports.gantt_html import gantt_document, gantt_html
from workbench.ui.exports.report import ChartOptions
from workbench.ui.views.charts import export_widget

HOSTILE = "</script><script>alert(1)</script><b>"


def page_data(text: str) -> dict:
    found = re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S)
    assert found is not None
    return json.loads(found.group(1))


def test_the_gantt_exports_as_png_svg_and_one_html_page(sweep_session, tmp_path, capsys):
    out = tmp_path / "gantt"
    args = ["export", str(sweep_session), "--gantt", str(out), "--size", "640x400"]
    assert main([*args, "--dpi", "72"]) == 0
    said = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert "gantt.png, gantt.svg, gantt-slots.png, gantt-slots.svg, gantt.html" in said
    for stem in ("gantt", "gantt-slots"):
        assert png_size(out / f"{stem}.png") == (640, 400)
        assert ET.parse(out / f"{stem}.svg").getroot().tag.endswith("svg")
    page = (out / "gantt.html").read_text()
    assert "http" not in page.replace("http://www.w3.org/2000/svg", "")  # nothing to fetch
    data = page_data(page)
    assert data["rows"] == 6 and data["lanes"] == [
        "np=1 · slot 0",
        "np=2 · slot 0",
        "np=2 · slot 1",
    ]
    assert [label for _, label in data["marks"]] == ["np=1", "np=2"]
    assert data["title"].startswith("sweep · Made CPU 8-Core")


def test_the_pages_bars_are_the_windows_bars(sweep_session):
    """np=1's three requests sent at 2 s: the third waits 2.4 s, prefills 0.1 s, then
    decodes 11 tokens 0.1 s apart, in slot 0's lane."""
    with open_session(sweep_session) as session:
        model = session_model(session)
    document = gantt_document(model, "t")
    third = document["requests"][2]
    assert third["lane"] == 0
    assert [name for name, *_ in third["spans"]] == ["queued", "prefill", "decoding"]
    queued, prefill, decoding = third["spans"]
    t0 = queued[1]
    assert [round(v - t0, 3) for v in (queued[2], prefill[2], decoding[2])] == [2.4, 2.5, 3.6]
    assert "TTFT: 2.500 s" in third["tip"]


def bar_spans(bars) -> list[tuple[float, float]]:
    """(start, width) of each bar a ``BarGraphItem`` draws."""
    return list(zip(bars.opts["x0"], bars.opts["width"], strict=True))


def test_each_view_shows_its_whole_time_range_and_its_whole_legend(sweep_session, tmp_path, qtbot):
    """The lanes' names widen the left axis after the rows' numbers: the title held the
    plot about 50 px wider than the picture, np=2's bars ran off its right edge with the
    time axis, and the legend read "pre", "dec", "fail"."""
    with open_session(sweep_session) as session:
        model = session_model(session)
    size = ChartOptions()
    for stem, view in drawn_views(model, "sweep"):
        export_widget(view, tmp_path / f"{stem}.png", size.width, size.height, settle=True)
        picture = view.rect()
        plot = view.getPlotItem()
        assert plot.geometry().width() <= picture.width(), stem
        shown = plot.vb.sceneBoundingRect()
        assert shown.right() <= picture.right() + 1, stem
        ends = [x0 + w for bars in view.bars.values() for x0, w in bar_spans(bars)]
        assert max(ends) < plot.vb.viewRange()[0][1], stem  # the last bar ends in the view
        legend = plot.legend
        assert legend.isVisible(), stem  # once hidden with the window's prediction entry
        assert shown.contains(legend.sceneBoundingRect()), stem
        names = [label.text for _, label in legend.items]
        # The states' own names, as the window's legend gives them.
        assert names == (
            ["prefill", "decode", "failed"]
            if stem == "gantt-slots"
            else ["queued", "prefill", "decode", "failed"]
        )
        for _, label in legend.items:  # each name drawn whole, inside the legend's box
            assert legend.sceneBoundingRect().contains(label.sceneBoundingRect()), stem


def test_what_a_session_says_is_text_on_the_page(tmp_path):
    path = build_session(
        tmp_path / "hostile.session.sqlite",
        "[server]\nslots = 2\n[workload]\nrequests = 3\n",
        [
            Config(
                [
                    *burst(0, 2, slots=2, at_s=0.0),
                    failed(2, submit_s=0.0, done_s=0.1, error=HOSTILE),
                ],
                startup_facts(2, 4096),
            )
        ],
    )
    with open_session(path) as session:
        model = session_model(session)
    page = gantt_html(model, f"title {HOSTILE}", HOSTILE)
    assert HOSTILE not in page and "<script>alert" not in page
    assert page.count("</script>") == 2  # the data's own and the page's
    data = page_data(page)
    assert data["subtitle"] == HOSTILE  # intact, as text
    refused = data["requests"][2]
    assert refused["spans"][-1][0] == "failed" and HOSTILE in refused["tip"]


@pytest.mark.parametrize(
    ("bad", "said"),
    [("--format=gif", "--format takes")],  # --size: tests/cli/test_bad_input.py
)
def test_bad_gantt_options_are_clear_errors(sweep_session, tmp_path, capsys, bad, said):
    assert main(["export", str(sweep_session), "--gantt", str(tmp_path / "g"), bad]) == 1
    assert said in capsys.readouterr().err
    assert not (tmp_path / "g").exists()
