"""The Server tab's Calibrate: the probe with the form's server settings off the window's
thread, its lines as it goes, the calibration stored and said, Cancel, and the window
closed mid-probe; the run's prediction said above the Gantt when it starts."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from tests.ui.driving import click, run
from tests.ui.test_prediction_views import SWEEP, prediction_of
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import (
    ConfigStarted,
    ExperimentStarted,
    PredictionMade,
    RequestSubmitted,
)
from workbench.engine.measure.hardware import fingerprint
from workbench.engine.predict.calibration import (
    Calibration,
    FitQuality,
    held_settings,
    machine_identity,
    model_identity,
    now,
)
from workbench.engine.predict.costs import DecodeCost, PrefillCost, StepCosts
from workbench.engine.predict.probe import Probed, probe_settings
from workbench.ui.controllers.calibrate_controller import CANCELLED

QUALITY = FitQuality(10, 0.04, 0.1, 20, 0.03, 0.08)
COSTS = StepCosts(DecodeCost(10.0, 1.0, 0.001), PrefillCost(5.0, 0.2), 2.0)


class FakeProbe:
    """The probe's signature, without a server: it says one phase, then measures (or
    waits until cancelled, with ``hang``); ``stopped`` is set where the real one stops its
    server."""

    def __init__(self, hang: bool = False) -> None:
        self.hang = hang
        self.stopped = threading.Event()
        self.thread: str | None = None

    async def __call__(self, binary, model, settings, log_path, say=lambda line: None):
        self.thread = threading.current_thread().name
        try:
            say("  prompts alone: measured")
            if self.hang:
                await asyncio.sleep(3600)
            hardware = fingerprint(binary)
            calibration = Calibration(
                COSTS,
                QUALITY,
                machine_identity(hardware),
                model_identity(model),
                hardware.llama_server_build,
                held_settings(probe_settings(settings)),
                now(),
                "probe",
            )
            return Probed(calibration, 1.0, ["prompts alone"])
        finally:
            self.stopped.set()


def calibrating(window, tmp_path: Path, probe) -> None:
    window.calibrator.folder = tmp_path / "calibrations"
    window.calibrator.probe = probe
    window.left.setCurrentWidget(window.server_panel)


def lines(window) -> str:
    return window.server_panel.calibration_lines.toPlainText()


def test_calibrate_probes_off_the_window_thread_stores_and_says_so(window, loop, tmp_path):
    probe = FakeProbe()
    calibrating(window, tmp_path, probe)
    panel = window.server_panel
    run(loop, lambda: panel.calibration_known.text().startswith("Not calibrated here"), 30)
    click(loop, panel.calibrate_button)
    run(loop, lambda: "stored in" in lines(window), 30)
    assert probe.thread != threading.main_thread().name
    assert "prompts alone: measured" in lines(window)
    assert "decode: 10.00 ms a step + 1.00 ms per sequence" in lines(window)
    assert list((tmp_path / "calibrations").glob("*.json"))
    # The form's settings now have one: said once the check after storing is back.
    run(loop, lambda: panel.calibration_known.text().startswith("Calibrated here"), 30)
    assert panel.calibrate_button.isEnabled() and window.run_button.isEnabled()


def test_a_second_calibrate_says_what_it_replaced_and_its_doubts(window, loop, tmp_path):
    """The button once replaced the stored calibration without a word, and never said a
    fit's doubts (here: fitted to too few requests to judge it on held-back ones)."""
    calibrating(window, tmp_path, FakeProbe())
    panel = window.server_panel
    said = []
    for _ in range(2):
        run(loop, lambda: not window.calibrator.busy and panel.calibrate_button.isEnabled(), 30)
        click(loop, panel.calibrate_button)
        run(loop, lambda: "stored in" in lines(window), 30)
        run(loop, lambda: not window.calibrator.busy, 30)
        said.append(lines(window))
    assert "replacing" not in said[0]
    assert "(replacing the one from probe made " in said[1]
    assert "warning: " in said[1]


def test_cancel_stops_the_probe_and_stores_nothing(window, loop, tmp_path):
    probe = FakeProbe(hang=True)
    calibrating(window, tmp_path, probe)
    panel = window.server_panel
    click(loop, panel.calibrate_button)
    run(loop, lambda: "prompts alone" in lines(window), 30)
    assert not window.run_button.isEnabled() and not panel.calibrate_button.isEnabled()
    click(loop, panel.cancel_calibrate_button)
    run(loop, lambda: not window.calibrator.busy, 30)
    assert probe.stopped.is_set() and CANCELLED in lines(window)
    assert not (tmp_path / "calibrations").exists()
    assert window.run_button.isEnabled() and panel.calibrate_button.isEnabled()


def test_closing_the_window_mid_probe_stops_its_server(window, loop, tmp_path):
    probe = FakeProbe(hang=True)
    calibrating(window, tmp_path, probe)
    click(loop, window.server_panel.calibrate_button)
    run(loop, lambda: "prompts alone" in lines(window), 30)
    window.close()
    assert probe.stopped.wait(30)


def test_the_prediction_is_said_above_the_gantt_when_the_run_starts(window):
    prediction = prediction_of(SWEEP)
    window.renderer.render(
        [ExperimentStarted("e", "s", 2, "managed", 0), PredictionMade(prediction)], 0.0
    )
    line = window.prediction_line
    assert line.isVisible() and line.text() == f"Predicted: {prediction.headline()}"
    assert line.text().startswith("Predicted: about 1 s; np=1 TTFT p50 about")


def test_a_long_prediction_fits_a_1366_pixel_screen(window):
    """The line wraps: at 1366x768 it does not widen the window."""
    window.resize(1366, 768)
    many = "name = 'p'\n[server]\nslots = [1, 2, 3, 4, 5, 6, 7, 8]\n" + SWEEP.split("\n", 4)[4]
    prediction = prediction_of(many)
    config = parse_experiment(many).configs()[0]
    events = [
        ExperimentStarted("e", "s", 8, "managed", 0),
        PredictionMade(prediction),
        ConfigStarted(config, 3),
        *(RequestSubmitted(0, 0, i, False, i) for i in range(3)),
    ]
    window.renderer.render(events, 1.0, force=True)
    assert window.gantt.ghost_count() == 3 and window.gantt.ghost_legend.isVisible()
    assert window.minimumSizeHint().width() <= 1366
    assert window.prediction_line.text().endswith(prediction.headline())


@pytest.mark.server
def test_calibrate_measures_the_real_server(window, loop, tmp_path):
    """The button's real probe: at most 60 s of measuring, the calibration stored."""
    window.calibrator.folder = tmp_path / "calibrations"
    click(loop, window.server_panel.calibrate_button)
    run(loop, lambda: not window.calibrator.busy, 120)
    assert "stored in" in lines(window), lines(window)
    assert "decode:" in lines(window)
    run(
        loop, lambda: window.server_panel.calibration_known.text().startswith("Calibrated here"), 30
    )


def test_a_folder_that_cannot_be_written_is_one_line_and_the_buttons_come_back(
    window, loop, tmp_path
):
    calibrating(window, tmp_path, FakeProbe())
    (tmp_path / "calibrations").write_text("a file where the folder goes")
    click(loop, window.server_panel.calibrate_button)
    run(loop, lambda: not window.calibrator.busy, 30)
    assert lines(window).splitlines()[-1].startswith("Calibration failed: ")
    assert window.server_panel.calibrate_button.isEnabled() and window.run_button.isEnabled()


def test_a_calibrations_lines_scroll_in_the_server_tab_at_1366x768(window):
    """A probe's dozen lines and its costs, wrapped in the narrow panel, made the window
    786 px tall: they scroll in a box of their own."""
    window.resize(1366, 768)
    window.left.setCurrentWidget(window.server_panel)
    panel = window.server_panel
    panel.show_calibration_known("Calibrated here (probe, 2026-12-02 04:47): runs are predicted.")
    for n in range(12):
        panel.add_calibration_line(
            f"  phase {n} of the probe: measured, its line long enough to wrap"
        )
    panel.show_calibration(
        [f"decode: {n}.00 ms a step + 1.00 ms per sequence" for n in range(6)], "/x"
    )
    assert window.minimumSizeHint().height() <= 768 and window.minimumSizeHint().width() <= 1366
    assert lines(window).splitlines()[-1] == "stored in /x"
