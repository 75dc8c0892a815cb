"""On the real server: a calibration fitted from a recorded session predicts the next run,
which stores the prediction with its session and says it before it starts; ``show`` then
sets each compared figure's prediction beside what the run measured, with the error."""

from __future__ import annotations

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
