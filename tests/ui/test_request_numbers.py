"""One request, one number: the stream pane, the Gantt row, ``requests.csv`` and
``show --requests`` name each measured request alike, 1 to N across the sweep, warm-ups
apart."""

from __future__ import annotations

import csv

from workbench.engine.analysis.export import request_rows, write_requests_csv
from workbench.engine.run.replay import session_events
from workbench.engine.store import open_session
from workbench.ui.run_model import RunModel
from workbench.ui.views.gantt import request_ticks
from workbench.ui.views.gantt_rows import request_tooltip
from workbench.ui.views.stream_grid import StreamPane


def test_every_view_numbers_a_request_alike(sweep_session, tmp_path, qtbot):
    with open_session(sweep_session) as session:
        events = session_events(session)
        rows = request_rows(session)
        write_requests_csv(tmp_path / "requests.csv", session)
    model = RunModel()
    model.apply([e for _, e in events])
    views = model.ordered()
    # Two configurations of one warm-up and 3 requests: 1-6, not 1-3 then 5-7.
    assert [v.number for v in views] == [1, 2, 3, 4, 5, 6]
    assert [v.index for v in views] == [1, 2, 3, 5, 6, 7]  # the prompts' numbers
    by_key = {(r["config"], r["repeat"] - 1, r["request"]): r for r in rows if not r["warmup"]}
    assert sorted(k[2] for k in by_key) == [1, 2, 3, 4, 5, 6]
    for view in views:
        row = by_key[(view.config_index, view.repeat, view.number)]
        assert row["t_submit_s"] is not None
    with (tmp_path / "requests.csv").open() as fh:
        written = list(csv.DictReader(fh))
    assert [r["request"] for r in written] == ["", "1", "2", "3", "", "4", "5", "6"]
    assert [r["label"] for r in written] == ["np=1"] * 4 + ["np=2"] * 4
    assert [r["repeat"] for r in written] == ["", "1", "1", "1"] * 2  # warm-ups: none
    assert request_tooltip(views[4]).startswith("request #5 (config 2, repeat 1)")
    assert request_ticks(len(views))[4] == (4, "5")  # the Gantt row that bar is drawn in
    pane = StreamPane()
    qtbot.addWidget(pane)
    pane.bind(views[4], "")
    assert pane.title.text() == "#5"


def test_show_requests_names_each_by_its_label_and_number(sweep_session, capsys, monkeypatch):
    from workbench.cli.main import main

    monkeypatch.setenv("COLUMNS", "100")  # the table splits in two, each led by the names
    assert main(["show", str(sweep_session), "--requests"]) == 0
    out = capsys.readouterr().out
    listed = out[out.index("Requests") :]
    rows = [line.split("│")[1:4] for line in listed.splitlines() if line.startswith("│")]
    cells = [[c.strip() for c in row] for row in rows]
    assert cells[:6] == [
        ["np=1", "1", "1"],
        ["np=1", "1", "2"],
        ["np=1", "1", "3"],
        ["np=2", "1", "4"],
        ["np=2", "1", "5"],
        ["np=2", "1", "6"],
    ]
