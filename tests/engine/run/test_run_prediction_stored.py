"""A fresh managed run predicts itself from this machine's stored calibrations before its
first configuration, says so in a notice and stores the prediction; without a calibration it
says how to make one; a resumed run keeps the prediction it made. A stand-in server that
exits at once keeps these runs short: the prediction is made before any server starts."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from tests.engine.run.test_runner_faults import fake_binary
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.measure.hardware import fingerprint
from workbench.engine.models.model_file import resolve_model
from workbench.engine.predict.calibration import Calibration, FitQuality, save
from workbench.engine.predict.costs import DecodeCost, PrefillCost, StepCosts
from workbench.engine.predict.run_prediction import Wanted
from workbench.engine.run.lifecycle import run_experiment
from workbench.engine.run.runner import RunOptions
from workbench.engine.store import open_session

EXPERIMENT = parse_experiment(
    'name = "predicted"\n[server]\nslots = [1, 2]\nctx = 2048\n'
    "[workload]\nrequests = 2\ninput_tokens = 32\nmax_tokens = 4\nwarmup = 0\n"
)


@pytest.fixture
def binary(tmp_path, monkeypatch):
    """A server that exits at once, and a folder of calibrations of this test's own."""
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    return fake_binary(tmp_path, "exit 3")


def calibrate(binary: str) -> Path:
    config = EXPERIMENT.configs()[0]
    wanted = Wanted.of(config, fingerprint(binary), resolve_model(config.server.model))
    costs = StepCosts(DecodeCost(10.0, 0.0, 0.0), PrefillCost(0.0, 0.5))
    quality = FitQuality(1, 0.0, 0.0, 1, 0.0, 0.0)
    made = Calibration(
        costs, quality, wanted.machine, wanted.model, wanted.build, wanted.settings,
        "2026-12-02T03:00:00+00:00", "probe",
    )  # fmt: skip
    return save(made)


def said(session) -> list[str]:
    """What the run said of its prediction."""
    return [
        n.text
        for n in session.notices()
        if (n.text or "").startswith(("predicted: ", "no prediction: "))
    ]


def test_a_run_stores_its_prediction_and_says_it_before_it_starts(binary, tmp_path):
    calibrate(binary)
    result = run_experiment(EXPERIMENT, RunOptions(tmp_path / "out", server_bin=binary))
    with open_session(result.session_path) as session:
        prediction = session.predictions()
        notes = said(session)
    assert prediction is not None and prediction.left_out == ()
    assert [c.label for c in prediction.configs] == ["np=1", "np=2"]
    assert notes == [f"predicted: {prediction.headline()}"]


def test_without_a_calibration_the_run_says_how_to_make_one(binary, tmp_path):
    result = run_experiment(EXPERIMENT, RunOptions(tmp_path / "out", server_bin=binary))
    with open_session(result.session_path) as session:
        prediction = session.predictions()
        notes = said(session)
    assert prediction is not None and prediction.configs == ()
    assert notes == [
        "no prediction: np=1: no calibration for SmolLM2-135M-Instruct.Q4_1.gguf with the "
        "default settings; np=2: no calibration for SmolLM2-135M-Instruct.Q4_1.gguf with the "
        "default settings (`workbench calibrate` with these settings makes one)"
    ]


def test_a_resumed_run_keeps_the_prediction_it_made(binary, tmp_path):
    calibrate(binary)
    first = run_experiment(EXPERIMENT, RunOptions(tmp_path / "out", server_bin=binary))
    with contextlib.closing(sqlite3.connect(first.session_path)) as conn, conn:
        conn.execute("UPDATE session SET status = 'cancelled'")
    with open_session(first.session_path) as session:
        made = session.predictions()
    options = RunOptions(tmp_path / "out", server_bin=binary, resume=first.session_path)
    run_experiment(EXPERIMENT, options)
    with open_session(first.session_path) as session:
        assert session.predictions() == made
        assert len([n for n in said(session) if n.startswith("predicted: ")]) == 1


def test_the_prediction_crosses_from_the_windows_engine_process(tmp_path):
    """The window runs the engine in a child process (forked from a server that keeps the
    environment it started with: the calibration goes in the tests' own folder)."""
    from workbench.engine.events import PredictionMade
    from workbench.engine.run.process_runner import ProcessRunner

    binary = fake_binary(tmp_path, "exit 3")
    stored = calibrate(binary)
    try:
        runner = ProcessRunner(EXPERIMENT, RunOptions(tmp_path / "out", server_bin=binary))
        runner.prepare()
        events = runner.bus.subscribe(PredictionMade)
        runner.start()
        result = runner.wait(60.0)
    finally:
        stored.unlink()
    assert result is not None
    (made,) = events.drain()
    assert [c.label for c in made.prediction.configs] == ["np=1", "np=2"]
