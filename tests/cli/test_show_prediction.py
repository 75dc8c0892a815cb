"""``workbench show`` of a session that stored its prediction: each compared figure predicted
/ measured with the error, the calibration it came from, and what it left out; a damaged
prediction is one warning and the rest of the session is shown; ``export --predicted-csv``
writes the prediction as ``concurrency.csv``."""

from __future__ import annotations

import contextlib
import csv
import sqlite3

from tests.engine.store.test_predictions_stored import sweep_prediction, with_prediction
from tests.made_sessions import write_sweep
from workbench.cli.main import main
from workbench.engine.analysis.export import concurrency_columns


def predicted_sweep(tmp_path):
    return with_prediction(write_sweep(tmp_path / "sweep.session.sqlite"), sweep_prediction())


def test_show_prints_the_prediction_beside_what_was_measured(tmp_path, capsys):
    assert main(["show", str(predicted_sweep(tmp_path))]) == 0
    text = capsys.readouterr().out
    assert "Predicted / measured (error)" in text
    # np=1 of the made sweep measured TTFT p50 1.3 s; the flat costs predict 0.13 s
    row = next(line for line in text.splitlines() if line.startswith("│ np=1 ") and " / " in line)
    assert row.count(" / ") == 5 and "0.130 / 1.300" in row
    assert "(-90%)" in text
    assert "predicted from the calibration: probe on this machine, made today" in text
    assert "not predicted: np=4: no calibration for m.gguf with threads=4" in text


def test_a_session_without_a_prediction_shows_none(tmp_path, capsys):
    assert main(["show", str(write_sweep(tmp_path / "sweep.session.sqlite"))]) == 0
    assert "Predicted / measured" not in capsys.readouterr().out


def test_a_damaged_prediction_is_a_warning_and_the_rest_is_shown(tmp_path, capsys):
    path = predicted_sweep(tmp_path)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE predictions SET summary_json = '{\"runs\": 3}'")
    assert main(["show", str(path)]) == 0
    text = capsys.readouterr().out
    assert "warning:" in text and "damaged content" in text
    assert "Results" in text and "Predicted / measured" not in text


def test_export_writes_the_prediction_as_concurrency_csv(tmp_path, capsys):
    out = tmp_path / "predicted.csv"
    assert main(["export", str(predicted_sweep(tmp_path)), "--predicted-csv", str(out)]) == 0
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == concurrency_columns()
    assert [(r["label"], float(r["ttft_p50_s"])) for r in rows] == [("np=1", 0.13), ("np=2", 0.02)]
    plain = write_sweep(tmp_path / "plain.session.sqlite")
    assert main(["export", str(plain), "--predicted-csv", str(out)]) == 1
    err = capsys.readouterr().err
    assert "plain.session.sqlite stored no prediction" in err and len(err.splitlines()) == 1
