"""GuideLLM's ``benchmarks.json`` reader fed GuideLLM-shaped documents of any values, the
file GuideLLM wrote changed in a few places, and its bytes changed: each is imported or
refused in one line naming the file, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tests.fuzz.json_documents import JSON, NEAR, dumped, mutated, mutated_bytes
from tests.fuzz.result_files import imported

DATA = Path(__file__).parents[1] / "data" / "imports" / "guidellm"
# The file with a failed request: each group of requests has one to change.
TEXT = (DATA / "with-error" / "benchmarks.json").read_text()
FIGURES = ("request_totals", "time_to_first_token_ms", "request_dispatch_delay", "text")
REQUEST_KEYS = ("request_start_time", "request_end_time", "prompt_tokens", "output_tokens")


def _pruned(document: dict[str, Any]) -> dict[str, Any]:
    """The file with what no reader looks at left out (most of each request's hundred keys,
    most figures): each change lands where it is read, and the document is small enough to
    change a thousand times in seconds."""
    for benchmark in document["benchmarks"]:
        benchmark["metrics"] = {name: benchmark["metrics"][name] for name in FIGURES}
        for group in ("successful", "errored", "incomplete"):
            benchmark["requests"][group] = [
                {key: request.get(key) for key in (*REQUEST_KEYS, "output", "info")}
                | {"info": {k: request["info"][k] for k in ("timings", "error", "status")}}
                for request in benchmark["requests"][group]
            ]
        benchmark.pop("scheduler_state", None)
        benchmark["config"] = {"strategy": benchmark["config"]["strategy"]}
    return document


VALUES = JSON | NEAR
REQUEST = st.fixed_dictionaries(
    {},
    optional={
        "request_start_time": VALUES,
        "request_end_time": VALUES,
        "prompt_tokens": VALUES,
        "output_tokens": VALUES,
        "output": VALUES,
        "info": st.fixed_dictionaries(
            {},
            optional={
                "error": VALUES,
                "timings": st.dictionaries(
                    st.sampled_from(["first_token_iteration", "last_token_iteration"]), VALUES
                )
                | VALUES,
            },
        )
        | VALUES,
    },
)
BENCHMARK = st.fixed_dictionaries(
    {
        "config": st.fixed_dictionaries(
            {},
            optional={
                "strategy": st.fixed_dictionaries(
                    {},
                    optional={
                        "type_": st.sampled_from(
                            ["synchronous", "concurrent", "throughput", "constant", "poisson"]
                        )
                        | VALUES,
                        "streams": VALUES,
                        "rate": VALUES,
                        "max_concurrency": VALUES,
                    },
                )
                | VALUES
            },
        )
        | VALUES,
    },
    optional={
        "requests": st.dictionaries(
            st.sampled_from(["successful", "errored", "incomplete"]),
            st.lists(REQUEST | VALUES, max_size=3) | VALUES,
        )
        | VALUES,
        "start_time": VALUES,
        "duration": VALUES,
        "metrics": st.dictionaries(st.text(max_size=10), VALUES) | VALUES,
    },
)
# What passes for GuideLLM's file (its version and a list of benchmarks), any values.
SHAPED = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries({"guidellm_version": VALUES}),
        "benchmarks": st.lists(BENCHMARK | VALUES, max_size=3),
    },
    optional={"config": VALUES},
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("guidellm")


def test_the_example_imports_whole_and_pruned(folder):
    path = folder / "example.json"
    path.write_text(TEXT)
    assert imported(path)
    path.write_text(dumped(_pruned(json.loads(TEXT))))
    assert imported(path)


@given(SHAPED)
def test_a_guidellm_shaped_file_of_any_values_is_imported_or_refused_in_one_line(folder, document):
    path = folder / "shaped.json"
    path.write_text(dumped(document))
    event("imported" if imported(path) else "refused")


@given(mutated(_pruned(json.loads(TEXT))))
def test_a_changed_guidellm_file_is_imported_or_refused_in_one_line(folder, document):
    path = folder / "changed.json"
    path.write_text(dumped(document))
    event("imported" if imported(path) else "refused")


@given(mutated_bytes(TEXT))
def test_a_guidellm_file_with_changed_bytes_is_imported_or_refused_in_one_line(folder, data):
    path = folder / "bytes.json"
    path.write_bytes(data)
    event("imported" if imported(path) else "refused")
