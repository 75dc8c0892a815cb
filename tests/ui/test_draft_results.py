"""The window's results table gains the draft acceptance where a configuration drafted,
from the catalogue alone (as every optional figure)."""

from __future__ import annotations

from tests.engine.figures.test_speculative import write_drafted
from tests.made_sessions import write_session
from workbench.engine.figures.metrics import figure
from workbench.engine.store import open_session
from workbench.ui.views.results_view import ResultsView, two_lines


def test_the_results_table_shows_the_draft_acceptance_where_one_drafted(qtbot, tmp_path):
    with open_session(write_drafted(tmp_path / "d.sqlite")) as session:
        drafted = session.summaries()
    with open_session(write_session(tmp_path / "p.sqlite")) as session:
        plain = session.summaries()
    view = ResultsView()
    qtbot.addWidget(view)

    def headers() -> list[str]:
        return [view.table.horizontalHeaderItem(c).text() for c in range(view.table.columnCount())]

    header = two_lines(figure("spec_acceptance").header)
    view.sync(plain)
    assert header not in headers()
    view.sync(drafted)
    column = headers().index(header)
    assert [view.table.item(r, column).text() for r in range(2)] == ["-", "0.75"]
