"""The window: validation and clear errors without a server, and the scripted screenshot of a
real run."""

from __future__ import annotations

import itertools
import struct
import subprocess
import sys

import pytest
from PySide6.QtCore import QPoint, Qt

from tests.ui.driving import run
from workbench.engine.analysis.planner import plan
from workbench.engine.config.experiment import load_experiment
from workbench.engine.models.memory import read_model_facts
from workbench.engine.models.model_file import default_model_path
from workbench.engine.server.llama_server import free_port
from workbench.ui.panels.experiment_form import error_style


def test_the_default_experiment_loads_into_the_form(window):
    window.form.load_file("experiments/slots-1-2-4.toml")
    assert window.form.fields[("server", "slots")].text() == "1, 2, 4"
    assert window.form.fields[("workload", "max_tokens")].text() == "64"
    experiment = window.form.build()
    assert [c.label for c in experiment.configs()] == ["np=1", "np=2", "np=4"]
    assert experiment.configs() == load_experiment("experiments/slots-1-2-4.toml").configs()


def test_invalid_fields_are_marked_before_run(window, qtbot):
    window.form.load_file("experiments/slots-1-2-4.toml")
    slots = window.form.fields[("server", "slots")]
    slots.setText("1, two")
    qtbot.mouseClick(window.run_button, Qt.MouseButton.LeftButton)
    assert window.runner is None
    assert "[server] slots: 'two' is not a whole number" in window.banner.text()
    assert slots.styleSheet() == error_style()  # in the theme's colour: test_theme_colours
    slots.setText("0")
    window.start_run()
    assert window.runner is None
    assert "slots must be between 1 and 1024" in window.banner.text()
    slots.setText("2")
    window.form.fields[("workload", "arrival")].setCurrentText("poisson")
    window.start_run()
    assert "needs rate > 0" in window.banner.text()


def test_a_model_that_is_not_gguf_is_a_clear_error(window, loop, tmp_path):
    window.form.load_file("experiments/slots-1-2-4.toml")
    fake = tmp_path / "model.gguf"
    fake.write_text("not a model " * 20)
    window.form.fields[("server", "model")].setText(str(fake))
    window.start_run()
    run(loop, lambda: not window.running, 30)
    assert "is not a GGUF model file" in window.banner.text()
    assert window.run_button.isEnabled() and window.form.isEnabled()


def test_an_unreachable_base_url_is_a_clear_error(window, loop):
    window.form.load_file("experiments/slots-1-2-4.toml")
    window.form.external.setChecked(True)
    window.form.base_url.setText(f"http://127.0.0.1:{free_port()}")
    window.start_run()
    run(loop, lambda: not window.running, 30)
    assert "nothing answers at" in window.banner.text()
    window.form.base_url.setText("")
    window.start_run()
    assert "needs a base URL" in window.banner.text()


def test_save_as_writes_an_experiment_that_loads_back(window, tmp_path):
    window.form.load_file("experiments/slots-1-2-4.toml")
    window.form.fields[("server", "ctx")].setText("4096, 8192")
    window.form.fields[("server", "cont_batching")].setCurrentText("on and off")
    path = tmp_path / "mine.toml"
    window.form.save(path, window.form.build())
    saved = load_experiment(path)
    assert saved.server["ctx"] == [4096, 8192]
    assert saved.server["cont_batching"] == [True, False]
    assert len(saved.configs()) == 12
    assert window.form.path_label.text() == str(path)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.mark.server
def test_scripted_run_saves_a_screenshot_and_exits(tmp_path):
    experiment = tmp_path / "tiny.toml"
    experiment.write_text(
        'name = "tiny"\n[server]\nslots = 2\nctx = 2048\n'
        "[workload]\nrequests = 2\nmax_tokens = 8\nwarmup = 0\n"
    )
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "gui",
            "--experiment",
            str(experiment),
            "--out",
            str(tmp_path / "out"),
            "--autorun",
            "--screenshot",
            str(shot),
            "--quit-when-done",
            "--size",
            "1366x768",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert png_size(shot.read_bytes()) == (1366, 768)
    assert list((tmp_path / "out").glob("*.session.sqlite"))


def test_the_capacity_panel_follows_the_form(window, loop):
    window.form.load_file("experiments/slots-1-2-4.toml")
    assert window.capacity.table.rowCount() == 0  # nothing computed while out of sight
    window.left.setCurrentWidget(window.capacity)
    run(loop, lambda: window.capacity.table.rowCount() == 3, 30)
    cells = [[window.capacity.table.item(r, c).text() for c in range(7)] for r in range(3)]
    assert [row[:4] for row in cells] == [
        ["8192", "1", "8192", "fits"],
        ["8192", "2", "4096", "fits"],
        ["8192", "4", "2048", "fits"],
    ]
    model = read_model_facts(default_model_path())
    planned = plan(model, [8192], [1, 2, 4], 2**40)  # what `workbench plan` prints
    assert [row[4:] for row in cells] == [
        [f"{p.total_mib:.0f}", "180", f"{p.compute_mib:.0f}"] for p in planned
    ]
    window.form.fields[("server", "ctx")].setText("2048")
    window.form.fields[("workload", "max_tokens")].setText("1000")
    run(loop, lambda: window.capacity.table.item(0, 0).text() == "2048", 30)
    assert "refused or cut short" in window.capacity.warnings.text()
    window.form.fields[("server", "model")].setText("/nonexistent.gguf")
    run(loop, lambda: "not found" in window.capacity.summary.text(), 30)


def test_the_capacity_panel_plans_a_per_slot_limits_pool(window, loop):
    """``kv_unified_per_slot``: each slot count's pool is slots x the limit, one unified
    pool; the file's context must go (the two are refused together, and the panel plans
    only what would run)."""
    window.form.load_file("experiments/slots-1-2-4.toml")
    window.left.setCurrentWidget(window.capacity)
    window.form.fields[("server", "kv_unified_per_slot")].setText("2048")
    window.form.fields[("server", "ctx")].setText("")
    table = window.capacity.table
    run(loop, lambda: table.rowCount() == 3 and table.item(1, 0).text() == "4096", 30)
    cells = [[table.item(r, c).text() for c in (0, 1, 2, 5)] for r in range(3)]
    assert cells == [
        ["2048", "1 (unified)", "2048", "45"],
        ["4096", "2 (unified)", "2048", "90"],
        ["8192", "4 (unified)", "2048", "180"],
    ]


def test_sweeps_the_form_cannot_show_are_kept(window, tmp_path):
    path = tmp_path / "swept.toml"
    path.write_text(
        '[server]\nslots = 2\ncache_type_k = ["f16", "q8_0"]\n'
        'extra_args = [["--flash-attn", "on"], []]\n'
        '[workload]\narrival = ["burst", "poisson"]\nrate = 4.0\n'
    )
    window.form.load_file(path)
    kv = window.form.fields[("server", "cache_type_k")]
    assert not kv.isEnabled() and "swept in the file" in kv.toolTip()
    experiment = window.form.build()
    assert len(experiment.configs()) == 8  # 2 KV types x 2 flag sets x 2 arrivals
    window.form.load_file("experiments/slots-1-2-4.toml")
    assert kv.isEnabled() and len(window.form.build().configs()) == 3


def test_no_display_is_a_clear_error(monkeypatch, capsys):
    from workbench.cli.main import main

    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert main(["gui"]) == 1
    assert "no display" in capsys.readouterr().err


def test_gpu_memory_gets_its_curve_only_when_a_gpu_reports(qtbot):
    from workbench.engine.events import ExperimentStarted, GpuSample, ProcessSample
    from workbench.ui.run_model import RunModel
    from workbench.ui.views.server_plots import ServerPlots

    plots = ServerPlots()
    qtbot.addWidget(plots)
    model = RunModel()
    model.apply(
        [ExperimentStarted("e", "s", 1, "managed", 0), ProcessSample(0, 10**9, 300 * 2**20, 100.0)]
    )
    plots.sync(model)
    assert plots.gpu_curve is None
    model.apply([GpuSample(0, 2 * 10**9, 800 * 2**20)])
    plots.sync(model)
    assert plots.gpu_curve is not None and list(plots.gpu_curve.getData()[1]) == [800.0]


def test_the_slots_strip_names_each_slot_by_its_number(qtbot):
    """One slot once read "-200 0 200 (x0.001)": the axis labelled fractions of a slot; and
    at 1366x768 (a strip ~80 px tall) four slot numbers overlapped."""
    from PySide6.QtGui import QFontMetricsF

    from workbench.engine.events import ExperimentStarted, SlotsSample
    from workbench.ui.run_model import RunModel
    from workbench.ui.views.server_plots import ServerPlots

    plots = ServerPlots()
    qtbot.addWidget(plots)
    plots.resize(400, 900)
    plots.show()
    model = RunModel()
    model.apply([ExperimentStarted("e", "s", 1, "managed", 0)])
    strip = plots.slots.getPlotItem()
    axis = strip.getAxis("left")
    for slots in (1, 4):
        busy = [{"id": i, "is_processing": True} for i in range(slots)]
        model.apply([SlotsSample(0, slots * 10**9, busy)])
        plots.sync(model)
        assert axis._tickLevels == [[(i, str(i)) for i in range(slots)]]  # room for each
        assert not axis.autoSIPrefix
    model.apply([SlotsSample(0, 9 * 10**9, [{"id": i, "is_processing": True} for i in range(16)])])
    plots.sync(model)
    plots.resize(400, 420)  # the strip's least height
    qtbot.waitUntil(lambda: axis._tickLevels[0] != [(i, str(i)) for i in range(16)])
    rows = [row for row, _ in axis._tickLevels[0]]
    row_px = strip.getViewBox().height() / 16
    apart = min(b - a for a, b in itertools.pairwise(rows)) * row_px
    assert rows[0] == 0 and len(rows) > 1
    assert apart >= QFontMetricsF(axis.font()).height()  # labels never overlap


def test_every_results_column_shows_at_1600_and_scrolls_behind_the_config_at_1366(window, loop):
    from tests.ui.test_demo_session import DEMO

    assert loop.run_until_complete(window.replay.open(DEMO))
    table = window.results.table
    window.resize(1600, 950)
    run(loop, lambda: table.horizontalScrollBar().maximum() == 0, 10)
    assert table.horizontalHeader().length() <= table.viewport().width()

    window.resize(1366, 768)
    run(loop, lambda: table.horizontalScrollBar().maximum() > 0, 10)
    table.horizontalScrollBar().setValue(table.horizontalScrollBar().maximum())
    pinned = window.results.pinned
    assert pinned.isVisible() and pinned.x() == table.frameWidth()
    assert pinned.width() == table.columnWidth(0)
    first = pinned.indexAt(QPoint(2, 2))  # its top-left cell: the first label, in sight
    assert (first.row(), first.column()) == (0, 0) and first.data() == "np=1"
    assert pinned.horizontalHeader().height() == table.horizontalHeader().height()


def test_column_widths_give_the_table_room_only_where_the_centre_keeps_its_share():
    from workbench.ui.main_window import column_widths

    def shares(width: int) -> tuple[int, int, int]:  # 23 %, 48 %, 29 %
        left, right = int(width * 0.23), int(width * 0.29)
        return left, width - left - right, right

    assert column_widths(1920, 540) == shares(1920)  # 29 % is room enough already
    left, centre, right = column_widths(1578, 540)  # a 1600-pixel window
    assert right == 540 and centre >= int(0.45 * 1578) and left >= 300
    assert column_widths(1344, 540) == shares(1344)  # 1366: no room, the table scrolls


def test_the_experiment_panel_button_says_what_it_shows_and_hides(window):
    assert window.panel_toggle.text() == "Experiment panel"
    window.panel_toggle.click()
    assert not window.left.isVisible()
    window.panel_toggle.click()
    assert window.left.isVisible()
