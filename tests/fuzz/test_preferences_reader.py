"""The preferences reader (``load_preferences``) fed any JSON, a real preferences file
changed in a few places, and its bytes changed: it never stops the app. Every value it keeps
is of its type, every note is one line, a bad key leaves the others, and what it reads saves
and reads back the same without a note."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tests.fuzz.json_documents import JSON, NESTED, dumped, mutated, mutated_bytes
from workbench.engine.config.preferences import (
    Preferences,
    load_preferences,
    save_preferences,
)

MADE = Preferences(
    server_bin="/opt/homebrew/bin/llama-server",
    server_bin_found_by="Homebrew",
    model="/models/qwen.gguf",
    machines=("gpubox", "me@10.0.0.2"),
    machines_ticked=("local", "gpubox"),
    session_folders=("/data/sessions",),
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("config")


@pytest.fixture(scope="module")
def written(folder) -> str:
    """The file today's code writes: what the changes start from."""
    return save_preferences(MADE, folder / "made.json").read_text()


def read(path: Path) -> tuple[Preferences, list[str]]:
    """What ``load_preferences`` makes of ``path``, checked."""
    found, notes = load_preferences(path)
    for name, value in ((f.name, getattr(found, f.name)) for f in fields(Preferences)):
        if isinstance(value, tuple):
            assert all(isinstance(v, str) and v.isprintable() for v in value), name
        else:
            assert value is None or (isinstance(value, str) and value.isprintable()), name
    for note in notes:
        assert len(note.splitlines()) == 1 and note.endswith(("; ignored", "; using defaults"))
    again = path.with_name("again.json")
    assert load_preferences(save_preferences(found, again)) == (found, [])
    return found, notes


def test_the_file_written_reads_back(folder, written):
    path = folder / "written.json"
    path.write_text(written)
    assert read(path) == (MADE, [])


@given(JSON)
def test_any_json_never_stops_the_app(folder, document):
    path = folder / "any.json"
    path.write_text(dumped(document))
    event("noted" if read(path)[1] else "read")


@given(st.data())
def test_a_changed_file_keeps_what_is_still_good(folder, written, data):
    document = data.draw(mutated(json.loads(written)))
    path = folder / "changed.json"
    path.write_text(dumped(document))
    found, notes = read(path)
    event("noted" if notes else "read")
    if isinstance(document, dict):  # an untouched key is kept
        for f in fields(Preferences):
            if document.get(f.name) == json.loads(written)[f.name]:
                assert getattr(found, f.name) == getattr(MADE, f.name), f.name


@given(st.data())
def test_changed_bytes_never_stop_the_app(folder, written, data):
    path = folder / "bytes.json"
    path.write_bytes(data.draw(mutated_bytes(written)))
    event("noted" if read(path)[1] else "read")


@given(NESTED)
def test_a_file_nested_deep_never_stops_the_app(folder, text):
    path = folder / "nested.json"
    path.write_text(text)
    assert read(path) == (Preferences(), load_preferences(path)[1])
