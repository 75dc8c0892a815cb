"""Choosing a model and a llama-server without a terminal: the dialogs list what is on the
machine, refuse what cannot be used, and remember the choice."""

from __future__ import annotations

import os

import pytest

from tests.engine.models.test_model_finder import write_gguf
from tests.engine.server.test_binary_choices import script
from tests.ui.driving import run
from workbench.engine.config.preferences import load_preferences
from workbench.engine.server.binary_choices import PINNED
from workbench.engine.server.discovery import find_server_binary
from workbench.ui.panels.experiment_form import ExperimentForm
from workbench.ui.panels.pickers import binary_dialog


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A home folder with one model in llama.cpp's cache and a broken one in LM Studio's."""
    home = tmp_path / "home"
    write_gguf(home / ".cache" / "llama.cpp" / "tiny-q8.gguf", "qwen2", 7, 4096)
    broken = home / ".lmstudio" / "models" / "x" / "broken.gguf"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not a model" * 20)
    monkeypatch.setenv("HOME", str(home))
    for name in ("HF_HUB_CACHE", "HF_HOME", "LLAMA_CACHE", "OLLAMA_MODELS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    return home


def test_the_model_picker_fills_the_form_and_remembers(machine, qtbot, loop):
    form = ExperimentForm()
    qtbot.addWidget(form)
    field = form.schema[("server", "model")]
    form._pick_file(field, form.fields[("server", "model")])
    picker = form.picker
    run(loop, lambda: picker.rows, 30)
    names = [row.cells[0] for row in picker.rows]
    assert names[0] == "default" and "tiny-q8.gguf" in names and "x/broken.gguf" in names
    tiny = picker.rows[names.index("tiny-q8.gguf")]
    assert tiny.cells[1:] == ("llama.cpp", tiny.cells[2], "qwen2", "Q8_0", "4,096")
    assert "found 2 usable of 3" in picker.status.text()
    assert picker.take(names.index("x/broken.gguf")) is False  # says why, cannot be taken
    assert picker.take(names.index("tiny-q8.gguf")) is True
    assert form.fields[("server", "model")].text() == tiny.value
    assert load_preferences()[0].model == tiny.value
    form._pick_file(field, form.fields[("server", "model")])  # opened again: it is selected
    again = form.picker
    run(loop, lambda: again.rows, 30)
    assert again.table.currentRow() == names.index("tiny-q8.gguf")
    assert again.use_button.isEnabled()
    again.reject()


def test_the_binary_dialog_offers_what_is_found_and_remembers_it(
    machine, tmp_path, qtbot, loop, monkeypatch
):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script(bin_dir / "llama-server", "echo 'version: 7000 (feedbee)'")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    dialog = binary_dialog()
    qtbot.addWidget(dialog)
    run(loop, lambda: dialog.rows, 30)
    assert dialog.rows[0].how == "PATH"
    assert dialog.rows[0].cells[1] == "version: 7000 (feedbee)"
    plain = tmp_path / "not-a-program"
    plain.write_text("x")
    assert loop.run_until_complete(dialog.take_file(str(plain))) is False
    assert "is not an executable file" in dialog.status.text()
    pinned = [row.how for row in dialog.rows].index(PINNED)
    assert dialog.take(pinned) is True
    remembered = load_preferences()[0]
    assert (remembered.server_bin, remembered.server_bin_found_by) == (
        dialog.rows[pinned].value,
        PINNED,
    )


def test_a_run_without_a_binary_offers_the_choice(window, loop, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    window.runs.server_bin = str(tmp_path / "no-llama-server")
    window.form.load_file("experiments/slots-1-2-4.toml")
    missing: list[bool] = []
    window.runs.binary_missing.connect(lambda: missing.append(True))
    window.start_run()
    run(loop, lambda: missing and not window.running, 30)
    assert "does not exist" in window.banner.text()
    chooser = window.binary_chooser
    assert chooser is not None and chooser.isVisible()
    run(loop, lambda: chooser.rows, 30)
    pinned = [row.how for row in chooser.rows].index(PINNED)
    assert chooser.take(pinned)
    assert window.runs.server_bin is None  # the missing --server-bin no longer comes first
    assert load_preferences()[0].server_bin == chooser.rows[pinned].value
    found = find_server_binary()  # what the next run uses
    assert (found.path, found.found_by) == (
        chooser.rows[pinned].value,
        f"remembered choice ({PINNED})",
    )
    assert "Press Run again" in window.banner.text()


def test_the_server_panel_says_which_binary_and_how_it_was_found(qtbot):
    from workbench.engine.events import ExperimentStarted
    from workbench.ui.panels.server_panel import ServerPanel
    from workbench.ui.run_model import RunModel

    model = RunModel()
    model.apply(
        [ExperimentStarted("e", "s", 1, "managed", 0, "/usr/bin/llama-server (found by: PATH)")]
    )
    panel = ServerPanel()
    qtbot.addWidget(panel)
    panel.show_server("http://127.0.0.1:8080", model.server.facts, None, "", model.server_binary)
    assert panel.binary.text() == "/usr/bin/llama-server (found by: PATH)"


def test_a_choice_that_cannot_be_remembered_says_why(machine, tmp_path, qtbot, loop, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(blocked / "config"))  # under a file
    dialog = binary_dialog()
    qtbot.addWidget(dialog)
    run(loop, lambda: dialog.rows, 30)
    assert dialog.take(0) is False
    assert "cannot save preferences" in dialog.status.text()
