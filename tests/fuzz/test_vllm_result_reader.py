"""vLLM's result file reader fed any JSON, vLLM-shaped documents of any values, the example
file changed in a few places, and its bytes changed: each is imported or refused in one line
naming the file, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tests.fuzz.json_documents import JSON, NEAR, NESTED, dumped, mutated, mutated_bytes
from tests.fuzz.result_files import imported
from workbench.engine.interop.vllm_result import PER_REQUEST

DATA = Path(__file__).parents[1] / "data" / "imports" / "vllm"
(EXAMPLE,) = DATA.glob("*.json")
TEXT = EXAMPLE.read_text()

VALUES = JSON | NEAR
SETTINGS = ("start_times", "generated_texts", "request_rate", "burstiness", "max_concurrency")
SETTINGS += ("backend", "endpoint_type", "label", "model_id", "date", "mean_ttft_ms", "duration")
# What passes for vLLM's file (its two summary keys and every per-request list), any values.
SHAPED = st.builds(
    lambda lists, others: {"request_throughput": 1.0, "completed": 1, **others, **lists},
    st.fixed_dictionaries({key: st.lists(VALUES, max_size=4) | VALUES for key in PER_REQUEST}),
    st.dictionaries(
        st.sampled_from(SETTINGS),
        VALUES,
    ),
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("vllm")


def test_the_example_imports(folder):
    path = folder / "example.json"
    path.write_text(TEXT)
    assert imported(path)


@given(JSON)
def test_any_json_is_imported_or_refused_in_one_line(folder, document):
    path = folder / "any.json"
    path.write_text(dumped(document))
    event("imported" if imported(path) else "refused")


@given(SHAPED)
def test_a_vllm_shaped_file_of_any_values_is_imported_or_refused_in_one_line(folder, document):
    path = folder / "shaped.json"
    path.write_text(dumped(document))
    event("imported" if imported(path) else "refused")


@given(mutated(json.loads(TEXT)))
def test_a_changed_vllm_file_is_imported_or_refused_in_one_line(folder, document):
    path = folder / "changed.json"
    path.write_text(dumped(document))
    event("imported" if imported(path) else "refused")


@given(mutated_bytes(TEXT))
def test_a_vllm_file_with_changed_bytes_is_imported_or_refused_in_one_line(folder, data):
    path = folder / "bytes.json"
    path.write_bytes(data)
    event("imported" if imported(path) else "refused")


@given(NESTED)
def test_a_file_nested_deep_is_refused_in_one_line(folder, text):
    path = folder / "nested.json"
    path.write_text(text)
    assert not imported(path)
