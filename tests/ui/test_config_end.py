"""The frame that ends a configuration: what it does, counted (never timed).

A configuration's end brings its results row and the engine's warnings on it. That frame
once re-laid out the whole window (the columns re-split for a wider table, the banner
appearing) and judged, read and built views nobody saw: 0.1-0.4 s of the GUI thread at 64
streams, a freeze at every configuration change."""

from __future__ import annotations

from PySide6.QtCore import QTimer

from tests.made_sessions import server_of, workload_of
from tests.ui.driving import run
from tests.ui.test_charts import row
from tests.ui.test_render_pacing import burst
from workbench.engine.analysis.roofline import RooflineReport
from workbench.engine.base.records import StartupFacts
from workbench.engine.events import (
    ConfigFinished,
    ExperimentFinished,
    Notice,
    ServerStateChanged,
)
from workbench.engine.figures.client_limits import ClientLoad
from workbench.engine.figures.per_run import RunObservations, summarize_run
from workbench.engine.figures.summaries import ConfigSummary, summarize_config


def summary(index: int = 0) -> ConfigSummary:
    """A configuration the client limited: its label is marked (⚠), widening its column."""
    busy = summarize_run([], RunObservations(ClientLoad(1.0, 0.9, 0.95)))
    return summarize_config(
        index, f"np={index + 1}", server_of({"slots": 64}), workload_of({}), StartupFacts(), [busy]
    )


def settle(loop) -> None:
    """Run the loop a little: what a frame left for later (zero-time timers) runs."""
    done: list[bool] = []
    QTimer.singleShot(50, lambda: done.append(True))
    run(loop, lambda: bool(done), 10)


def test_a_configuration_end_leaves_the_columns_until_the_run_ends(window, loop, monkeypatch):
    """A results row that widens the table re-split the three columns mid-run: every view
    re-laid out and repainted in the frame the configuration ended. The columns fit the
    table once the run is over."""
    settle(loop)
    moves: list[list[int]] = []
    set_sizes = window.splitter.setSizes
    monkeypatch.setattr(window.splitter, "setSizes", lambda s: (moves.append(s), set_sizes(s)))
    window.renderer.render([*burst(), ConfigFinished(0, "ok", summary=summary())], 1.0)
    settle(loop)
    assert window.results.table.rowCount() == 1
    assert moves == []
    window.renderer.render([ExperimentFinished("complete")], 2.0)
    window.runs.finished.emit("complete")
    settle(loop)
    assert len(moves) == 1


def test_hidden_verdicts_are_judged_when_their_tab_shows(window, monkeypatch):
    import workbench.ui.views.verdicts_view as verdicts_view

    judged: list[int] = []
    lab_verdicts = verdicts_view.lab_verdicts
    monkeypatch.setattr(
        verdicts_view, "lab_verdicts", lambda s: (judged.append(len(s)), lab_verdicts(s))[1]
    )
    window.renderer.render([*burst(), ConfigFinished(0, "ok", summary=summary())], 1.0)
    assert judged == []
    window.results.tabs.setCurrentWidget(window.results.verdicts)
    assert judged == [1]
    window.renderer.render([ConfigFinished(0, "ok", summary=summary(1))], 2.0)
    assert judged == [1, 2]  # shown: judged as each configuration ends


def test_a_hidden_roofline_builds_its_chart_when_its_tab_shows(window):
    roofline = window.results.roofline
    roofline.show_report(RooflineReport([row("np=1", 1, 250, 70)], 25e9, "given", None))
    assert "25.0 GB/s" in roofline.summary.text()
    assert roofline.chart is None
    window.results.tabs.setCurrentWidget(roofline)
    assert roofline.chart is not None and roofline.chart.point_count() == 2


def test_a_warning_reaches_the_banner_once(window):
    """The latest warning was given to the banner again at every server event (each time a
    style sheet set and the banner polished anew)."""
    shown: list[str] = []
    window.renderer.warning.connect(shown.append)
    window.renderer.render([*burst(), Notice("warning", "client saturated", 0)], 1.0)
    for state in ("stopping", "stopped", "starting"):
        window.renderer.render([ServerStateChanged(0, state)], 2.0)
    assert shown == ["client saturated"]
    assert window.banner.text() == "client saturated"


def test_the_server_log_is_read_only_while_its_tab_shows(window, tmp_path, monkeypatch):
    import workbench.ui.panels.server_panel as server_panel

    log = tmp_path / "server.log"
    log.write_text("llama-server says hello\n")
    reads: list[object] = []
    read_tail = server_panel.read_tail
    monkeypatch.setattr(server_panel, "read_tail", lambda *a: (reads.append(a), read_tail(*a))[1])
    panel = window.server_panel
    panel.show_server("http://127.0.0.1:1", StartupFacts(), str(log))
    panel.refresh_log()  # the window's one-second timer
    assert reads == []
    window.left.setCurrentWidget(panel)
    assert len(reads) == 1 and "hello" in panel.log.toPlainText()


def test_the_banner_has_its_row_from_the_run_start(window, loop):
    """Hidden as a run started, the banner appeared with the first warning, at a
    configuration's end, and pushed every view down in that frame: it says from the start
    where the session goes, and a warning takes its row."""
    from workbench.engine.server.llama_server import free_port

    banners: list[tuple[str, str]] = []
    window.runs.banner.connect(lambda text, kind: banners.append((text, kind)))
    window.form.load_file("experiments/slots-1-2-4.toml")
    window.form.external.setChecked(True)
    window.form.base_url.setText(f"http://127.0.0.1:{free_port()}")
    window.start_run()
    run(loop, lambda: not window.running, 30)
    assert banners[0] == (f"Running. What finishes is kept in {window.out_dir}", "info")
    assert "nothing answers at" in banners[-1][0]
