"""The frozen app's entry point (packaging/launcher.py): the defaults it gives the CLI,
and ``-m`` for the engine's watchdog."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from workbench import __version__
from workbench.cli.run_commands import DEFAULT_EXPERIMENT

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "packaging" / "launcher.py"
_spec = importlib.util.spec_from_file_location("launcher", LAUNCHER)
assert _spec is not None and _spec.loader is not None
launcher = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(launcher)


def test_no_arguments_open_the_window_on_the_bundled_lab(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # started from the Finder: no experiments/ here
    argv = launcher.app_argv([], ROOT, tmp_path / "Documents")
    results = tmp_path / "Documents" / "Concurrency Workbench" / "results"
    assert argv == ["gui", "--out", str(results), "--experiment", str(ROOT / DEFAULT_EXPERIMENT)]
    assert (ROOT / DEFAULT_EXPERIMENT).is_file()  # where the spec puts experiments/


def test_given_arguments_are_kept(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    for argv in (
        ["gui", "--experiment", "mine.toml"],
        ["gui", "--experiment=mine.toml", "--autorun"],
        ["run", "mine.toml", "--out", "here"],
        ["--help"],
    ):
        assert launcher.app_argv(argv, ROOT, tmp_path) == argv


def test_the_default_experiment_where_it_is_found_stays_the_default(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)  # a source checkout: the relative default names a file
    assert launcher.app_argv(["gui"], tmp_path, tmp_path) == ["gui"]


def run_launcher(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(LAUNCHER), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_dash_m_runs_the_apps_own_modules():
    done = run_launcher("-m", "workbench.cli.main", "--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"workbench {__version__}")


def test_dash_m_refuses_other_modules():
    done = run_launcher("-m", "http.server")
    assert done.returncode == 2
    assert "only the app's own modules" in done.stderr
