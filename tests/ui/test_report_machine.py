"""The report's "Can these numbers be trusted?" never vouches for a busy machine, nor for
one whose load was not recorded."""

from __future__ import annotations

from tests.made_machines import HOGGED, QUIET, machine_sweep
from workbench.engine.store import open_session
from workbench.ui.exports.report import trust_lines


def test_the_report_never_vouches_for_a_busy_machine(tmp_path) -> None:
    with open_session(machine_sweep(tmp_path / "busy.session.sqlite", QUIET, HOGGED)) as s:
        lines = trust_lines(s)
    assert len(lines) == 1 and lines[0].startswith("np=2: busy machine: other processes used 64%")
    assert not any(line.startswith("every configuration") for line in lines)


def test_a_quiet_machine_is_vouched_for_only_where_it_was_measured(tmp_path) -> None:
    with open_session(machine_sweep(tmp_path / "quiet.session.sqlite", QUIET, QUIET)) as s:
        (line,) = trust_lines(s)
    assert line.endswith("; no other process busied the machine")
    with open_session(machine_sweep(tmp_path / "older.session.sqlite", QUIET, None)) as s:
        (line,) = trust_lines(s)
    assert "machine load not recorded for np=2" in line and "busied" not in line
