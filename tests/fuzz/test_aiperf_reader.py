"""AIPerf's reader (``profile_export.jsonl`` with its summary beside it) fed lines of any
JSON, AIPerf's own files changed in a few places (a record, the summary, or both), and their
bytes changed: each run is imported or refused in one line naming one of its files, never a
traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tests.fuzz.json_documents import JSON, NEAR, NESTED, dumped, mutated, mutated_bytes
from tests.fuzz.result_files import imported
from workbench.engine.interop.aiperf import RECORDS, SUMMARY

# The run with a failed request: its records hold both kinds.
DATA = Path(__file__).parents[1] / "data" / "imports" / "aiperf" / "with-error"
RECORDS_TEXT = (DATA / RECORDS).read_text()
SUMMARY_TEXT = (DATA / SUMMARY).read_text()
BOTH = {
    "records": [json.loads(line) for line in RECORDS_TEXT.splitlines() if line.strip()],
    "summary": json.loads(SUMMARY_TEXT),
}

VALUES = JSON | NEAR
METRICS = ("time_to_first_token", "request_latency", "inter_chunk_latency", "usage_prompt_tokens")
METRICS += ("usage_completion_tokens", "input_sequence_length", "output_sequence_length")
METRIC = st.fixed_dictionaries(
    {}, optional={"value": VALUES | st.lists(VALUES, max_size=4), "unit": VALUES}
)
RECORD = st.fixed_dictionaries(
    {},
    optional={
        "metadata": st.dictionaries(
            st.sampled_from(["benchmark_phase", "request_start_ns"]),
            st.just("profiling") | VALUES,
        )
        | VALUES,
        "metrics": st.dictionaries(
            st.sampled_from(METRICS),
            METRIC | VALUES,
        )
        | VALUES,
        "error": st.dictionaries(st.sampled_from(["code", "type", "message"]), VALUES) | VALUES,
    },
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("aiperf")


def run_folder(folder: Path, name: str, records: list[str], summary: str | None) -> Path:
    """A folder holding a run's records (these lines) and, given one, its summary."""
    run = folder / name
    run.mkdir(exist_ok=True)
    (run / RECORDS).write_text("".join(line + "\n" for line in records))
    (run / SUMMARY).unlink(missing_ok=True)
    if summary is not None:
        (run / SUMMARY).write_text(summary)
    return run / RECORDS


def written(folder: Path, name: str, both: Any) -> Path:
    """``both`` (``records`` and ``summary``, as changed) as a run's two files: records that
    are no list are one line, a summary taken out is no file."""
    if not isinstance(both, dict):
        return run_folder(folder, name, [dumped(both)], None)
    records = both.get("records", [])
    lines = [dumped(r) for r in records] if isinstance(records, list) else [dumped(records)]
    summary = dumped(both["summary"]) if "summary" in both else None
    return run_folder(folder, name, lines, summary)


def test_the_example_imports(folder):
    assert imported(run_folder(folder, "example", RECORDS_TEXT.splitlines(), SUMMARY_TEXT))


@given(st.lists(RECORD | VALUES, max_size=4), st.none() | VALUES)
def test_records_of_any_values_are_imported_or_refused_in_one_line(folder, records, summary):
    lines = [dumped(r) for r in records]
    path = run_folder(folder, "any", lines, None if summary is None else dumped(summary))
    event("imported" if imported(path, SUMMARY) else "refused")


@given(mutated(BOTH))
def test_a_changed_aiperf_run_is_imported_or_refused_in_one_line(folder, both):
    path = written(folder, "changed", both)
    event("imported" if imported(path, SUMMARY) else "refused")


@given(mutated_bytes(RECORDS_TEXT), st.booleans())
def test_records_with_changed_bytes_are_imported_or_refused_in_one_line(folder, data, beside):
    path = run_folder(folder, "bytes", [], SUMMARY_TEXT if beside else None)
    path.write_bytes(data)
    event("imported" if imported(path, SUMMARY) else "refused")


@given(mutated_bytes(SUMMARY_TEXT))
def test_a_summary_with_changed_bytes_is_imported_or_refused_in_one_line(folder, data):
    path = run_folder(folder, "summary", RECORDS_TEXT.splitlines(), None)
    (path.parent / SUMMARY).write_bytes(data)
    event("imported" if imported(path.parent / SUMMARY, RECORDS) else "refused")


@given(NESTED)
def test_a_line_nested_deep_is_imported_or_refused_in_one_line(folder, text):
    path = run_folder(folder, "nested", [text], None)
    event("imported" if imported(path) else "refused")  # a shallow one is a record
