"""The catalogue drives every view: a figure added to it reaches the window's results table,
the terminal's table, concurrency.csv and the report; the SLO tab shows the results table's
TTFT p50 when repeats differ."""

from __future__ import annotations

import csv

from rich.console import Console

from tests.made_sessions import server_of, workload_of, write_session
from workbench.cli.tables import results_table
from workbench.engine.analysis.export import write_concurrency_csv, write_json
from workbench.engine.analysis.slo import Slo, goodput
from workbench.engine.base.records import StartupFacts
from workbench.engine.figures import metrics
from workbench.engine.figures.metrics import Combine, Figure, View, figure
from workbench.engine.store import open_session
from workbench.ui.exports.report import ChartOptions, write_report
from workbench.ui.panels.slo_panel import SloPanel
from workbench.ui.views.results_view import ResultsView, two_lines

# A figure the analysis computes but no view showed before: one entry makes it appear.
E2E_P99 = Figure(
    "e2e_p99_s",
    "E2E latency p99",
    "E2E p99 s",
    "s",
    3,
    Combine.MEAN,
    "99th percentile over requests of E2E latency",
    views=frozenset(View),
)


def column_texts(table, header: str) -> list[str]:
    headers = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    column = headers.index(header)
    return [table.item(r, column).text() for r in range(table.rowCount())]


def test_a_figure_added_to_the_catalogue_reaches_every_view(qtbot, tmp_path, monkeypatch):
    # The catalogue's own E2E p99 is in no view: this one, in every view, replaces it.
    others = (f for f in metrics.FIGURES if f.key != E2E_P99.key)
    monkeypatch.setattr(metrics, "FIGURES", (*others, E2E_P99))
    with open_session(write_session(tmp_path / "made.session.sqlite")) as session:
        summaries = session.summaries()
        write_concurrency_csv(tmp_path / "concurrency.csv", summaries)
        write_json(tmp_path / "session.json", session)
        report = write_report([session], tmp_path / "report", ChartOptions(400, 300, 72))
    expected = E2E_P99.cell(summaries[0])
    # E2E is TTFT + 1 s: p99 of 1.1/1.2/1.3 s is 1.298 s, of 2/3/4 s 3.98 s; their mean.
    assert expected == "2.639"

    view = ResultsView()
    qtbot.addWidget(view)
    view.sync(summaries)
    assert column_texts(view.table, two_lines("E2E p99 s")) == [expected]
    tip = view.table.horizontalHeaderItem(view.table.columnCount() - 1).toolTip()
    assert "99th percentile over requests of E2E latency" in tip

    console = Console(width=400, record=True)
    console.print(results_table(summaries))
    text = console.export_text()
    label = summaries[0].label
    # The last of the terminal's tables, of the figures after the lab's and the settings.
    row_line = [line for line in text.splitlines() if line.startswith(f"│ {label} ")][-1]
    assert "E2E p99 s" in text and row_line.rstrip(" │").endswith(expected)

    with (tmp_path / "concurrency.csv").open() as fh:
        (row,) = list(csv.DictReader(fh))
    assert float(row["e2e_p99_s"]) == round(E2E_P99.of(summaries[0]), 4)
    assert '"e2e_p99_s"' in (tmp_path / "session.json").read_text()

    page = report.read_text()
    assert f"| {label} | E2E latency p99 (s) | {expected} |" in page
    assert "![E2E latency p99](charts/e2e_p99_s.png)" in page
    assert "- **E2E latency p99** (s; over repeats: mean of per-repeat values)" in page
    assert "E2E latency p99" in (tmp_path / "report" / "report.html").read_text()


def test_the_slo_tab_shows_the_results_tables_ttft_p50_with_repeats(qtbot, tmp_path):
    path = write_session(tmp_path / "made.session.sqlite")  # two repeats, medians 0.2 and 2.0
    slo = Slo(ttft_s=1.0)
    with open_session(path) as session:
        summaries = session.summaries()
        results = goodput(session, slo)
    view = ResultsView()
    panel = SloPanel()
    qtbot.addWidget(view)
    qtbot.addWidget(panel)
    view.sync(summaries)
    panel.show_result(results, summaries, slo)
    header = figure("ttft_p50_s").header
    assert column_texts(panel.table, header) == column_texts(view.table, two_lines(header))
    assert column_texts(panel.table, header) == ["1.100"]
    assert column_texts(panel.table, "why not") == ["TTFT p50 1.100 s > 1 s"]
    assert panel.chart.data.series[0].y == [summaries[0].mean["ttft_p50_s"]]


def test_a_client_limited_configuration_is_marked_in_the_results_table(qtbot):
    from workbench.engine.figures.client_limits import ClientLoad
    from workbench.engine.figures.per_run import RunObservations, summarize_run
    from workbench.engine.figures.summaries import summarize_config

    busy = summarize_run([], RunObservations(ClientLoad(1.0, 0.9, 0.95)))
    calm = summarize_run([], RunObservations(ClientLoad(1.0, 0.1, 0.2)))
    summaries = [
        summarize_config(
            i, f"np={i + 1}", server_of({"slots": i + 1}), workload_of({}), StartupFacts(), [run]
        )
        for i, run in enumerate((busy, calm))
    ]
    view = ResultsView()
    qtbot.addWidget(view)
    view.sync(summaries)
    labels = column_texts(view.table, "config")
    assert labels == ["np=1 \u26a0", "np=2"]
    marked = view.table.item(0, 0)
    assert "client-limited: measuring loop busy 90% of the run" in marked.toolTip()
    assert view.table.item(1, 0).toolTip() == ""


def test_server_text_in_a_tooltip_is_shown_not_rendered(qtbot):
    from workbench.engine.figures.summaries import summarize_config

    failed = summarize_config(
        0,
        "np=1",
        server_of({"slots": 1}),
        workload_of({}),
        StartupFacts(),
        [],
        status="failed",
        error="HTTP 500: <img src=x><b>",
    )
    view = ResultsView()
    qtbot.addWidget(view)
    view.sync([failed])
    tip = view.table.item(0, 0).toolTip()
    assert "&lt;img src=x&gt;&lt;b&gt;" in tip and "<img" not in tip


def test_the_result_charts_are_made_and_drawn_while_their_tab_shows(qtbot, tmp_path):
    """Most windows stay on the table and never draw a chart: the charts are built when
    their tab is first opened, and drawn while it shows."""
    with open_session(write_session(tmp_path / "made.session.sqlite")) as session:
        summaries = session.summaries()
    view = ResultsView()
    qtbot.addWidget(view)
    view.show()
    view.sync([])
    assert view.charts == {}
    view.tabs.setCurrentIndex(1)  # the Charts tab, before any results: empty charts
    assert set(view.charts) == {f.key for f in view.live_charts}
    assert all(chart.point_count() == 0 for chart in view.charts.values())
    view.sync(summaries)  # shown: drawn at once
    assert all(chart.point_count() == 1 for chart in view.charts.values())
    fresh = ResultsView()
    qtbot.addWidget(fresh)
    fresh.show()
    fresh.sync(summaries)
    assert fresh.charts == {} and fresh.table.rowCount() == 1  # on the table: none drawn
    fresh.tabs.setCurrentIndex(1)
    assert all(chart.point_count() == 1 for chart in fresh.charts.values())


def test_the_results_table_gains_the_optional_columns_a_session_has(qtbot, tmp_path):
    """A plain burst shows the lab's columns alone; a conversations session the conversation
    figures too, and a plain one after it drops them again."""
    from tests.made_sessions import write_conversations

    with open_session(write_conversations(tmp_path / "c.sqlite")) as session:
        conversations = session.summaries()
    with open_session(write_session(tmp_path / "p.sqlite")) as session:
        plain = session.summaries()
    view = ResultsView()
    qtbot.addWidget(view)
    headers = lambda: [  # noqa: E731
        view.table.horizontalHeaderItem(c).text() for c in range(view.table.columnCount())
    ]
    lab = headers()
    view.sync(conversations)
    added = [h for h in headers() if h not in lab]
    later = two_lines(figure("later_cache_share").header)
    assert later in added and view.table.rowCount() == 2
    assert column_texts(view.table, later)[0] != column_texts(view.table, later)[1]
    view.sync(plain)
    assert headers() == lab and view.table.rowCount() == len(plain)
