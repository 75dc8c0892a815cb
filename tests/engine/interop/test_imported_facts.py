"""An imported session says only what its file says: no server settings it never stated, the
file's model, and the file's date."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from tests.made_sessions import write_sweep
from workbench.cli.main import main
from workbench.engine.analysis.compare import compare_sessions
from workbench.engine.analysis.library import describe, scan
from workbench.engine.base.errors import ImportFileError
from workbench.engine.interop.formats import import_file
from workbench.engine.store import open_session

DATA = Path(__file__).parents[2] / "data" / "imports"
(VLLM_FILE,) = (DATA / "vllm").glob("*.json")
GUIDELLM = DATA / "guidellm" / "benchmarks.json"
AIPERF = DATA / "aiperf" / "concurrency1"
BIG_MODEL = "meta-llama/Llama-3.1-70B-Instruct"


def vllm_file(folder: Path, **changes) -> Path:
    doc = json.loads(VLLM_FILE.read_text()) | changes
    path = folder / "vllm-70b.json"
    path.write_text(json.dumps(doc))
    return path


HUB_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"


@pytest.mark.parametrize(
    ("path", "recorded", "model"),
    [
        # vLLM's "date" is a local time: no zone said, none added.
        (VLLM_FILE, "2026-11-30T10:15:00", HUB_NAME),
        # GuideLLM's first benchmark's start_time, epoch seconds.
        (GUIDELLM, "2026-11-30T20:58:08+00:00", "SmolLM2-135M-Instruct"),
        (AIPERF / "profile_export_aiperf.json", "2026-11-30T20:58:46", "SmolLM2-135M-Instruct"),
        (AIPERF / "profile_export.jsonl", "2026-11-30T20:58:46", "SmolLM2-135M-Instruct"),
    ],
)
def test_an_import_keeps_no_invented_server_settings_and_its_files_date(
    tmp_path, path, recorded, model
):
    with open_session(import_file(path, tmp_path)) as session:
        assert session.meta["created_at"] == recorded
        assert not session.managed
        for summary in session.summaries():
            assert (summary.slots, summary.ctx, summary.cont_batching) == (None, None, None)
    (info,) = scan([tmp_path])
    assert info.created_at == recorded
    assert info.model == model  # the model the file names
    assert info.backend == ""  # not known: the file does not say


def test_the_files_model_is_the_sessions_and_compare_warns_of_it(tmp_path):
    imported = import_file(vllm_file(tmp_path, model_id=BIG_MODEL), tmp_path)
    assert describe(imported).model == BIG_MODEL
    ours = write_sweep(tmp_path / "sweep.session.sqlite")
    with open_session(imported) as theirs, open_session(ours) as mine:
        comparison = compare_sessions([theirs, mine])
        assert theirs.summaries()[0].slots is None
    assert f"different models: {BIG_MODEL} vs SmolLM2-135M-Instruct.Q4_1 (default)" in (
        comparison.warnings
    )
    # Unknown slots align with no slot count: the import is a row of its own.
    assert comparison.labels == ["concurrency=2", "np=1", "np=2"]


def test_sessions_sort_by_when_they_ran_not_when_they_were_imported(tmp_path, capsys):
    old = import_file(vllm_file(tmp_path, date="20240102-030405"), tmp_path / "old")
    new = import_file(VLLM_FILE, tmp_path / "new")
    assert [i.path for i in scan([tmp_path])] == [new, old]
    assert main(["show", str(old)]) == 0
    shown = capsys.readouterr().out
    assert "2024-01-02T03:04:05" in shown
    assert "8192" not in shown  # no context the file never stated


def test_a_date_that_is_not_one_is_refused(tmp_path):
    with pytest.raises(
        ImportFileError, match=r"date must be a date as vLLM writes it .*, got 'last tuesday'"
    ):
        import_file(vllm_file(tmp_path, date="last tuesday"), tmp_path)


def test_sessions_of_different_zones_sort_by_the_moment_they_ran(tmp_path, monkeypatch):
    """A vLLM date has no zone (local time): in UTC+2, 10:15 there is 08:15 UTC, before a
    session recorded at 09:00 UTC, whatever the text would sort as."""
    monkeypatch.setenv("TZ", "Etc/GMT-2")  # POSIX's sign: two hours east of UTC
    time.tzset()
    try:
        local = import_file(vllm_file(tmp_path, date="20261130-101500"), tmp_path / "a")
        (tmp_path / "b").mkdir()
        utc = write_sweep(tmp_path / "b" / "sweep.session.sqlite")
        with sqlite3.connect(utc) as db:
            db.execute("UPDATE session SET created_at = '2026-11-30T09:00:00+00:00'")
        assert [i.path for i in scan([tmp_path])] == [utc, local]
    finally:
        monkeypatch.undo()
        time.tzset()
