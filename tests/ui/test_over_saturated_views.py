"""An over-saturated configuration is said where a configuration's trust notes are: the
window's results table (the mark and its tooltip), the terminal's table, the report's trust
lines; and a calm one beside it is not."""

from __future__ import annotations

from rich.console import Console

from tests.engine.figures.test_saturation import served
from tests.made_sessions import Config, build_session
from workbench.cli.tables import results_table
from workbench.engine.store import open_session
from workbench.ui.exports.report import trust_lines
from workbench.ui.views.results_view import TRUST_MARK, ResultsView

# 2 then 5 requests a second for 20 s at a server that answers 4 a second (``served``).
TOML = """name = "load"
zip = ["workload.rate", "workload.requests"]
[workload]
arrival = "poisson"
rate = [2.0, 5.0]
requests = [40, 100]
warmup = 0
"""


def test_an_over_saturated_configuration_is_marked_where_trust_notes_are(qtbot, tmp_path):
    calm, overloaded = served([i / 2 for i in range(40)]), served([i / 5 for i in range(100)])
    path = build_session(tmp_path / "load.session.sqlite", TOML, [Config(calm), Config(overloaded)])
    with open_session(path) as session:
        summaries = session.summaries()
        lines = trust_lines(session)
    assert [bool(s.over_saturated) for s in summaries] == [False, True]
    (line,) = lines
    assert line.startswith("requests=100 rate=5.0: over-saturated: the queue grew 1.0")
    view = ResultsView()
    qtbot.addWidget(view)
    view.sync(summaries)
    assert view.table.item(0, 0).text() == "requests=40 rate=2.0"
    assert view.table.item(1, 0).text() == f"requests=100 rate=5.0 {TRUST_MARK}"
    assert "over-saturated: the queue grew" in view.table.item(1, 0).toolTip()
    console = Console(width=400, record=True)
    console.print(results_table(summaries))
    assert "requests=100 rate=5.0 [over-saturated]" in console.export_text()
    assert "requests=40 rate=2.0 [" not in console.export_text()
