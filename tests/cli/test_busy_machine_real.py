"""A run on the real server while a CPU hog holds both cores is flagged as measured on a busy
machine: in its session, in ``show``, and in the notice the run itself printed."""

from __future__ import annotations

import pytest

from tests.hog import cpu_hog
from workbench.cli.main import main
from workbench.engine.store import open_session


@pytest.mark.server
def test_a_run_beside_a_cpu_hog_is_flagged_busy(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    argv = ["run", "--slots", "1", "--requests", "4", "--max-tokens", "16", "--warmup", "0"]
    with cpu_hog(2):
        assert main([*argv, "--out", str(out)]) == 0
    ran = capsys.readouterr().out
    (path,) = out.glob("quick-*.session.sqlite")
    with open_session(path) as session:
        (summary,) = session.summaries()
        (observed,) = session.observations(0).values()
    assert observed.machine is not None and observed.machine.judged
    assert observed.machine.other_cpu_share > 0.25
    assert summary.flags == ["busy machine"]
    assert summary.machine_busy and "other processes used" in summary.machine_busy
    assert "busy machine (other processes used" in " ".join(ran.split())
    assert main(["show", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "np=1 [busy machine]" in shown
    assert "machine load, np=1 repeat 1: other processes " in shown
