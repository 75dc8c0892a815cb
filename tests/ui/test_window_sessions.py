"""Reopening, replaying and comparing a session in the window: the made twin of a small real
sweep (tests/made_sessions.py ``write_sweep``), whose numbers are known in advance."""

from __future__ import annotations

from tests.ui.driving import click, click_until, run
from workbench.engine.figures.metrics import View, shown_in

# The last configuration's (np=2) three measured requests, each of 12 tokens.
LAST_PANES = [((1, 0, 5), "done"), ((1, 0, 6), "done"), ((1, 0, 7), "done")]


def final_view(window) -> tuple:
    return (
        window.gantt.bar_count(),
        window.results.table.rowCount(),
        sorted((k, p.state.text()) for k, p in window.grid.panes.items()),
        window.plots.sample_count(),
    )


def test_reopen_then_replay_at_10x_ends_in_the_same_view(window, loop, sweep_session):
    loop.run_until_complete(window.replay.open(sweep_session))
    assert window.replay.playback is not None and window.replay_bar.isVisible()
    reopened = final_view(window)
    assert reopened == (6, 2, LAST_PANES, 7)  # 6 requests, 2 configurations, 7 RSS samples
    assert all(p.body.text() == " tok" * 12 for p in window.grid.panes.values())

    window.replay.seek(0.0)
    assert window.gantt.bar_count() == 0  # back to the start
    finished: list[str] = []
    window.replay_finished.connect(finished.append)
    window.replay_bar.set_speed(10)
    window.replay.play()
    run(loop, lambda: finished, 60)
    assert finished == ["complete"]
    assert final_view(window) == reopened


def test_a_file_that_is_not_a_session_is_a_clear_error(window, loop, tmp_path):
    bad = tmp_path / "x.session.sqlite"
    bad.write_bytes(b"nope" * 100)
    loop.run_until_complete(window.replay.open(bad))
    assert "not a workbench session" in window.banner.text()
    assert window.replay.playback is None


def test_the_sessions_tab_lists_labels_opens_and_deletes(window, loop, sweep_session, tmp_path):
    import shutil

    from workbench.engine.analysis.library import load_notes

    window.out_dir.mkdir(parents=True, exist_ok=True)
    copy = window.out_dir / sweep_session.name
    shutil.copy(sweep_session, copy)
    window.left.setCurrentWidget(window.library)
    run(loop, lambda: window.library.table.rowCount() == 1, 30)
    panel = window.library
    panel.table.selectRow(0)
    panel.label.setText("first try")
    panel.tags.setText("cpu, demo")
    panel.note.setText("before the talk")
    click_until(
        loop,
        panel.buttons["Save notes"],
        lambda: "first try [cpu, demo]" in panel.table.item(0, 1).text(),
        30,
    )
    assert load_notes(copy).note == "before the talk"
    panel.table.selectRow(0)
    click_until(loop, panel.buttons["Open"], lambda: window.replay.playback is not None, 30)
    assert window.results.table.rowCount() == 2
    panel.confirm_delete = lambda info: True
    panel.table.selectRow(0)
    assert panel.buttons["Delete…"].isEnabled()
    click_until(loop, panel.buttons["Delete…"], lambda: panel.table.rowCount() == 0, 30)
    assert not copy.exists() and not copy.with_name(copy.name + ".notes.json").exists()


def test_compare_two_sessions_in_the_window_and_export(window, loop, sweep_session, tmp_path):
    import shutil

    window.out_dir.mkdir(parents=True, exist_ok=True)
    for name in ("a", "b"):
        shutil.copy(sweep_session, window.out_dir / f"{name}.session.sqlite")
    window.sessions.refresh()
    run(loop, lambda: window.library.table.rowCount() == 2, 30)
    window.library.table.selectAll()
    click_until(loop, window.library.buttons["Compare"], lambda: window.compare_windows, 10)
    (compare,) = window.compare_windows
    run(loop, lambda: not compare.loading.isVisible() and len(compare.gantts) == 2, 30)
    assert compare.table.columnCount() == 4 and compare.table.rowCount() == 22
    values = [compare.table.item(row, 2).text() for row in range(22)]
    assert values == [  # ... failed, prompt tokens, prefill tok/s (20 tokens in 0.1 s),
        # the prompt cache (off, nothing reused), queue wait
        *("3.60", "10.0", "1.300", "2.500", "10.0", "0", "20", "200.0", "off", "0.00", "1.200"),
        *("2.95", "12.2", "0.100", "1.575", "8.0", "0", "20", "200.0", "off", "0.00", "0.000"),
    ]
    assert [compare.table.item(row, 3).text() for row in range(22)] == values
    metrics = {f.key for f in shown_in(View.CHART)}
    assert all(compare.charts[key].point_count() == 4 for key in metrics)
    # The trade-off (a point per configuration and session) and a TTFT distribution per
    # configuration, a line of 3 requests (drawn as steps) per session.
    assert compare.charts["throughput_vs_ttft"].point_count() == 4
    assert [compare.charts[f"ttft_cdf_{n}"].point_count() for n in (1, 2)] == [12, 12]
    assert [g.bar_count() for g in compare.gantts] == [6, 6]  # stacked, one per session
    assert len(compare.memory.getPlotItem().listDataItems()) == 2  # memory curves overlaid
    compare.relative.setChecked(True)
    run(loop, lambda: not compare.loading.isVisible(), 30)
    assert compare.table.item(0, 2).text() == "1.00"  # np=1 relative to itself
    report = compare.export(tmp_path / "report")
    assert report is not None and (tmp_path / "report" / "charts" / "agg_tok_s.png").is_file()
    compare.close()
    run(loop, lambda: not window.compare_windows, 10)


def test_slos_on_an_opened_session(window, loop, sweep_session):
    panel = window.slo_panel
    loop.run_until_complete(window.evaluate_slo())
    assert "Run an experiment or open a session first" in panel.recommendation.text()
    loop.run_until_complete(window.replay.open(sweep_session))
    panel.ttft.setValue(60.0)
    loop.run_until_complete(window.evaluate_slo())
    cells = [
        [panel.table.item(r, c).text() for c in range(panel.table.columnCount())]
        for r in range(panel.table.rowCount())
    ]
    assert cells == [  # config, good/requests, goodput req/s, req/s, TTFT p50 s, meets, why not
        ["np=1", "3/3", "0.83", "0.83", "1.300", "yes", ""],
        ["np=2", "3/3", "1.02", "1.02", "0.100", "yes", ""],
    ]
    assert panel.recommendation.text() == (
        "SLO: TTFT <= 60 s.  Run: np=2: 1.02 good requests/s with 3 concurrent requests"
    )
    assert panel.slo_line.isVisible()
    assert panel.slo_line.value() == 60.0 and panel.chart.point_count() == 2
    panel.ttft.setValue(0.01)  # 10 ms: no request here starts that fast
    loop.run_until_complete(window.evaluate_slo())
    assert "add a machine" in panel.recommendation.text()


def test_a_log_path_inside_a_session_is_never_opened(window, loop, sweep_session, tmp_path):
    """A session from elsewhere named a FIFO as its server log: opening it froze the window
    for good. The window shows the log tail the session kept and opens no path from it."""
    import contextlib
    import os
    import shutil
    import sqlite3

    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    copy = tmp_path / "foreign.session.sqlite"
    shutil.copy(sweep_session, copy)
    with contextlib.closing(sqlite3.connect(copy)) as conn, conn:
        conn.execute("UPDATE configs SET log_path = ?, log_tail = 'kept tail'", (str(fifo),))
    loop.run_until_complete(window.replay.open(copy))  # returns: nothing blocked
    assert window.replay.playback is not None
    assert window.server_panel.log.toPlainText() == "kept tail"
    assert window.server_panel._log_path is None


def test_an_opened_session_shows_its_own_experiment_read_only(window, loop, sweep_session):
    """The form showed the default experiment beside a session that ran another one."""
    window.form.load_file("experiments/slots-1-2-4.toml")
    loop.run_until_complete(window.replay.open(sweep_session))
    form = window.form
    assert form.read_only and form.session_note.isVisible() and form.edit_button.isVisible()
    assert form.name.text() == "sweep" and not form.name.isEnabled()
    assert form.fields[("server", "slots")].text() == "1, 2"
    assert not any(widget.isEnabled() for widget in form.fields.values())
    assert sweep_session.name in form.path_label.text()
    built = form.build()  # Run runs it again, as it ran
    assert [c.label for c in built.configs()] == ["np=1", "np=2"] and built.path is None
    click(loop, form.edit_button)
    assert not form.read_only and not form.edit_button.isVisible()
    assert form.fields[("server", "slots")].isEnabled() and form.name.isEnabled()
    assert "unsaved copy" in form.path_label.text()


def test_other_tools_results_dropped_on_the_window_import_and_open(window, loop, tmp_path):
    from pathlib import Path

    from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
    from PySide6.QtGui import QDropEvent

    vllm = next((Path(__file__).parents[1] / "data" / "imports" / "vllm").glob("*.json"))
    bad = tmp_path / "not-a-result.json"
    bad.write_text("[]")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in (bad, vllm)])
    drop = QDropEvent(
        QPointF(10, 10),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    failures: list[str] = []
    window.sessions.failed.connect(failures.append)  # said in the banner, then overwritten
    window.dropEvent(drop)
    run(loop, lambda: window.replay.playback is not None, 30)
    assert window.results.table.rowCount() == 1  # one run: max concurrency 2
    (session,) = window.out_dir.glob("*.session.sqlite")
    assert session.name == vllm.stem + ".session.sqlite"
    window.left.setCurrentWidget(window.library)
    run(loop, lambda: window.library.table.rowCount() == 1, 30)
    cells = [window.library.table.item(0, c).text() for c in range(3, 5)]
    assert cells == ["imported from vllm bench serve", "concurrency=2"]
    assert [f.split(" (")[0] for f in failures] == [
        "not-a-result.json: not a result file this version reads"
    ]


def test_an_older_listing_of_kept_watches_that_ends_last_is_dropped(
    window, loop, tmp_path, monkeypatch
):
    """Each scan of the sessions lists the kept watches again, walking every folder: two
    listings that end out of order show the newer's."""
    import asyncio

    from workbench.engine.watch.record import KeptInfo
    from workbench.ui import main_window

    answers: list[asyncio.Future] = []

    async def listing(folders):
        answers.append(loop.create_future())
        return await answers[-1]

    monkeypatch.setattr(main_window, "kept_watches", listing)
    window.list_watches()
    window.list_watches()
    run(loop, lambda: len(answers) == 2, 5)
    older, newer = (
        [KeptInfo(tmp_path / "old.watch.sqlite")],
        [KeptInfo(tmp_path / "new.watch.sqlite")],
    )
    answers[1].set_result(newer)
    run(loop, lambda: window.library.watches == newer, 5)
    answers[0].set_result(older)
    run(loop, lambda: not window.tasks, 5)  # the older has ended too
    assert window.library.watches == newer


def test_the_open_dialog_offers_sessions_and_watches_by_their_own_suffixes(window, monkeypatch):
    from workbench.ui import main_window

    asked: list[str] = []

    def dialog(parent, title, folder, filters):
        asked.append(filters)
        return "", ""

    monkeypatch.setattr(main_window.QFileDialog, "getOpenFileName", dialog)
    window.open_session_dialog()
    assert asked == ["Sessions and watches (*.session.sqlite *.watch.sqlite)"]
