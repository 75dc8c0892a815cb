"""The calibration reader (``calibration.load``) fed any JSON, a real calibration file changed
in a few places, and its bytes changed: it reads a calibration or refuses the file in one
line naming it, never a traceback; and what it reads, it stores and reads back the same."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import event, given

from tests.engine.predict.test_calibration import full
from tests.fuzz.json_documents import JSON, NESTED, dumped, mutated, mutated_bytes
from workbench.engine.base.errors import ImportFileError
from workbench.engine.predict.calibration import Calibration, load, save

MADE = full()  # every field the file holds given a value: a change may reach each


def _written() -> str:
    with tempfile.TemporaryDirectory() as folder:
        return save(MADE, Path(folder)).read_text()


WRITTEN = _written()
"""The file today's code writes: what the changes start from."""


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("calibrations")


def read(path: Path, again: Path) -> Calibration | None:
    """What ``load`` makes of ``path``: a calibration that stores and reads back the same,
    or None where it refused the file in one line that names it."""
    try:
        found = load(path)
    except ImportFileError as exc:
        line = str(exc)
        assert len(line.splitlines()) == 1 and line.startswith(f"{path.name}: "), line
        return None
    assert isinstance(found, Calibration)
    assert load(save(found, again)) == found
    return found


def test_the_file_written_reads_back(folder):
    path = folder / "written.json"
    path.write_text(WRITTEN)
    assert read(path, folder / "again") == MADE


@given(JSON)
def test_any_json_is_read_or_refused_in_one_line(folder, document):
    path = folder / "any.json"
    path.write_text(dumped(document))
    event("read" if read(path, folder / "again") else "refused")


@given(mutated(json.loads(WRITTEN)))
def test_a_changed_calibration_is_read_or_refused_in_one_line(folder, document):
    path = folder / "changed.json"
    path.write_text(dumped(document))
    event("read" if read(path, folder / "again") else "refused")


@given(mutated_bytes(WRITTEN))
def test_a_changed_file_is_read_or_refused_in_one_line(folder, data):
    path = folder / "bytes.json"
    path.write_bytes(data)
    event("read" if read(path, folder / "again") else "refused")


@given(NESTED)
def test_a_file_nested_deep_is_refused_in_one_line(folder, text):
    path = folder / "nested.json"
    path.write_text(text)
    assert read(path, folder / "again") is None
