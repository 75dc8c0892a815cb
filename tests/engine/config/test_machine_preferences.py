"""The Machine picker's hosts are remembered as bounded lists of texts; a damaged list is
left out with a note, the other preferences kept."""

from __future__ import annotations

import json

import pytest

from workbench.engine.config.preferences import (
    MAX_MACHINES,
    Preferences,
    load_preferences,
    remember,
)


@pytest.fixture
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


def test_the_machines_are_remembered_with_the_other_choices(config_dir):
    remember(model="/m.gguf")
    remember(machines=("gpubox", "me@10.0.0.2"), machines_ticked=("local", "gpubox"))
    prefs, notes = load_preferences()
    assert notes == []
    assert prefs == Preferences(
        model="/m.gguf", machines=("gpubox", "me@10.0.0.2"), machines_ticked=("local", "gpubox")
    )


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("gpubox", "machines must be a list, got 'gpubox'"),
        (["gpubox", 3], "machines[1] must be text, got 3"),
        (["a\x1b[2J"], "machines[0] must be printable text (no control characters)"),
        ([""], "machines[0] string should have at least 1 character"),
        ([f"h{i}" for i in range(MAX_MACHINES + 1)], f"at most {MAX_MACHINES} items"),
    ],
)
def test_a_list_that_is_not_one_of_usable_texts_is_left_out(config_dir, value, said):
    config_dir.mkdir()
    document = {"machines": value, "model": "/m.gguf"}
    (config_dir / "preferences.json").write_text(json.dumps(document))
    prefs, (note,) = load_preferences()
    assert prefs == Preferences(model="/m.gguf")
    assert said in note and note.endswith("; ignored") and "\x1b" not in note
