"""``workbench run --resume``: a sweep interrupted after its first configuration finishes in
the same session; what cannot be resumed says why."""

from __future__ import annotations

import contextlib
import csv
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from workbench.cli.main import main
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import ConfigFinished, EventBus
from workbench.engine.run.lifecycle import RunLifecycle
from workbench.engine.run.runner import ExperimentRunner, RunOptions
from workbench.engine.store import open_session

SWEEP = "name = 'resumed'\n[server]\nslots = [1, 2]\nctx = 2048\n[workload]\nrequests = 2\n"
SWEEP += "max_tokens = 4\nwarmup = 0\n"


def interrupted(out: Path) -> Path:
    """The sweep, stopped as soon as its first configuration finished."""
    bus = EventBus()
    runner = ExperimentRunner(parse_experiment(SWEEP), RunOptions(out), bus)
    finished = bus.subscribe(ConfigFinished)

    def stop_after_the_first() -> None:
        finished.queue.get(timeout=120)
        runner.cancel()

    stopper = threading.Thread(target=stop_after_the_first)
    stopper.start()
    result = RunLifecycle(runner).run()
    stopper.join()
    assert result.status == "cancelled"
    return result.session_path


@pytest.mark.server
def test_a_sweep_interrupted_after_its_first_configuration_completes(tmp_path, capsys):
    path = interrupted(tmp_path)
    with open_session(path) as session:
        assert session.status == "cancelled"
        first_requests = [r.index for r in session.records(0)]
        assert [c.status for c in session.configs] in (["ok"], ["ok", "cancelled"])
    assert main(["run", "--resume", str(path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "np=1" in out and "np=2" in out  # the results table holds both
    with open_session(path) as session:
        assert session.status == "complete"
        assert [(c.label, c.status) for c in session.configs] == [("np=1", "ok"), ("np=2", "ok")]
        assert [r.index for r in session.records(0)] == first_requests  # kept as it was
        second = [r.index for r in session.records(1)]
        assert len(second) == 2 and min(second) > max(first_requests)
        assert all(r.ok for r in session.records(1))
        notices = [n.text for n in session.notices()]
    assert "resumed: 1 finished configuration kept, 1 to run (np=2)" in notices
    with (tmp_path / "concurrency.csv").open() as fh:
        assert [row["label"] for row in csv.DictReader(fh)] == ["np=1", "np=2"]


def as_unfinished(session: Path, folder: Path, **changes: str) -> Path:
    copy = folder / session.name
    shutil.copy(session, copy)
    with contextlib.closing(sqlite3.connect(copy)) as conn, conn:
        conn.execute("UPDATE session SET status = 'cancelled'")
        conn.execute("UPDATE configs SET status = 'cancelled' WHERE idx = 1")
        for column, value in changes.items():
            conn.execute(f"UPDATE session SET {column} = ?", (value,))
    return copy


@pytest.mark.parametrize(
    ("argv", "changes", "message"),
    [
        ((), {"status": "complete"}, "is complete: every configuration finished"),
        (("--slots", "4"), {}, "--resume runs the session's own experiment"),
        (
            (),
            {"experiment_toml": "[workload]\nprompts = '/etc/passwd'\n"},
            "a path in a session is never opened",
        ),
        (
            (),
            {"experiment_toml": "[server]\nmodel = '/somewhere/else.gguf'\n"},
            "give the model again with --model",
        ),
        ((), {"mode": "external"}, "measured an external server: give --base-url"),
    ],
)
def test_what_cannot_be_resumed_says_why(sweep_session, tmp_path, capsys, argv, changes, message):
    path = as_unfinished(sweep_session, tmp_path, **changes)
    before = path.read_bytes()
    assert main(["run", "--resume", str(path), *argv]) == 1
    assert message in " ".join(capsys.readouterr().err.split())
    assert path.read_bytes() == before  # refused before anything was written


def test_a_session_of_an_older_schema_is_not_resumed_by_this_version(sweep_session, tmp_path):
    from workbench.engine.base.errors import SessionError
    from workbench.engine.store import reopen_session

    path = as_unfinished(sweep_session, tmp_path)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("PRAGMA user_version = 4")
    with pytest.raises(SessionError, match="resume it with the version that wrote it"):
        reopen_session(path, [1])


def test_reopening_deletes_the_rerun_configurations_rows_only(sweep_session, tmp_path):
    from workbench.engine.store import reopen_session

    path = as_unfinished(sweep_session, tmp_path)
    with open_session(path) as session:
        kept = session.records(0)
    assert reopen_session(path, [1]) == max(r.index for r in kept) + 1
    with open_session(path) as session:
        assert session.meta["status"] == "running"
        assert [c.index for c in session.configs] == [0]
        assert session.records(0) == kept and session.records(1) == []
        assert session.samples("process_samples", 1) == []
