"""The report of a session that stored its prediction has the table ``workbench show``
prints: each compared figure predicted / measured with the error, the calibration it came
from and what it left out; a session without one has no such section."""

from __future__ import annotations

from tests.engine.store.test_predictions_stored import sweep_prediction, with_prediction
from tests.made_sessions import write_sweep
from workbench.engine.store import open_session
from workbench.ui.exports.report import ChartOptions, write_report

SMALL = ChartOptions(400, 250, 72)


def test_the_report_sets_the_prediction_beside_what_was_measured(tmp_path, qapp):
    predicted = with_prediction(write_sweep(tmp_path / "p.session.sqlite"), sweep_prediction())
    plain = write_sweep(tmp_path / "plain.session.sqlite")
    with open_session(predicted) as one, open_session(plain) as other:
        report = write_report([one, other], tmp_path / "report", SMALL)
    md = report.read_text()
    section = md[md.index("## Predicted / measured (error)") : md.index("## Definitions")]
    assert section.count("### ") == 1  # the session without a prediction has none
    assert "| config | TTFT p50 s | TTFT p90 s | E2E p50 s | decode tok/s | agg tok/s |" in section
    assert "| np=1 | 0.130 / 1.300 (-90%) |" in section
    assert "- predicted from the calibration: probe on this machine, made today" in section
    assert "- not predicted: np=4: no calibration for m.gguf with threads=4" in section
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<h2>Predicted / measured (error)</h2>" in page
    assert "<td>0.130 / 1.300 (-90%)</td>" in page


def test_a_report_without_predictions_has_no_such_section(tmp_path, qapp):
    with open_session(write_sweep(tmp_path / "plain.session.sqlite")) as session:
        report = write_report([session], tmp_path / "report", SMALL)
    assert "Predicted / measured" not in report.read_text()
