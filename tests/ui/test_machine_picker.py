"""The Machine picker: this machine, the SSH config's hosts and hosts added by hand, ticks
remembered; each host's check said in a line (ok, or its problems); an unknown key is a
question with its fingerprints, a changed key an error and never a question."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field, replace

import pytest
from PySide6.QtWidgets import QMessageBox

from tests.ui.driving import run
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.preferences import load_preferences
from workbench.engine.remote.host_check import GIB
from workbench.engine.remote.protocol import HostFacts
from workbench.engine.remote.ssh import HostKey
from workbench.ui.controllers.hosts_controller import (
    LOCAL,
    HostFunctions,
    HostsController,
    engine_machines,
    machine_label,
)
from workbench.ui.controllers.tasks import Tasks
from workbench.ui.panels.machine_picker import MachinePicker
from workbench.ui.theme.qt_theme import signal_color


def facts(hostname: str = "gpubox", problems: tuple[str, ...] = ()) -> HostFacts:
    return HostFacts(
        hostname=hostname,
        workbench_version="0.9.0",
        protocol=1,
        os="Linux",
        server_binary="/usr/bin/llama-server",
        server_found_by="PATH",
        model="/m/qwen.gguf",
        model_bytes=GIB,
        gpus=("NVIDIA H200 (139 GiB)",),
        ram_bytes=128 * GIB,
        free_memory_bytes=100 * GIB,
        problems=problems,
    )


FINGERPRINT = "ED25519 SHA256:kX2gZbpkDb8/ed25519"


def host_key(known: bool, changed: bool = False) -> HostKey:
    return HostKey("gpubox", "10.0.0.7", 22, known, changed, (FINGERPRINT,), "ssh gpubox true")


@dataclass
class Hosts:
    """Doubles of the engine's host functions: what each host answers, and what was asked."""

    keys: dict[str, HostKey] = field(default_factory=dict)
    answers: dict[str, HostFacts | WorkbenchError] = field(default_factory=dict)
    asked: list[tuple[str, str | None]] = field(default_factory=list)
    accepted: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    def check_host(self, host, model, server_bin, remote_command):
        self.asked.append((host, model))
        answer = self.answers[host]
        if isinstance(answer, WorkbenchError):
            raise answer
        return answer

    def host_key_status(self, host):
        return self.keys.get(host, host_key(known=True))

    def accept_host_key(self, host, fingerprints):
        self.accepted.append((host, fingerprints))
        self.keys[host] = host_key(known=True)

    def functions(self) -> HostFunctions:
        return HostFunctions(self.check_host, self.host_key_status, self.accept_host_key)


@pytest.fixture(autouse=True)
def own_preferences(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))


@pytest.fixture
def picked(qtbot, loop):
    """A picker with two SSH aliases, attached to a controller of doubles."""
    doubles = Hosts()
    tasks = Tasks()
    picker = MachinePicker(["gpubox", "mac"])
    qtbot.addWidget(picker)
    controller = HostsController(tasks, doubles.functions())
    picker.attach(controller)
    yield picker, doubles, controller
    run(loop, lambda: not tasks, 10)


def line(picker: MachinePicker, host: str) -> tuple[str, str]:
    shown = picker.rows[host].line
    return shown.text(), shown.styleSheet()


def test_the_picker_lists_this_machine_then_the_config_hosts_and_remembers_ticks(qtbot):
    picker = MachinePicker(["gpubox", "mac", "gpubox"])
    qtbot.addWidget(picker)
    assert list(picker.rows) == [LOCAL, "gpubox", "mac"]
    assert picker.rows[LOCAL].box.text() == "This machine"
    assert picker.rows[LOCAL].model is None and picker.rows["mac"].model is not None
    assert picker.ticked_hosts() == [LOCAL]  # the first start: this machine alone
    picker.rows["mac"].box.setChecked(True)
    picker.rows[LOCAL].box.setChecked(False)
    again = MachinePicker(["gpubox", "mac"])  # a new window
    qtbot.addWidget(again)
    assert again.ticked_hosts() == ["mac"]
    assert load_preferences()[0].machines_ticked == ("mac",)


def test_a_host_added_by_hand_is_listed_ticked_and_remembered(qtbot):
    picker = MachinePicker([])
    qtbot.addWidget(picker)
    picker.dest.setText("  me@127.0.0.1 ")
    picker.add_typed()
    assert list(picker.rows) == [LOCAL, "me@127.0.0.1"]
    assert picker.ticked_hosts() == [LOCAL, "me@127.0.0.1"]
    assert picker.dest.text() == "" and picker.error.isHidden()
    again = MachinePicker([])
    qtbot.addWidget(again)
    assert list(again.rows) == [LOCAL, "me@127.0.0.1"]
    assert again.ticked_hosts() == [LOCAL, "me@127.0.0.1"]


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("-oProxyCommand=touch /tmp/x", "cannot start with '-'"),
        ("two\tw", "no spaces or control characters"),
        ("", "is empty"),
    ],
)
def test_a_dest_that_is_no_host_is_refused_with_its_reason(qtbot, typed, said):
    picker = MachinePicker([])
    qtbot.addWidget(picker)
    picker.dest.setText(typed)
    picker.add_typed()
    assert list(picker.rows) == [LOCAL]
    assert said in picker.error.text() and not picker.error.isHidden()
    assert load_preferences()[0].machines == ()


def test_a_ticked_host_is_checked_and_its_line_says_ok_or_each_problem(picked, loop):
    picker, doubles, _ = picked
    doubles.answers["gpubox"] = facts()
    doubles.answers["mac"] = facts("mac", ("no llama-server on PATH", "no model /m/x.gguf"))
    picker.rows["mac"].model.setText("/m/x.gguf")
    picker.rows["gpubox"].box.setChecked(True)  # a tick checks the host at once
    picker.rows["mac"].box.setChecked(True)
    run(loop, lambda: len(doubles.asked) == 2 and "checking" not in line(picker, "mac")[0], 10)
    run(loop, lambda: "checking" not in line(picker, "gpubox")[0], 10)
    assert sorted(doubles.asked) == [("gpubox", None), ("mac", "/m/x.gguf")]
    text, style = line(picker, "gpubox")
    assert text == "ok: gpubox, workbench 0.9.0, NVIDIA H200 (139 GiB), 100.0 GiB free"
    assert picker.rows["gpubox"].line.toolTip() == (  # the CLI's whole line
        "gpubox: workbench 0.9.0 on gpubox, /usr/bin/llama-server (PATH), qwen.gguf, "
        "NVIDIA H200 (139 GiB), 100.0 GiB free"
    )
    assert signal_color("ok").name() in style
    text, style = line(picker, "mac")
    assert text == "no llama-server on PATH\nno model /m/x.gguf"
    assert signal_color("error").name() in style


def test_the_check_button_checks_every_ticked_host_and_says_a_failure(picked, loop):
    picker, doubles, _ = picked
    doubles.answers[LOCAL] = facts("here")
    doubles.answers["gpubox"] = WorkbenchError("gpubox: ssh: Could not resolve hostname")
    picker.rows["gpubox"].box.blockSignals(True)  # ticked without its own check
    picker.rows["gpubox"].box.setChecked(True)
    picker.rows["gpubox"].box.blockSignals(False)
    picker.check_button.click()
    run(loop, lambda: all("checking" not in line(picker, h)[0] for h in (LOCAL, "gpubox")), 10)
    assert {host for host, _ in doubles.asked} == {LOCAL, "gpubox"}
    assert line(picker, LOCAL)[0].startswith("ok: here, workbench 0.9.0, ")
    text, style = line(picker, "gpubox")
    assert text == "gpubox: ssh: Could not resolve hostname"
    assert signal_color("error").name() in style


@pytest.mark.parametrize("trusted", [True, False])
def test_an_unknown_key_is_a_question_showing_its_fingerprint(picked, loop, trusted):
    picker, doubles, _ = picked
    doubles.keys["gpubox"] = host_key(known=False)
    doubles.answers["gpubox"] = facts()
    picker.rows["gpubox"].box.setChecked(True)
    run(loop, lambda: picker.key_dialog is not None, 10)
    dialog = picker.key_dialog
    assert dialog.windowTitle() == "Trust this host?"
    assert FINGERPRINT in dialog.text() and "Trust this host?" in dialog.text()
    assert doubles.asked == []  # nothing runs on a host before its key is trusted
    answer = QMessageBox.StandardButton.Yes if trusted else QMessageBox.StandardButton.No
    dialog.button(answer).click()
    if trusted:
        run(loop, lambda: line(picker, "gpubox")[0].startswith("ok: gpubox, workbench"), 10)
        assert doubles.accepted == [("gpubox", (FINGERPRINT,))]
        assert picker.ticked_hosts() == [LOCAL, "gpubox"]
    else:
        assert doubles.accepted == [] and doubles.asked == []
        assert picker.ticked_hosts() == [LOCAL]
        assert "not trusted" in line(picker, "gpubox")[0]


def test_a_changed_key_is_an_error_and_never_a_question(picked, loop):
    picker, doubles, controller = picked
    doubles.keys["gpubox"] = host_key(known=True, changed=True)
    picker.rows["gpubox"].box.setChecked(True)
    run(loop, lambda: "has CHANGED since it was trusted" in line(picker, "gpubox")[0], 10)
    assert picker.key_dialog is None
    assert doubles.asked == [] and doubles.accepted == []
    assert picker.ticked_hosts() == [LOCAL]
    assert signal_color("error").name() in line(picker, "gpubox")[1]
    run(loop, lambda: not controller.busy, 10)


def test_a_machine_is_labelled_by_its_host_name_and_gpu():
    assert machine_label(LOCAL, None) == "This machine"
    label = machine_label("gpubox", facts("gpubox-01"))
    assert label == "gpubox  ·  gpubox-01  ·  NVIDIA H200 (139 GiB)"
    cpu = machine_label(LOCAL, replace(facts("here"), gpus=()))
    assert cpu == "This machine  ·  here  ·  CPU only"


def test_this_machine_s_real_check_says_ok_and_a_missing_model_in_red(qtbot, loop, model_path):
    tasks = Tasks()
    picker = MachinePicker([])
    qtbot.addWidget(picker)
    controller = HostsController(tasks, engine_machines().functions)
    picker.attach(controller)
    controller.check(LOCAL, str(model_path))
    run(loop, lambda: LOCAL in controller.facts and not tasks, 30)
    text, style = line(picker, LOCAL)
    assert text.startswith(f"ok: {platform.node()}, workbench ") and text.endswith(" GiB free")
    assert signal_color("ok").name() in style
    controller.check(LOCAL, str(model_path.parent / "not-there.gguf"))
    run(loop, lambda: not controller.busy and not tasks, 30)
    text, style = line(picker, LOCAL)
    assert "not-there.gguf" in text and signal_color("error").name() in style
