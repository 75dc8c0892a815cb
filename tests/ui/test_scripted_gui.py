"""``workbench gui`` run by a script, as a process: a failure's reason reaches stderr (nobody
may be there to read the banner), and a screenshot with nothing to run still ends."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)


def gui(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The window as a script starts it: offscreen, its output folder in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "workbench", "gui", "--out", str(cwd / "out"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("garbage.session.sqlite", "is not a workbench session"),
        ("missing.session.sqlite", "session file not found"),
        (".", "is a folder, not a session file"),
    ],
)
def test_a_session_that_does_not_open_says_why_on_stderr(tmp_path, name, said):
    (tmp_path / "garbage.session.sqlite").write_bytes(b"\x17" * 3000)
    done = gui("--session", tmp_path / name, "--quit-when-done", cwd=tmp_path)
    assert done.returncode == 1
    (line,) = error_lines(done.stderr)
    assert said in line and done.stdout == ""


def test_an_experiment_that_does_not_load_says_why_on_stderr(tmp_path):
    wrong = tmp_path / "wrongtype.toml"
    wrong.write_text('name = "w"\n[server]\nslots = "two"\n')
    done = gui("--experiment", wrong, "--autorun", "--quit-when-done", cwd=tmp_path)
    assert done.returncode == 1
    said = f"error: {wrong}: [server] slots must be a whole number, got 'two'"
    assert error_lines(done.stderr) == [said]
    assert not (tmp_path / "out").exists()  # nothing ran


def test_a_truncated_model_is_refused_before_any_server_starts(tmp_path, truncated_model):
    experiment = tmp_path / "trunc.toml"
    experiment.write_text(f'name = "t"\n[server]\nmodel = "{truncated_model}"\n')
    done = gui("--experiment", experiment, "--autorun", "--quit-when-done", cwd=tmp_path)
    assert done.returncode == 1
    (line,) = error_lines(done.stderr)
    assert "the data of tensor 'token_embd.weight' runs past the end of the file" in line
    assert not (tmp_path / "out").exists()  # no session, no server log


def test_a_screenshot_with_nothing_to_run_is_of_the_window_as_it_opens(tmp_path):
    """Without --autorun no run would ever end it: the process waited for ever."""
    small = tmp_path / "small.toml"
    small.write_text('name = "small"\n[server]\nslots = 1\nctx = 512\n')
    shot = tmp_path / "x.png"
    done = gui(
        "--experiment",
        small,
        "--screenshot",
        shot,
        "--quit-when-done",
        "--size",
        "1366x768",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1366, 768)
    assert not list(tmp_path.glob("out/*.session.sqlite"))  # nothing was run
