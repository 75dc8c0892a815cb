"""``workbench calibrate``: fitted from a made session of known costs, stored where it is
told, and one clear line for what cannot be calibrated."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import pytest

from tests.engine.predict.test_calibration import COSTS, probe_like
from tests.made_sessions import Config, build_session, startup_facts
from workbench.cli.main import main
from workbench.engine.predict.calibration import load


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")


def made(path: Path, requests) -> Path:
    return build_session(path, "[server]\nslots = 8\n", [Config(requests, startup_facts(8, 8192))])


def test_from_a_session_it_fits_its_timings_and_says_so(tmp_path, capsys):
    session = made(tmp_path / "made.session.sqlite", probe_like())
    assert main(["calibrate", "--from", str(session), "--out", str(tmp_path / "cal")]) == 0
    out = capsys.readouterr().out
    assert "decode: 8.00 ms a step + 1.50 ms per sequence + 2.00 µs per context token" in out
    assert "prefill: 12.0 ms + 0.250 ms a token (4,000 tok/s)" in out
    assert "request overhead 3.0 ms" in out
    assert "prompt times within 0% (worst 0%) of 22 requests" in out
    (stored,) = (tmp_path / "cal").iterdir()
    assert f"stored in {stored}" in out
    calibration = load(stored)
    assert asdict(calibration.costs.decode) == pytest.approx(asdict(COSTS.decode), rel=1e-6)
    assert calibration.source == "made.session.sqlite"
    assert calibration.build == "version: 6123 (abc1234); built with cc 12.2.0"


def test_a_sweep_is_fitted_across_its_configurations_of_the_same_held_settings(
    sweep_session, tmp_path, capsys
):
    """The made sweep's two configurations differ only in slots, which a step's cost does
    not depend on: both are fitted (3 requests each)."""
    assert main(["calibrate", "--from", str(sweep_session), "--out", str(tmp_path)]) == 0
    assert "of 6 requests" in capsys.readouterr().out


def test_a_session_without_server_timings_is_one_line(tmp_path, capsys):
    session = made(
        tmp_path / "bare.session.sqlite", [replace(r, timings=None) for r in probe_like()]
    )
    assert main(["calibrate", "--from", str(session), "--out", str(tmp_path)]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "bare.session.sqlite has no request with the server's timings to fit" in line


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--model", "{tmp}/none.gguf"], "model file not found"),
        (["--slots", "1,2"], "calibrate holds one value of each setting"),
        (["--from", "{tmp}/none.session.sqlite"], "session file not found"),
    ],
)
def test_what_cannot_be_calibrated_is_one_line(tmp_path, capsys, args, said):
    argv = ["calibrate", *(a.format(tmp=tmp_path) for a in args), "--out", str(tmp_path)]
    assert main(argv) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert said in line and "Traceback" not in line


def test_configurations_of_other_held_settings_are_left_out(tmp_path, capsys):
    """A sweep of -b: each value costs otherwise, so only the first's requests are fitted."""
    toml = "[server]\nbatch_size = [256, 512]\n"
    requests = probe_like()
    session = build_session(
        tmp_path / "b.session.sqlite",
        toml,
        [Config(requests, startup_facts(1, 8192)), Config(requests[:4], startup_facts(1, 8192))],
    )
    assert main(["calibrate", "--from", str(session), "--out", str(tmp_path / "c")]) == 0
    assert "of 22 requests" in capsys.readouterr().out
    (stored,) = (tmp_path / "c").iterdir()
    assert load(stored).settings["batch_size"] == 256
