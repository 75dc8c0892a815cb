"""The Machine picker and a run on two machines against a real OpenSSH server (tests/sshd.py):
its aliases listed from the client config, the real checks (this machine's, and the far
agent's over SSH), an unknown key trusted through the question, a changed one refused, and
this machine beside ``wbtest`` on the real llama-server, stacked and compared."""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest
from PySide6.QtWidgets import QMessageBox

from tests.engine.remote.test_over_ssh import far_workbench
from tests.sshd import SshServer
from tests.ui.driving import click_until, run
from tests.ui.test_machines_window import ended
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.remote.ssh import ssh_config_hosts
from workbench.engine.store import open_session
from workbench.ui.controllers.hosts_controller import LOCAL, engine_machines
from workbench.ui.main_window import MainWindow

pytestmark = [pytest.mark.ssh, pytest.mark.timeout(300)]

SMALL = """
name = "pair"
[server]
slots = 2
ctx = 2048
[workload]
requests = 4
concurrency = 2
max_tokens = 12
warmup = 0
"""


@pytest.fixture
def ssh_window(qtbot, loop, tmp_path, monkeypatch, ssh_env: SshServer):
    """A window whose SSH hosts are the test server's config, its far workbench this
    checkout's."""
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    if "newbox" not in ssh_env.aliases:  # the server is the session's: named once
        ssh_env.unknown_alias("newbox")
        ssh_env.mismatch_alias("movedbox")
    machines = replace(
        engine_machines(shlex.split(far_workbench(tmp_path))),
        ssh_hosts=lambda: ssh_config_hosts(ssh_env.config),
    )
    win = MainWindow(tmp_path / "out", machines=machines)
    qtbot.addWidget(win)
    win.resize(1600, 900)
    win.show()
    yield win
    if win.isVisible():
        win.ask_stop_on_close = lambda: True
        win.close()
        run(loop, lambda: not win.running and not win.isVisible(), 60)
    win.shutdown()


def line(window, host: str) -> str:
    return window.form.machines.rows[host].line.text()


def checked(window, host: str) -> bool:
    shown = window.form.machines.rows[host].line
    return shown.isVisible() and shown.text() != "checking…" and not window.hosts.busy


def test_the_real_checks_and_keys(ssh_window, loop):
    picker = ssh_window.form.machines
    # the server is shared by the session's ssh tests: others may have added aliases of theirs
    mine = [r for r in picker.rows if r in (LOCAL, "wbtest", "newbox", "movedbox")]
    assert next(iter(picker.rows)) == LOCAL and mine == [LOCAL, "wbtest", "newbox", "movedbox"]
    picker.check_button.click()  # this machine, ticked at the first start
    run(loop, lambda: checked(ssh_window, LOCAL), 60)
    assert line(ssh_window, LOCAL).startswith("ok: ")
    picker.rows["wbtest"].box.setChecked(True)
    run(loop, lambda: checked(ssh_window, "wbtest"), 60)
    assert line(ssh_window, "wbtest").startswith("ok: "), line(ssh_window, "wbtest")
    picker.rows["movedbox"].box.setChecked(True)
    run(loop, lambda: "CHANGED" in line(ssh_window, "movedbox"), 60)
    assert picker.key_dialog is None and "movedbox" not in picker.ticked_hosts()
    picker.rows["newbox"].box.setChecked(True)
    run(loop, lambda: picker.key_dialog is not None, 60)
    assert "ED25519 SHA256:" in picker.key_dialog.text()
    picker.key_dialog.button(QMessageBox.StandardButton.Yes).click()
    run(loop, lambda: line(ssh_window, "newbox").startswith("ok: "), 60)
    assert picker.ticked_hosts() == [LOCAL, "wbtest", "newbox"]


@pytest.mark.server
def test_this_machine_and_one_over_ssh_run_stacked_and_compared(ssh_window, loop):
    ssh_window.form.load(parse_experiment(SMALL))
    ssh_window.form.machines.rows["wbtest"].box.setChecked(True)
    statuses: list[str] = []
    ssh_window.run_finished.connect(statuses.append)
    click_until(loop, ssh_window.run_button, lambda: ended(ssh_window, statuses), 240)
    assert statuses == ["complete"], ssh_window.banner.text()
    here, there = ssh_window.stack.panes
    assert here.title.text().startswith("This machine  ·  ")
    assert there.title.text().startswith("wbtest  ·  ")
    assert here.gantt.bar_count() == there.gantt.bar_count() == 4
    first, *others = ssh_window.stack.x_range()  # linked: one axis (to a float's rounding)
    assert all(other == pytest.approx(first, rel=1e-9) for other in others)
    paths = [r.session for r in ssh_window.stack_runs.runs]
    with open_session(paths[1]) as session:
        origin = session.remote_origin()
    # The far clock's offset was measured (one machine here: about nothing) and used.
    assert origin.host == "wbtest" and abs(origin.clock_offset_ns) < 50_000_000
    (compare,) = ssh_window.compare_windows
    assert compare.paths == paths
