"""On the real server: a calibration fitted from a recorded session predicts the next run,
which stores the prediction with its session and says it before it starts; ``show`` then
sets each compared figure's prediction beside what the run measured, with the error."""

from __future__ import annotations

import csv

import pytest

from workbench.cli.main import main
from workbench.engine.store import open_session

TINY = """name = "tiny"
[server]
slots = 2
ctx = 2048
[workload]
requests = 3
max_tokens = 8
warmup = 1
"""


@pytest.mark.server
def test_a_calibrated_run_stores_its_prediction_and_show_compares_it(
    recorded_session, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    assert main(["calibrate", "--from", str(recorded_session)]) == 0
    experiment = tmp_path / "tiny.toml"
    experiment.write_text(TINY)
    out = tmp_path / "results"
    assert main(["run", str(experiment), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    (session,) = out.glob("*.session.sqlite")
    with open_session(session) as opened:
        prediction = opened.predictions()
    assert prediction is not None and prediction.left_out == ()
    (config,) = prediction.configs
    assert config.label == "np=2"
    assert config.calibration.startswith(f"{recorded_session.name} on ")
    assert [r.repeat for r in config.requests] == [-1, 0, 0, 0]  # the warm-up, then 3
    said = printed.index(f"predicted: {prediction.headline()}")
    assert said < printed.index("server ready")  # said before the first server started

    assert main(["show", str(session)]) == 0
    shown = capsys.readouterr().out
    assert "Predicted / measured (error)" in shown
    row = next(line for line in shown.splitlines() if line.startswith("│ np=2 ") and " / " in line)
    assert row.count(" / ") == 5
    assert "%)" in shown  # each figure's error
    assert f"predicted from the calibration: {config.calibration}" in shown


@pytest.mark.server
def test_a_fit_of_four_short_requests_neither_replaces_the_probe_nor_says_decoding_is_free(
    tmp_path, capsys, monkeypatch
):
    """The issue's reproduction on the real server: a probe's calibration stored, a run of
    4 requests x 16 tokens, ``calibrate --from`` it, then ``predict`` of 1,500-token
    prompts. Before: the fit replaced the probe's file, read a cost below 0 and predicted
    decode tok/s ``-``, TPOT 0 and E2E equal to TTFT, without a word."""
    from tests.engine.predict.test_calibration import probe_like
    from workbench.engine.config.experiment import parse_experiment
    from workbench.engine.measure.hardware import fingerprint
    from workbench.engine.models.model_file import resolve_model
    from workbench.engine.predict.calibration import Calibration, fit_costs, load, save
    from workbench.engine.predict.run_prediction import Wanted
    from workbench.engine.server.discovery import find_server_binary

    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("COLUMNS", "1000")
    (config,) = parse_experiment("").configs()
    want = Wanted.of(config, fingerprint(find_server_binary(None).path), resolve_model("default"))
    fit = fit_costs(probe_like())
    probe = save(
        Calibration(
            fit.costs, fit.quality, want.machine, want.model, want.build, want.settings,
            "2026-12-04T18:00:00+00:00", "probe", coverage=fit.coverage, template_tokens=30,
        )
    )  # fmt: skip
    before = probe.read_bytes()

    out = tmp_path / "results"
    assert main(["run", "--requests", "4", "--max-tokens", "16", "--out", str(out)]) == 0
    (session,) = out.glob("*.session.sqlite")
    capsys.readouterr()
    assert main(["calibrate", "--from", str(session)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert probe.read_bytes() == before  # the probe's file is untouched
    beside = probe.with_name(probe.name.replace(".json", "-from-session.json"))
    weak = load(beside)
    d, p = weak.costs.decode, weak.costs.prefill
    assert min(d.base_ms, d.per_sequence_ms, d.per_context_token_ms, p.base_ms) >= 0
    assert "warning: fitted to 4 generating requests" in said
    assert f"predict uses {probe.name}: the probe's" in said

    asked = ["--slots", "1", "--requests", "4", "--max-tokens", "256", "--input-tokens", "1500"]
    table = tmp_path / "predicted.csv"
    assert main(["predict", *asked, "--calibration", str(beside), "--csv", str(table)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "warning: the calibration is doubtful: asked about prompts of up to 1,500" in said
    assert "`workbench calibrate` (the probe:" in said
    with table.open() as fh:
        (row,) = list(csv.DictReader(fh))
    assert float(row["decode_tok_s"]) > 0 and float(row["tpot_p50_ms"]) > 0
    assert float(row["e2e_p50_s"]) > float(row["ttft_p50_s"])

    assert main(["predict", *asked]) == 0
    assert f"calibration: {probe} (the probe's" in " ".join(capsys.readouterr().out.split())
