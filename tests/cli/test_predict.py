"""``workbench predict``: an experiment's figures from a calibration of this machine, printed
as the results table and written as ``concurrency.csv``; a calibration of another machine, or
none, is one line, never a prediction."""

from __future__ import annotations

import csv
from dataclasses import replace

import pytest

from workbench.cli.main import main
from workbench.engine.analysis.export import concurrency_columns
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.measure.hardware import fingerprint
from workbench.engine.models.model_file import resolve_model
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


def test_one_calibration_file_is_refused_for_a_sweep_over_what_it_holds(
    tmp_path, capsys, calibration_file
):
    experiment = tmp_path / "e.toml"
    experiment.write_text(EXPERIMENT.replace("ctx = 4096", "ctx = 4096\nthreads = [1, 2]"))
    assert main(["predict", str(experiment), "--calibration", str(calibration_file)]) == 1
    err = capsys.readouterr().err
    assert "--calibration holds one model and settings" in err and len(err.splitlines()) == 1


THREADS = EXPERIMENT.replace("slots = [1, 2]", "slots = 2\nthreads = [1, 2]")


def stored_for(threads: int, decode_ms: float) -> Calibration:
    """This machine's calibration of the default model with ``threads``, stored where
    ``predict`` looks (the test's WORKBENCH_CONFIG_DIR)."""
    from workbench.engine.predict.run_prediction import Wanted

    config = next(c for c in parse_experiment(THREADS).configs() if c.server.threads == threads)
    binary = find_server_binary(None).path
    wanted = Wanted.of(config, fingerprint(binary), resolve_model("default"))
    made = Calibration(
        StepCosts(DecodeCost(decode_ms, 0.0, 0.0), PrefillCost(0.0, 0.5)),
        FitQuality(1, 0.0, 0.0, 1, 0.0, 0.0),
        wanted.machine, wanted.model, wanted.build, wanted.settings,
        "2026-12-02T03:00:00+00:00", f"probe with {threads} threads", template_tokens=30,
    )  # fmt: skip
    save(made)
    return made


@pytest.fixture
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))


def test_a_sweep_over_held_settings_is_predicted_each_with_its_own_calibration(
    tmp_path, capsys, config_dir
):
    stored_for(1, 20.0)
    stored_for(2, 10.0)
    experiment = tmp_path / "e.toml"
    experiment.write_text(THREADS)
    out = tmp_path / "predicted.csv"
    assert main(["predict", str(experiment), "--csv", str(out)]) == 0
    text = capsys.readouterr().out
    assert "calibration of threads=1:" in text and "calibration of threads=2:" in text
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    # Both 100-token prompts in one 100 ms step, then 4 more tokens: 20 ms a step at 1
    # thread, 10 ms at 2.
    assert [float(r["e2e_p50_s"]) for r in rows] == pytest.approx([0.18, 0.14])


def test_a_configuration_without_its_calibration_is_named_in_one_line(tmp_path, capsys, config_dir):
    stored_for(1, 20.0)
    experiment = tmp_path / "e.toml"
    experiment.write_text(THREADS)
    assert main(["predict", str(experiment)]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "threads=2: no calibration for SmolLM2-135M-Instruct.Q4_1.gguf with threads=2" in err
    assert "threads=1" not in err and "--probe" in err


def test_with_probe_each_missing_calibration_is_measured_once(
    tmp_path, capsys, config_dir, monkeypatch
):
    from workbench.cli import predict_commands

    stored_for(1, 20.0)
    probed = []

    def probe_now(binary, model, settings, console):
        probed.append(settings.threads)
        return stored_for(settings.threads, 10.0)

    monkeypatch.setattr(predict_commands, "probe_now", probe_now)
    experiment = tmp_path / "e.toml"
    experiment.write_text(THREADS.replace("slots = 2", "slots = [2, 4]"))
    assert main(["predict", str(experiment), "--probe"]) == 0
    assert probed == [2]  # np=2 and np=4 at 2 threads share one calibration
    text = capsys.readouterr().out
    assert "np=2 threads=2: no stored calibration for threads=2" in text


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


@pytest.mark.parametrize("text", ["{}", '{"name": "an experiment", "server": {"slots": 2}}'])
def test_a_json_that_is_no_calibration_is_one_clear_line(tmp_path, capsys, text):
    given = tmp_path / "other.json"
    given.write_text(text)
    experiment = tmp_path / "e.toml"
    experiment.write_text(EXPERIMENT)
    assert main(["predict", str(experiment), "--calibration", str(given)]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.endswith(
        "--calibration: other.json: not a calibration (it has no version and costs: "
        "`workbench calibrate` makes one)"
    )


def test_it_names_the_file_it_used_and_why(tmp_path, capsys, config_dir, monkeypatch):
    """The probe's file before a session's fit of the same settings, each named."""
    monkeypatch.setenv("COLUMNS", "1000")
    fitted = stored_for(2, 10.0)
    probe = save(replace(fitted, source="probe"))
    experiment = tmp_path / "e.toml"
    experiment.write_text(THREADS.replace("threads = [1, 2]", "threads = 2"))
    assert main(["predict", str(experiment)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"calibration: {probe} (the probe's: it measured each kind of cost" in text
    assert "-from-session.json" not in text


def test_a_doubtful_calibration_is_said_so_above_the_table(tmp_path, capsys, calibration_file):
    """The fixture's calibration was fitted to one request, and spans nothing stored."""
    experiment = tmp_path / "e.toml"
    experiment.write_text(EXPERIMENT)
    assert main(["predict", str(experiment), "--calibration", str(calibration_file)]) == 0
    text = capsys.readouterr().out
    warning = text.index("warning: the calibration is doubtful: fitted to 1 generating requests")
    assert warning < text.index("from a doubtful calibration (the warning above)")
