"""Running ``workbench run`` as a child process and watching its session fill up, for the
tests that signal or kill the workbench itself."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Progress:
    session: Path
    finished_ok: int
    server_pid: int


def start_run(
    experiment_text: str, tmp_path: Path, *extra: str
) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """Start ``workbench run`` on an experiment (with ``extra`` options); returns the process,
    its out dir and its log."""
    experiment = tmp_path / "experiment.toml"
    experiment.write_text(experiment_text)
    out, log = tmp_path / "out", tmp_path / "output.txt"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workbench", "run", str(experiment), "--out", str(out), *extra],
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    return proc, out, log


def _progress(out: Path) -> Progress | None:
    sessions = list(out.glob("*.session.sqlite"))
    if not sessions:
        return None
    # Read-only and closed at once: a connection left to the garbage collector (an error's
    # traceback keeps it) closes later, and if it is the last one on the file, SQLite folds
    # the WAL into it, after the run was killed, when the test checks nothing writes.
    uri = sessions[0].resolve().as_uri() + "?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=1)) as conn:
            done = conn.execute("SELECT count(*) FROM requests WHERE ok = 1").fetchone()[0]
            row = conn.execute("SELECT pid FROM configs WHERE pid IS NOT NULL").fetchone()
    except sqlite3.OperationalError:  # the writer has not created the tables yet
        return None
    return Progress(sessions[0], done, row[0]) if row else None


def wait_for_finished_requests(
    proc: subprocess.Popen[bytes], out: Path, log: Path, count: int, timeout_s: float = 120
) -> Progress:
    """Poll the session until ``count`` requests finished OK (the run keeps going)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        progress = _progress(out)
        if progress is not None and progress.finished_ok >= count:
            return progress
        time.sleep(0.1)
    raise AssertionError(f"no {count} finished requests within {timeout_s} s: {log.read_text()}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
