"""packaging/make_screenshots.py: it makes every picture the documentation shows, and a
picture it makes is the real window at the size asked for."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.packaging.test_icons import png_size

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "make_screenshots", ROOT / "packaging" / "make_screenshots.py"
)
assert _spec is not None and _spec.loader is not None
make_screenshots = importlib.util.module_from_spec(_spec)
sys.modules["make_screenshots"] = make_screenshots  # its dataclasses look their module up
_spec.loader.exec_module(make_screenshots)

MADE = {s.name for s in (*make_screenshots.WINDOW_SHOTS, *make_screenshots.CHART_SHOTS)}


def shown_pictures() -> set[str]:
    """Every docs/*.png that README.md or a page of the site shows."""
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    found = set()
    for page in pages:
        for target in re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", page.read_text()):
            found.add(Path(target).name)
    return found


def test_the_script_makes_every_picture_the_docs_show() -> None:
    shown = shown_pictures()
    assert shown and shown <= MADE, shown - MADE
    assert {p.name for p in (ROOT / "docs").glob("*.png")} <= MADE  # none left behind


def test_each_run_a_picture_needs_is_one_the_script_makes() -> None:
    runs = {run.key for run in make_screenshots.RUNS}
    for shot in make_screenshots.WINDOW_SHOTS:
        assert shot.session == "demo" or shot.session in runs, shot.name
    for chart in make_screenshots.CHART_SHOTS:
        assert set(chart.needs) <= runs, chart.name


@pytest.mark.skipif(shutil.which("Xvfb") is None, reason="needs Xvfb (apt-get install xvfb)")
def test_a_picture_is_the_real_window_at_its_size(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "QT_QPA_PLATFORM"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "packaging" / "make_screenshots.py"), "--into",
         str(tmp_path), "--only", "workbench-1366x768-light.png", "--only",
         "gantt-export-slots.png"],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert png_size((tmp_path / "workbench-1366x768-light.png").read_bytes()) == (1366, 768)
    assert png_size((tmp_path / "gantt-export-slots.png").read_bytes()) == (1200, 800)
    assert "workbench-1366x768-light.png: 1366x768" in done.stdout
