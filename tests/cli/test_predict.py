"""``workbench predict``: an experiment's figures from a calibration of this machine, printed
as the results table and written as ``concurrency.csv``; a calibration of another machine, or
none, is one line, never a prediction."""

from __future__ import annotations

import csv
from dataclasses import replace

import pytest

from workbench.cli.main import main
from workbench.engine.analysis.export import concurrency_columns
from workbench.engine.measure.hardware import fingerprint
from workbench.engine.predict.calibration import (
    Calibration,
    FitQuality,
    held_settings,
    machine_identity,
    save,
)
from workbench.engine.predict.costs import DecodeCost, PrefillCost, StepCosts
from workbench.engine.server.discovery import find_server_binary

EXPERIMENT = """name = "predicted"
[server]
slots = [1, 2]
ctx = 4096
[workload]
requests = 2
input_tokens = 100
max_tokens = 5
warmup = 0
"""


@pytest.fixture
def calibration_file(tmp_path):
    """This machine's costs: a step 10 ms, a prompt 0.5 ms a token."""
    hardware = fingerprint(find_server_binary(None).path)
    made = Calibration(
        StepCosts(DecodeCost(10.0, 0.0, 0.0), PrefillCost(0.0, 0.5)),
        FitQuality(1, 0.0, 0.0, 1, 0.0, 0.0),
        machine_identity(hardware),
        "model.gguf (1 bytes)",
        hardware.llama_server_build,
        held_settings({}),
        "2026-12-02T03:00:00+00:00",
        "probe",
        template_tokens=30,
    )
    return save(made, tmp_path / "calibrations")


def test_the_prediction_is_the_results_table_and_concurrency_csv(
    tmp_path, capsys, calibration_file
):
    experiment = tmp_path / "e.toml"
    experiment.write_text(EXPERIMENT)
    out = tmp_path / "predicted.csv"
    args = ["predict", str(experiment), "--calibration", str(calibration_file), "--csv", str(out)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "Predicted by the scheduler model (nothing measured)" in text
    assert "predicted time: about 0 s of requests for 2 configurations" in text
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == concurrency_columns()
    # 1 slot: 0.05 and 0.14 s; 2 slots: both prompts in one 100 ms step.
    assert [float(r["ttft_p50_s"]) for r in rows] == pytest.approx([0.095, 0.1])


def test_a_calibration_of_another_machine_is_refused(tmp_path, capsys, calibration_file):
    from workbench.engine.predict.calibration import load

    other = save(replace(load(calibration_file), machine="Apple M3 (8 threads) on laptop"),
                 tmp_path / "other")  # fmt: skip
    experiment = tmp_path / "e.toml"
    experiment.write_text(EXPERIMENT)
    assert main(["predict", str(experiment), "--calibration", str(other)]) == 1
    err = capsys.readouterr().err.strip()
    assert "was made on Apple M3 (8 threads) on laptop, not this machine" in err
    assert len(err.splitlines()) == 1


def test_without_a_calibration_it_says_how_to_make_one(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "empty"))
    experiment = tmp_path / "e.toml"
    experiment.write_text(EXPERIMENT)
    assert main(["predict", str(experiment)]) == 1
    err = capsys.readouterr().err
    assert "run `workbench calibrate`" in err and "--probe" in err


def test_a_sweep_over_what_a_calibration_holds_is_one_line(tmp_path, capsys, calibration_file):
    experiment = tmp_path / "e.toml"
    experiment.write_text(EXPERIMENT.replace("ctx = 4096", "ctx = 4096\nthreads = [1, 2]"))
    assert main(["predict", str(experiment), "--calibration", str(calibration_file)]) == 1
    assert "one calibration for the whole sweep" in capsys.readouterr().err


def test_against_a_session_each_figure_is_set_beside_what_it_measured(
    tmp_path, capsys, calibration_file
):
    from tests.made_sessions import write_session

    session = write_session(tmp_path / "made.session.sqlite")
    assert main(["predict", "--against", str(session), "--calibration", str(calibration_file)]) == 0
    text = capsys.readouterr().out
    assert "Predicted / measured (error)" in text
    row = next(line for line in text.splitlines() if line.startswith("│ np=1 ") and " / " in line)
    assert row.count(" / ") == 5 and "%)" in row  # the five compared figures, with errors
    assert main(["predict", str(session), "--against", str(session)]) == 1
    assert "--against predicts the session's own experiment" in capsys.readouterr().err
