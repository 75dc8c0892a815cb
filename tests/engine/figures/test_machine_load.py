"""A busy machine: judged from what else used it, flagged wherever the figures appear, and
never vouched for."""

from __future__ import annotations

import dataclasses

from tests.made_machines import HOGGED, QUIET, machine_sweep
from tests.made_sessions import Config, build_session, burst, startup_facts
from workbench.engine.analysis.verdicts import INCONCLUSIVE, SUPPORTED, lab_verdicts
from workbench.engine.events import MachineLoadMeasured
from workbench.engine.figures.machine_load import (
    MachineLoad,
    describe,
    machine_busy_reason,
    machine_unknown_reason,
)
from workbench.engine.predict.sweep import against_rows
from workbench.engine.remote import wire
from workbench.engine.store import open_session


def test_a_quiet_machine_is_not_busy() -> None:
    assert machine_busy_reason(QUIET) is None
    assert machine_unknown_reason(QUIET) is None
    assert machine_busy_reason(None) is None  # not recorded: no flag, and no vouching either


def test_each_sign_of_a_busy_machine_is_a_reason() -> None:
    assert "other processes used 64% of the CPUs" in (machine_busy_reason(HOGGED) or "")
    signs = {
        "steal 20% of the CPUs": {"steal_s": 1.2},
        "swapped 8.0 MiB": {"swap_in_bytes": 4 * 2**20, "swap_out_bytes": 4 * 2**20},
        "memory pressure 50% of the time": {"memory_pressure_s": 1.5},
        "CPU throttled to 40% of its top frequency": {"cpu_freq_share": 0.4},
        "2 other process(es) on the GPU": {"gpu_other_processes": 2},
    }
    for words, change in signs.items():
        assert machine_busy_reason(dataclasses.replace(QUIET, **change)) == words


def test_an_external_servers_machine_is_unknown_never_quiet() -> None:
    elsewhere = dataclasses.replace(HOGGED, judged=False)
    assert machine_busy_reason(elsewhere) is None
    assert "unknown" in (machine_unknown_reason(elsewhere) or "")


def test_a_busy_configuration_is_flagged_and_its_verdict_not_supported(tmp_path) -> None:
    with open_session(machine_sweep(tmp_path / "quiet.session.sqlite", QUIET, QUIET)) as s:
        quiet = s.summaries()
    with open_session(machine_sweep(tmp_path / "busy.session.sqlite", QUIET, HOGGED)) as s:
        busy = s.summaries()
    assert [q.flags for q in quiet] == [[], []] and not quiet[1].trust_notes
    verdict = {v.hypothesis: v for v in lab_verdicts(quiet)}
    falls = "per-request decode speed falls as slots rise (shared memory bandwidth)"
    assert verdict[falls].verdict == SUPPORTED
    assert busy[0].flags == [] and busy[1].flags == ["busy machine"]
    assert busy[1].machine_busy == machine_busy_reason(HOGGED)
    assert busy[1].trust_notes == [
        f"busy machine: {busy[1].machine_busy} (not the server's speed alone)"
    ]
    judged = {v.hypothesis: v for v in lab_verdicts(busy)}[falls]
    assert judged.verdict == INCONCLUSIVE
    assert f"busy machine at np=2: {busy[1].machine_busy}" in judged.numbers
    # predict --against: a busy measurement is named beside its error.
    rows = against_rows(quiet, busy)
    assert [r[0] for r in rows] == ["np=1", "np=2 (busy machine when measured)"]


def test_an_external_servers_configuration_is_marked_unknown(tmp_path) -> None:
    elsewhere = dataclasses.replace(QUIET, judged=False)
    made = Config(burst(0, 3, slots=1, at_s=2.0), startup_facts(1, 2048), machine=elsewhere)
    path = build_session(
        tmp_path / "ext.session.sqlite",
        "[workload]\nrequests = 3\n",
        [made],
        base_url="http://10.0.0.5:8080",
    )
    with open_session(path) as s:
        (summary,) = s.summaries()
    assert summary.flags == ["machine unknown"]
    assert any("machine load unknown" in n for n in summary.trust_notes)


def test_the_machine_load_crosses_the_wire_checked() -> None:
    event = MachineLoadMeasured(1, 0, HOGGED)
    assert wire.decode(wire.encode(event)) == event
    bad = wire.encode(event)
    bad["data"]["load"]["other_cpu_s"] = "lots"
    try:
        wire.decode(bad)
    except wire.WireError as exc:
        assert "other_cpu_s" in str(exc)
    else:
        raise AssertionError("a wrong field crossed the wire")


def test_machine_load_fields_are_stored_whole(tmp_path) -> None:
    with open_session(machine_sweep(tmp_path / "busy.session.sqlite", QUIET, HOGGED)) as s:
        assert {r: o.machine for r, o in s.observations(1).items()} == {0: HOGGED}
    assert isinstance(HOGGED, MachineLoad)


def test_show_describes_each_figure_and_says_unknown_where_the_os_does_not() -> None:
    assert describe(HOGGED) == (
        "other processes 64% of 2 cores, steal 0%, load average 4.30, swap in/out unknown, "
        "memory stall unknown, CPU frequency unknown, other GPU processes unknown"
    )
    elsewhere = dataclasses.replace(HOGGED, judged=False, cpu_freq_share=0.9)
    assert "CPU frequency 90% of top" in describe(elsewhere)
    assert describe(elsewhere).endswith("(this machine's; the server's is unknown)")
