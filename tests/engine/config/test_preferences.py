"""What the workbench remembers between starts: saved whole, read back checked, forgotten on
request, and a damaged file never stops it."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from workbench.engine.config.preferences import (
    MAX_BYTES,
    Preferences,
    _File,
    load_preferences,
    preferences_path,
    remember,
    reset_preferences,
)


@pytest.fixture
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


def test_a_choice_is_remembered_and_forgotten(config_dir):
    assert load_preferences() == (Preferences(), [])
    remember(server_bin="/opt/homebrew/bin/llama-server", server_bin_found_by="Homebrew")
    remember(model="/models/qwen.gguf")  # the other choices stay
    assert preferences_path() == config_dir / "preferences.json"
    prefs, notes = load_preferences()
    assert notes == []
    assert prefs == Preferences("/opt/homebrew/bin/llama-server", "Homebrew", "/models/qwen.gguf")
    assert not list(config_dir.glob("*.tmp"))
    assert reset_preferences() is True
    assert load_preferences() == (Preferences(), [])
    assert reset_preferences() is False


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"{not json", "is not JSON"),
        (b"[1, 2]", "does not hold an object"),
        (b" " * (MAX_BYTES + 1), f"is over {MAX_BYTES} bytes"),
    ],
)
def test_a_damaged_file_gives_defaults_and_says_why(config_dir, content, said):
    config_dir.mkdir()
    (config_dir / "preferences.json").write_bytes(content)
    prefs, (note,) = load_preferences()
    assert prefs == Preferences() and said in note


def test_each_value_is_checked(config_dir):
    config_dir.mkdir()
    document = {"server_bin": 42, "model": "/m.gguf\x1b[2J", "server_bin_found_by": "PATH"}
    (config_dir / "preferences.json").write_text(json.dumps({**document, "newer": "kept out"}))
    prefs, notes = load_preferences()
    assert prefs == Preferences(server_bin_found_by="PATH")
    assert [n.split(": ", 1)[1] for n in notes] == [
        "server_bin must be text, got 42; ignored",
        "model must be printable text (no control characters), got '/m.gguf\\x1b[2J'; ignored",
    ]


def test_its_model_holds_every_preference():
    assert tuple(_File.model_fields) == tuple(f.name for f in fields(Preferences))


def test_a_file_nested_too_deeply_gives_defaults(config_dir):
    config_dir.mkdir()
    (config_dir / "preferences.json").write_text("[" * 30_000 + "]" * 30_000)
    prefs, (note,) = load_preferences()
    assert prefs == Preferences() and "is not JSON" in note
