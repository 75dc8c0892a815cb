"""Charts and reports: valid PNG/SVG/PDF files of the requested size, a report that embeds
them, headless."""

from __future__ import annotations

import struct
import xml.etree.ElementTree as ET

import pytest

from workbench.cli.main import main
from workbench.engine.store.session import open_session
from workbench.ui.report import ChartOptions, write_charts, write_report

pytestmark = pytest.mark.server


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_charts_in_every_format_at_the_requested_size(recorded_session, tmp_path, qapp):
    with open_session(recorded_session) as session:
        written = write_charts(
            [session], tmp_path, ChartOptions(900, 600, 120, ("png", "svg", "pdf"))
        )
    assert [t for t, _ in written] == [
        "Aggregate throughput",
        "TTFT p50",
        "TTFT max",
        "Per-request decode speed",
        "Queue wait p50",
    ]
    for _, png in written:
        assert png_size(png) == (900, 600)
        svg = ET.parse(png.with_suffix(".svg")).getroot()
        assert svg.tag.endswith("svg")
        pdf = png.with_suffix(".pdf").read_bytes()
        assert pdf.startswith(b"%PDF") and b"%%EOF" in pdf[-64:]


def test_a_comparison_report_headless(recorded_session, tmp_path, capsys):
    out = tmp_path / "report"
    args = [
        "compare",
        str(recorded_session),
        str(recorded_session),
        "--out",
        str(out),
        "--relative",
        "--size",
        "800x500",
    ]
    assert main(args) == 0
    report = (out / "report.md").read_text()
    assert "![Aggregate throughput](charts/agg_tok_s.png)" in report
    assert "| machine |" in report and "| llama.cpp |" in report
    html = (out / "report.html").read_text()
    assert "<img src='charts/agg_tok_s.png'" in html
    assert png_size(out / "charts" / "agg_tok_s.png") == (800, 500)
    assert (out / "comparison.csv").read_text().startswith("configuration,metric,")
    assert "## Verdicts" in report and "each of N explicit slots" in report
    import json

    document = json.loads((out / "comparison.json").read_text())
    assert document["relative"] is True and len(document["columns"]) == 2
    with open_session(recorded_session) as session:
        assert write_report([session], tmp_path / "single").name == "report.md"


def test_export_charts_of_one_session_and_bad_formats(recorded_session, tmp_path, capsys):
    charts = tmp_path / "charts"
    assert main(["export", str(recorded_session), "--charts", str(charts), "--format", "svg"]) == 0
    assert sorted(p.suffix for p in charts.iterdir()) == [".png"] * 5 + [".svg"] * 5
    assert main(["export", str(recorded_session), "--charts", str(charts), "--format", "gif"]) == 1
    assert "--format takes png, svg and/or pdf" in capsys.readouterr().err


def test_export_png_svg_pdf_each_to_its_folder(recorded_session, tmp_path, capsys):
    folders = {fmt: tmp_path / fmt for fmt in ("png", "svg", "pdf")}
    args = [arg for fmt, folder in folders.items() for arg in (f"--{fmt}", str(folder))]
    assert main(["export", str(recorded_session), *args, "--size", "800x500"]) == 0
    for fmt, folder in folders.items():
        files = sorted(folder.iterdir())
        assert len(files) == 5 and {p.suffix for p in files} == {f".{fmt}"}
        assert all(p.stat().st_size > 1000 for p in files)
    out = capsys.readouterr().out
    assert "wrote 5 PNG charts" in out and "wrote 5 SVG charts" in out and "5 PDF charts" in out
    assert main(["export", str(recorded_session)]) == 1
    assert "--png/--svg/--pdf DIR" in capsys.readouterr().err


def test_the_report_and_tables_say_which_numbers_to_doubt(tmp_path, qapp):
    """Chunks of four tokens from the mock: the decode cross-check fails, and the report,
    the terminal table and the CSV say so."""
    from rich.console import Console

    from tests.engine.measure.test_fidelity import Mock, external_run
    from workbench.cli.tables import results_table
    from workbench.engine.analysis.export import write_concurrency_csv

    server = Mock("--ttft-ms", "10", "--itl-ms", "5", "--tokens", "24", "--tokens-per-chunk", "4")
    try:
        result = external_run(server.url, tmp_path / "out", requests=2, tokens=24)
    finally:
        server.stop()
    with open_session(result.session_path) as session:
        report = write_report([session], tmp_path / "report").read_text()
        summaries = session.summaries()
    assert "## Can these numbers be trusted?" in report
    assert "external: cross-check: decode time" in report and "several tokens" in report
    console = Console(width=400, record=True)
    console.print(results_table(summaries))
    assert "[cross-check off]" in console.export_text()
    write_concurrency_csv(tmp_path / "c.csv", summaries)
    assert "decode time: client" in (tmp_path / "c.csv").read_text()


def test_session_strings_cannot_inject_html_markdown_or_formulas(tmp_path, qapp):
    """A session from someone else may carry ``<script>`` in its name and a formula in a
    label: the Markdown pages show them as text, and the CSV does not start a formula."""
    import contextlib
    import csv
    import sqlite3

    from tests.made_sessions import write_session
    from workbench.engine.analysis.export import write_concurrency_csv

    path = write_session(tmp_path / "made.session.sqlite")
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE session SET name = '<script>alert(1)</script>'")
        conn.execute("UPDATE configs SET label = '=HYPERLINK(\"x\")|np=1'")
    with open_session(path) as session:
        report = write_report([session], tmp_path / "report").read_text()
        write_concurrency_csv(tmp_path / "c.csv", session.summaries())
    assert "<script>" not in report and "&lt;script&gt;alert(1)&lt;/script&gt;" in report
    assert "=HYPERLINK(&quot;x&quot;)\\|np=1" in report  # a table cell, not two
    assert "<script>" not in (tmp_path / "report" / "comparison.md").read_text()
    with (tmp_path / "c.csv").open() as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["label"] == '\'=HYPERLINK("x")|np=1'
