"""A run's prediction is stored with its session (schema 9) and read back as it was made:
each configuration's summary gives the same figures, its placed requests and the
configurations left out come back in order; a file older than 9, or a run that made none,
reads as none; a damaged one is one clear error."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import older_session
from tests.made_sessions import SWEEP, write_sweep
from workbench.engine.base.errors import SessionError
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import EventBus, ExperimentFinished, PredictionMade
from workbench.engine.figures.per_run import SUB_RECORDS
from workbench.engine.figures.predicted import RunPrediction
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.predict.costs import DecodeCost, PrefillCost, StepCosts
from workbench.engine.predict.run_prediction import config_prediction
from workbench.engine.predict.sweep import COMPARED, predict_experiment
from workbench.engine.store import SessionWriter, open_session, reopen_session

FLAT = StepCosts(DecodeCost(10.0, 0.0, 0.0), PrefillCost(0.0, 0.5))


def sweep_prediction() -> RunPrediction:
    """The made sweep's two configurations predicted (20-token prompts), and one left out."""
    experiment = parse_experiment(SWEEP.replace("warmup = 1", "warmup = 1\ninput_tokens = 20"))
    predicted = predict_experiment(experiment, FLAT, PromptSource(), template_tokens=0)
    configs = tuple(config_prediction(p, "probe on this machine, made today") for p in predicted)
    return RunPrediction(configs, ("np=4: no calibration for m.gguf with threads=4",))


def with_prediction(path: Path, prediction: RunPrediction) -> Path:
    """The session at ``path`` with ``prediction`` written in, as a run's writer writes it."""
    bus = EventBus()
    writer = SessionWriter(path, bus)
    writer.start()
    bus.publish(PredictionMade(prediction))
    bus.publish(ExperimentFinished("complete"))
    writer.join(10)
    assert writer.error is None
    return path


@pytest.fixture
def predicted_sweep(tmp_path) -> Path:
    return with_prediction(write_sweep(tmp_path / "sweep.session.sqlite"), sweep_prediction())


def test_a_prediction_reads_back_as_it_was_made(predicted_sweep):
    made = sweep_prediction()
    with open_session(predicted_sweep) as session:
        read = session.predictions()
    assert read == made
    one = read.configs[0]
    assert [one.summary.value(k) for k in COMPARED] == [
        made.configs[0].summary.value(k) for k in COMPARED
    ]
    assert [(r.repeat, r.index) for r in one.requests] == [(-1, 0), (0, 0), (0, 1), (0, 2)]


def test_a_run_that_made_none_and_an_older_file_read_as_none(tmp_path, predicted_sweep):
    with open_session(write_sweep(tmp_path / "none.session.sqlite")) as session:
        assert session.predictions() is None
    old = older_session(predicted_sweep, tmp_path, 8, "predictions")
    with open_session(old) as session:
        assert session.schema_version == 8 and session.predictions() is None
        assert len(session.summaries()) == 2


def test_a_resumed_run_keeps_the_prediction_made_before_its_first_configuration(
    predicted_sweep,
):
    reopen_session(predicted_sweep, [0, 1])
    with open_session(predicted_sweep) as session:
        assert session.configs == []
        assert session.predictions() == sweep_prediction()


@pytest.mark.parametrize(
    "damage",
    [
        'UPDATE predictions SET summary_json = replace(summary_json, \'"ok": 3\', \'"ok": "3"\')',
        "UPDATE predictions SET summary_json = '[1, 2]'",
        "UPDATE predictions SET summary_json = '{\"index\": 0'",
        "UPDATE predicted_requests SET sent_s = 'soon'",
    ],
)
def test_a_damaged_prediction_is_one_clear_error(tmp_path, predicted_sweep, damage):
    path = tmp_path / "damaged.session.sqlite"
    shutil.copy(predicted_sweep, path)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        assert conn.execute(damage).rowcount > 0
    with open_session(path) as session:
        with pytest.raises(SessionError, match="damaged content") as raised:
            session.predictions()
        assert len(session.summaries()) == 2  # the rest of the session still reads
    assert "\n" not in str(raised.value)


def test_a_prediction_is_read_within_bounds(predicted_sweep, monkeypatch):
    """A file can come from anyone: a prediction of more requests or bytes than any run
    makes is refused, not read whole."""
    from workbench.engine.store import reader

    monkeypatch.setattr(reader, "MAX_PREDICTED_REQUESTS", 7)  # the sweep's: 4 and 4
    with open_session(predicted_sweep) as session, pytest.raises(SessionError, match="over 7 "):
        session.predictions()
    monkeypatch.setattr(reader, "MAX_PREDICTED_REQUESTS", 8)
    monkeypatch.setattr(reader, "MAX_PREDICTION_BYTES", 1000)
    with open_session(predicted_sweep) as session, pytest.raises(SessionError, match="1,000 b"):
        session.predictions()


def _flat(run: dict) -> dict:
    """A repeat's summary as files before sub-records wrote it: every figure at the top."""
    flat = {k: v for k, v in run.items() if k not in SUB_RECORDS}
    for part in SUB_RECORDS:
        flat.update(run[part])
    return flat


def test_a_prediction_stored_before_sub_records_reads_back_the_same(tmp_path, predicted_sweep):
    """Schemas 9 to 11 kept each repeat's steady, reasoning, conversation, speculative and
    cross-check figures at the top of its summary: they read back into their sub-records."""
    path = tmp_path / "flat.session.sqlite"
    shutil.copy(predicted_sweep, path)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        for index, text in conn.execute("SELECT config_idx, summary_json FROM predictions"):
            stored = json.loads(text)
            stored["runs"] = [_flat(run) for run in stored["runs"]]
            assert stored["runs"] and "steady" not in stored["runs"][0]
            conn.execute(
                "UPDATE predictions SET summary_json = ? WHERE config_idx = ?",
                (json.dumps(stored), index),
            )
    with open_session(path) as session:
        assert session.predictions() == sweep_prediction()


def test_an_older_summary_reads_its_new_fields_at_their_defaults(tmp_path, predicted_sweep):
    """A summary written before a field was added lacks it, and one written before a field
    was taken out has a key no field has: both read, the one at its default (the made
    prediction's value, here)."""
    path = tmp_path / "older.session.sqlite"
    shutil.copy(predicted_sweep, path)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "UPDATE predictions SET summary_json = json_set(json_remove(summary_json, "
            "'$.users', '$.runs[0].speculative.spec_acceptance'), '$.gone', 1, '$.runs[0].gone', 2)"
        )
    with open_session(path) as session:
        assert session.predictions() == sweep_prediction()


@pytest.mark.parametrize(
    ("damage", "line"),
    [
        (
            "replace(summary_json, '\"ok\": 3', '\"ok\": true')",
            "a predicted summary: runs[0].ok must be a whole number, got True",
        ),
        ("json_set(summary_json, '$.runs', 'none')", "a predicted summary: runs must be a list"),
        ('replace(summary_json, \'"mean": {\', \'"mean": {"x": NaN, \')', "Out of range float"),
    ],
)
def test_a_damaged_summary_names_its_field(tmp_path, predicted_sweep, damage, line):
    path = tmp_path / "damaged.session.sqlite"
    shutil.copy(predicted_sweep, path)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        assert conn.execute(f"UPDATE predictions SET summary_json = {damage}").rowcount > 0
    with open_session(path) as session, pytest.raises(SessionError, match=re.escape(line)):
        session.predictions()
