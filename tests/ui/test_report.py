"""Charts and reports: valid PNG/SVG/PDF files of the requested size, a report that embeds
them, headless."""

from __future__ import annotations

import contextlib
import csv
import sqlite3
import struct
import xml.etree.ElementTree as ET

from markdown_it import MarkdownIt
from PySide6.QtWidgets import QApplication

from tests.made_sessions import Config, build_session, request, startup_facts, write_session
from workbench.cli.main import main
from workbench.engine.base.records import StartupFacts
from workbench.engine.store import open_session
from workbench.ui.exports.report import ChartOptions, write_charts, write_report

SMALL = ChartOptions(400, 250, 72)  # where the charts' size is not the point


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_charts_in_every_format_at_the_requested_size(sweep_session, tmp_path, qapp):
    with open_session(sweep_session) as session:
        written = write_charts(
            [session], tmp_path, ChartOptions(480, 320, 96, ("png", "svg", "pdf"))
        )
    assert [t for t, _ in written] == [
        "Aggregate throughput",
        "TTFT p50",
        "TTFT max",
        "Per-request decode speed",
        "Prefill speed",
        "Queue wait p50",
        "Aggregate throughput vs TTFT p50",
        "TTFT distribution",
    ]
    for _, png in written:
        assert png_size(png) == (480, 320)
        svg = ET.parse(png.with_suffix(".svg")).getroot()
        assert svg.tag.endswith("svg")
        pdf = png.with_suffix(".pdf").read_bytes()
        assert pdf.startswith(b"%PDF") and b"%%EOF" in pdf[-64:]


def test_a_comparison_report_headless(sweep_session, tmp_path, capsys):
    out = tmp_path / "report"
    args = [
        "compare",
        str(sweep_session),
        str(sweep_session),
        "--out",
        str(out),
        "--relative",
        "--size",
        "400x250",
    ]
    before = len(QApplication.topLevelWidgets())
    assert main(args) == 0
    # No event loop ran: the charts were deleted all the same, each with pyqtgraph's menus.
    assert len(QApplication.topLevelWidgets()) == before
    report = (out / "report.md").read_text()
    assert "![Aggregate throughput](charts/agg_tok_s.png)" in report
    assert "| machine | Made CPU 8-Core |" in report
    assert "| llama.cpp | version: 6123 (abc1234); built with cc 12.2.0 |" in report
    assert "| np=2 | Aggregate throughput (x of 1 slot) | 1.22 | 1.22 |" in report  # 12.2 / 10
    html = (out / "report.html").read_text()
    assert "<img src='charts/agg_tok_s.png'" in html
    assert png_size(out / "charts" / "agg_tok_s.png") == (400, 250)
    assert (out / "comparison.csv").read_text().startswith("configuration,metric,")
    verdicts = report[report.index("## Verdicts") : report.index("## Sessions")]
    assert verdicts.count("- **supported**: each of N explicit slots") == 2
    assert "  - -np 2 -c 2048: n_ctx_slot 1024 (ctx/N = 1024)" in verdicts
    assert "  - 2 slots: 8.0 tok/s per request" in verdicts  # decode falls from 10.0
    assert "- every configuration: dispatch delay p99 within 5 ms" in report
    import json

    document = json.loads((out / "comparison.json").read_text())
    assert document["relative"] is True and len(document["columns"]) == 2
    assert document["rows"][1]["key"] == "agg_tok_s"
    with open_session(sweep_session) as session:
        assert write_report([session], tmp_path / "single", SMALL).name == "report.md"


def test_export_charts_of_one_session_and_bad_formats(sweep_session, tmp_path, capsys):
    export = ["export", str(sweep_session), "--charts", str(tmp_path / "charts")]
    assert main([*export, "--format", "pdf", "--size", "400x250", "--dpi", "72"]) == 0
    charts = tmp_path / "charts"
    assert sorted(p.suffix for p in charts.iterdir()) == [".pdf"] * 8 + [".png"] * 8
    assert png_size(charts / "agg_tok_s.png") == (400, 250)
    assert main([*export, "--format", "gif"]) == 1
    assert "--format takes png, svg, pdf, vllm-json and/or perfetto" in capsys.readouterr().err


def test_export_png_svg_pdf_each_to_its_folder(sweep_session, tmp_path, capsys):
    folders = {fmt: tmp_path / fmt for fmt in ("png", "svg", "pdf")}
    args = [arg for fmt, folder in folders.items() for arg in (f"--{fmt}", str(folder))]
    assert main(["export", str(sweep_session), *args, "--size", "400x250", "--dpi", "72"]) == 0
    for fmt, folder in folders.items():
        files = sorted(folder.iterdir())
        assert len(files) == 8 and {p.suffix for p in files} == {f".{fmt}"}
        assert all(p.stat().st_size > 1000 for p in files)
    out = capsys.readouterr().out
    assert "wrote 8 PNG charts" in out and "wrote 8 SVG charts" in out and "8 PDF charts" in out
    assert main(["export", str(sweep_session)]) == 1
    assert "--png/--svg/--pdf DIR" in capsys.readouterr().err


def test_the_report_and_tables_say_which_numbers_to_doubt(tmp_path, qapp):
    """An external server sends four tokens per chunk, a token every 5 ms: the client sees
    5 gaps of 20 ms per request where the server timed 23 of 5 ms, and the client's loop was
    busy 90 % of the run. The decode cross-check fails, the client was the limit, and the
    report, the terminal table and the CSV say so."""
    from rich.console import Console

    from workbench.cli.tables import results_table
    from workbench.engine.analysis.export import write_concurrency_csv

    timing = {"tokens": 24, "ttft_s": 0.01, "itl_s": 0.005, "per_chunk": 4, "slot": None}
    path = build_session(
        tmp_path / "chunky.session.sqlite",
        'name = "checks"\n[workload]\nrequests = 2\nmax_tokens = 24\n',
        [
            Config(
                [request(0, **timing), request(1, submit_s=0.2, **timing)],
                StartupFacts(),
                loop_busy=0.9,
            )
        ],
        base_url="http://127.0.0.1:8000",
    )
    with open_session(path) as session:
        report = write_report([session], tmp_path / "report", SMALL).read_text()
        summaries = session.summaries()
    check = (
        "decode time: client 200 ms, server 230 ms (-13.0 %): the client saw the tokens over "
        "less time than the server made them: chunks carrying several tokens (speculative "
        "decoding, a proxy), or a server timer that leaves part of the generation out"
    )
    trust = report[report.index("## Can these numbers be trusted?") : report.index("## Verdicts")]
    assert trust.splitlines()[4:6] == [
        "- external: client-limited: measuring loop busy 90% of the run",
        f"- external: cross-check: {check}",
    ]
    console = Console(width=400, record=True)
    console.print(results_table(summaries))
    assert "│ external [client-limited] [cross-check off] │" in console.export_text()
    write_concurrency_csv(tmp_path / "c.csv", summaries)
    with (tmp_path / "c.csv").open() as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["cross_check_failures"] == check
    assert row["client_limited"] == "measuring loop busy 90% of the run"


def test_session_strings_cannot_inject_html_markdown_or_formulas(tmp_path, qapp):
    """A session from someone else may carry ``<script>`` in its name and a formula in a
    label: the Markdown pages show them as text, and the CSV does not start a formula."""
    import contextlib
    import csv
    import sqlite3

    from workbench.engine.analysis.export import write_concurrency_csv

    path = write_session(tmp_path / "made.session.sqlite")
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE session SET name = '<script>alert(1)</script>'")
        conn.execute("UPDATE configs SET label = '=HYPERLINK(\"x\")|np=1'")
    with open_session(path) as session:
        report = write_report([session], tmp_path / "report", SMALL).read_text()
        write_concurrency_csv(tmp_path / "c.csv", session.summaries())
    assert "<script>" not in report.replace("\\<", "") and "\\<script>alert(1)\\</script>" in report
    assert '=HYPERLINK("x")\\|np=1' in report  # a table cell, not two
    comparison = (tmp_path / "report" / "comparison.md").read_text()
    assert "<script>" not in MarkdownIt("commonmark").enable("table").render(comparison)
    with (tmp_path / "c.csv").open() as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["label"] == '\'=HYPERLINK("x")|np=1'


def test_an_export_from_the_window_leaves_the_windows_colours(sweep_session, tmp_path, qapp):
    """Charts are drawn on white, but the running app keeps its dark theme and plot colours."""
    import pyqtgraph as pg
    from PySide6.QtGui import QImage, QPalette

    from workbench.ui.theme.qt_theme import apply_theme

    apply_theme(qapp, "dark")
    window_color = qapp.palette().color(QPalette.ColorRole.Window)
    background = pg.getConfigOption("background")
    with open_session(sweep_session) as session:
        ((_, png), *_) = write_charts([session], tmp_path, SMALL)
    assert QImage(str(png)).pixelColor(2, 2).name() == "#ffffff"
    assert qapp.palette().color(QPalette.ColorRole.Window) == window_color
    assert pg.getConfigOption("background") == background


def test_the_sessions_table_says_what_ran_and_the_markdown_reads_as_written(tmp_path, qapp):
    """The model by its file's name, what was left to the server said so (and what the
    server stated), concurrency as the requests went: never ``None``, ``0`` or ``default``;
    a verdict's ``1->2 slots`` stays an arrow in the page's source, and CommonMark still
    renders a session's ``<script>`` as text."""
    toml = "[server]\nslots = [1, 2, 4]\n[workload]\nrequests = 4\n"
    configs = [
        Config([request(i, ttft_s=0.1 * (i + 1)) for i in range(4)], startup_facts(n, 8192))
        for n in (1, 2, 4)
    ]
    path = build_session(tmp_path / "s.session.sqlite", toml, configs)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE session SET name = '<script>alert(1)</script>'")
    with open_session(path) as session:
        report = write_report([session], tmp_path / "report", SMALL).read_text()
    table = report[report.index("## Sessions") :]
    for row in (
        "| model | SmolLM2-135M-Instruct.Q4_1 (default) |",
        "| kv_unified | off (the server's default) |",
        "| threads | server default |",
        "| concurrency | 4 (all at once) |",
        "| requests | 4 |",
    ):
        assert row in table
    assert "None" not in table and "| model | default |" not in table
    assert "1->2 slots" in report and "&gt;" not in report
    page = MarkdownIt("commonmark").enable("table").render(report)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
