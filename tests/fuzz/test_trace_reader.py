"""The trace reader fed lines of any JSON, Mooncake's and AIPerf's rows of any values, the
shipped sample and a sessions trace changed in a few places, and their bytes changed: a trace
is read (and planned for a configuration) or refused in one line naming the file and the
line, never a traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tests.fuzz.json_documents import JSON, NEAR, NESTED, dumped, mutated, mutated_bytes
from workbench.engine.base.errors import ExperimentError
from workbench.engine.config.experiment import TraceWorkload
from workbench.engine.interop.trace_file import Trace, plan_trace, read_trace

SAMPLE = Path(__file__).parents[2] / "resources" / "traces" / "sample-mooncake.jsonl"
MOONCAKE = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
SESSIONS = [
    {"session_id": "a", "timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [0]},
    {"session_id": "b", "timestamp": 1000, "input_length": 20, "hash_ids": [0, 1]},
    {"session_id": "a", "delay": 400, "input_length": 30, "output_length": 2},
    {"session_id": "a", "input_length": 40, "output_length": 2},
    {"session_id": 7, "input_length": 50, "output_length": 2},
]
WORKLOAD = TraceWorkload(trace="t.jsonl")
# file:line: (the line of the row), or file: (the file as a whole)
NAMED = re.compile(r"t\.jsonl(:\d+)?: ")

VALUES = JSON | NEAR
ROW = st.dictionaries(
    st.sampled_from(
        ["timestamp", "input_length", "output_length", "hash_ids", "session_id", "delay"]
    ),
    VALUES | st.integers(0, 10**4) | st.lists(st.integers(-2, 50), max_size=5),
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("traces")


def read(path: Path) -> Trace | None:
    """The trace at ``path``, planned for the default trace workload; None where it is
    refused, in one line naming the file."""
    try:
        trace = read_trace(path)
        plan_trace(trace, WORKLOAD)
    except ExperimentError as exc:
        line = str(exc)
        assert "\n" not in line and "\r" not in line and len(line) < 500, line
        assert NAMED.match(line), line
        return None
    return trace


def lines(path: Path, rows: object) -> Path:
    """``rows`` one a line (not a list: one line of it)."""
    rows = rows if isinstance(rows, list) else [rows]
    path.write_text("".join(dumped(row) + "\n" for row in rows))
    return path


def test_the_sample_and_the_sessions_trace_read(folder):
    assert read(lines(folder / "t.jsonl", MOONCAKE))
    assert read(lines(folder / "t.jsonl", SESSIONS))


@given(st.lists(ROW | VALUES, min_size=1, max_size=5))
def test_rows_of_any_values_are_read_or_refused_in_one_line(folder, rows):
    event("read" if read(lines(folder / "t.jsonl", rows)) else "refused")


@given(mutated(MOONCAKE))
def test_a_changed_mooncake_trace_is_read_or_refused_in_one_line(folder, rows):
    event("read" if read(lines(folder / "t.jsonl", rows)) else "refused")


@given(mutated(SESSIONS))
def test_a_changed_sessions_trace_is_read_or_refused_in_one_line(folder, rows):
    event("read" if read(lines(folder / "t.jsonl", rows)) else "refused")


@given(mutated_bytes(SAMPLE.read_text()))
def test_a_trace_with_changed_bytes_is_read_or_refused_in_one_line(folder, data):
    path = folder / "t.jsonl"
    path.write_bytes(data)
    event("read" if read(path) else "refused")


@given(NESTED)
def test_a_line_nested_deep_is_refused_in_one_line(folder, text):
    path = folder / "t.jsonl"
    path.write_text(text + "\n")
    assert read(path) is None
