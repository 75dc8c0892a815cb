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


def test_a_truncated_model_is_refused_before_any_server_starts(tmp_path, capsys, truncated_model):
    argv = ["calibrate", "--model", str(truncated_model), "--out", str(tmp_path / "cal")]
    assert main(argv) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "the data of tensor 'token_embd.weight' runs past the end of the file" in line
    assert not (tmp_path / "cal").exists()


def test_configurations_of_another_b_or_held_setting_are_left_out(tmp_path, capsys):
    """A sweep of -b: each value takes other chunks of a prompt a step, and one below -ub
    (-b 256 at the default 512) cuts the micro-batch down: only the first configuration at
    its -ub is fitted, and the calibration holds for every -b."""
    toml = "[server]\nbatch_size = [256, 1024, 2048]\n"
    requests = probe_like()
    session = build_session(
        tmp_path / "b.session.sqlite",
        toml,
        [
            Config(requests[:3], startup_facts(1, 8192)),
            Config(requests, startup_facts(1, 8192)),
            Config(requests[:4], startup_facts(1, 8192)),
        ],
    )
    assert main(["calibrate", "--from", str(session), "--out", str(tmp_path / "c")]) == 0
    assert "of 22 requests" in capsys.readouterr().out
    (stored,) = (tmp_path / "c").iterdir()
    found = load(stored)
    assert "batch_size" not in found.settings and "ubatch_size" not in found.settings
    # a session measures no second -ub: the fit holds at the one it ran at alone
    assert found.costs.ubatch_size == 512 and found.costs.micro_batch is None


def test_a_session_only_at_a_b_below_its_ub_is_refused(tmp_path, capsys):
    session = build_session(
        tmp_path / "b.session.sqlite",
        "[server]\nbatch_size = 64\n",
        [Config(probe_like(), startup_facts(1, 8192))],
    )
    assert main(["calibrate", "--from", str(session), "--out", str(tmp_path / "c")]) == 1
    assert "at a -b below its -ub" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_a_sessions_fit_is_stored_beside_the_probe_and_says_which_predict_uses(tmp_path, capsys):
    """The issue's way: a probe stored, then a fit from a session: the probe's file is
    untouched, the fit stored beside it, and the command says which one predict uses."""
    from tests.engine.predict.test_calibration_evidence import four_short

    cal = tmp_path / "cal"
    probe = made(tmp_path / "probe.session.sqlite", probe_like())
    assert main(["calibrate", "--from", str(probe), "--out", str(cal)]) == 0
    (fitted,) = cal.iterdir()
    as_probe = fitted.with_name(fitted.name.replace("-from-session", ""))
    fitted.write_text(fitted.read_text().replace('"probe.session.sqlite"', '"probe"'))
    fitted.rename(as_probe)
    before = as_probe.read_bytes()
    capsys.readouterr()

    session = made(tmp_path / "quick.session.sqlite", four_short())
    assert main(["calibrate", "--from", str(session), "--out", str(cal)]) == 0
    out = capsys.readouterr().out
    assert as_probe.read_bytes() == before
    (beside,) = [p for p in cal.iterdir() if p != as_probe]
    assert beside.name == as_probe.name.replace(".json", "-from-session.json")
    assert "warning: fitted to 4 generating requests" in out
    assert f"predict uses {as_probe.name}: the probe's" in out
    assert f"`predict --calibration {beside}` uses this fit" in " ".join(out.split())

    assert main(["calibrate", "--from", str(session), "--out", str(cal)]) == 0
    again = " ".join(capsys.readouterr().out.split())
    assert f"stored in {beside} (replacing the one from quick.session.sqlite made " in again
