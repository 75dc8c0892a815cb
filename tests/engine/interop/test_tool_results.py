"""GuideLLM's and AIPerf's result files, written by the tools themselves against a real
llama-server (tests/data/imports: regenerate.sh and its README): each imports into a session
whose figures, derived by the workbench from the file's per-request times, agree with the
figures the tool computed from the same times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.engine.analysis.compare import compare_sessions, distinct
from workbench.engine.base.errors import ImportFileError
from workbench.engine.interop.formats import import_file, read_result_file
from workbench.engine.store import open_session

DATA = Path(__file__).parents[2] / "data" / "imports"
GUIDELLM = DATA / "guidellm" / "benchmarks.json"
AIPERF = DATA / "aiperf"


def test_guidellm_benchmarks_become_one_configuration_each(tmp_path):
    doc = json.loads(GUIDELLM.read_text())
    with open_session(import_file(GUIDELLM, tmp_path)) as session:
        source = session.import_source()
        assert (source.tool, source.version) == ("GuideLLM", "0.8.1")
        assert session.meta["base_url"] == doc["config"]["spec"]["backend"]["target"]
        assert [c.label for c in session.configs] == ["concurrency=1", "concurrency=2"]
        assert [c.workload["concurrency"] for c in session.configs] == [1, 2]
        assert session.configs[0].workload["model_name"] == "SmolLM2-135M-Instruct"
        summaries = session.summaries()
        for config, summary, benchmark in zip(
            session.configs, summaries, doc["benchmarks"], strict=True
        ):
            theirs = benchmark["metrics"]["time_to_first_token_ms"]["successful"]
            reported = session.reported_figures(config.index)
            assert reported["time_to_first_token_ms.median"] == theirs["median"]
            # Ours, from the file's first-token and start times, is GuideLLM's own.
            assert summary.value("ttft_p50_s") * 1000 == pytest.approx(theirs["median"])
            records = session.records(config.index)
            assert len(records) == 5 and all(r.ok for r in records)
            assert all(r.usage == {"prompt_tokens": 62, "completion_tokens": 24} for r in records)
            assert records[0].text == benchmark["requests"]["successful"][0]["output"]
            assert summary.value("itl_p50_ms") is None  # no time per token in the file
        notices = [n.text or "" for n in session.notices()]
        assert any("GuideLLM keeps no time per token" in n for n in notices)


def test_a_guidellm_request_that_failed_is_a_failed_request(tmp_path):
    with open_session(
        import_file(DATA / "guidellm" / "with-error" / "benchmarks.json", tmp_path)
    ) as s:
        records = s.records(0)
    assert [r.ok for r in records] == [True, True, False, True]
    assert "400 Bad Request" in records[2].error
    assert [c.label for c in s.configs] == ["concurrency=1"]  # synchronous: one at a time


@pytest.mark.parametrize("given", ["profile_export.jsonl", "profile_export_aiperf.json"])
def test_an_aiperf_run_from_either_of_its_files(tmp_path, given):
    summary = json.loads((AIPERF / "concurrency2" / "profile_export_aiperf.json").read_text())
    with open_session(import_file(AIPERF / "concurrency2" / given, tmp_path)) as session:
        source = session.import_source()
        assert (source.tool, source.version, source.file_name) == ("AIPerf", "0.13.0", given)
        (config,) = session.configs
        assert config.label == "concurrency=2" and config.workload["requests"] == 5
        (summary_ours,) = session.summaries()
        records = session.records(0)
        reported = session.reported_figures(0)
    assert reported["time_to_first_token.p50 [ms]"] == summary["time_to_first_token"]["p50"]
    # Every chunk's time is in the file: TTFT, E2E and ITL as AIPerf computed them.
    ttft = summary_ours.value("ttft_p50_s") * 1000
    assert ttft == pytest.approx(summary["time_to_first_token"]["p50"], rel=1e-6)
    e2e = summary_ours.value("e2e_p50_s") * 1000
    assert e2e == pytest.approx(summary["request_latency"]["p50"], rel=1e-6)
    itl = summary_ours.value("itl_p50_ms")
    assert itl == pytest.approx(summary["inter_chunk_latency"]["p50"], rel=1e-6)
    assert [len(r.chunks) for r in records] == [24] * 5
    assert all(r.usage == {"prompt_tokens": 62, "completion_tokens": 24} for r in records)


def test_an_aiperf_request_that_failed_keeps_its_error(tmp_path):
    with open_session(import_file(AIPERF / "with-error" / "profile_export.jsonl", tmp_path)) as s:
        records = s.records(0)
    assert [r.ok for r in records] == [True, True, False, True]
    assert records[2].error.startswith("400 Bad Request")
    assert "exceeds the available context size" in records[2].error


def test_each_tools_runs_side_by_side(tmp_path):
    paths = [
        import_file(GUIDELLM, tmp_path),
        import_file(AIPERF / "concurrency1" / "profile_export.jsonl", tmp_path),
        import_file(AIPERF / "concurrency2" / "profile_export.jsonl", tmp_path),
    ]
    sessions = [open_session(p) for p in paths]
    try:
        comparison = compare_sessions(sessions)
    finally:
        for session in sessions:
            session.close()
    assert [c.split(" · ")[0] for c in comparison.columns] == [
        "guidellm-benchmarks",
        "concurrency1-profile_export",
        "concurrency2-profile_export",
    ]
    assert comparison.labels == ["concurrency=1", "concurrency=2"]
    ttft = {label: comparison.cells[(label, "ttft_p50_s")] for label in comparison.labels}
    assert ttft["concurrency=1"][2] is None and ttft["concurrency=2"][1] is None
    assert all(v is not None for v in (ttft["concurrency=1"][:2] + ttft["concurrency=2"][::2]))


def test_an_aiperf_summary_alone_is_refused(tmp_path):
    alone = tmp_path / "profile_export_aiperf.json"
    alone.write_text((AIPERF / "concurrency1" / "profile_export_aiperf.json").read_text())
    with pytest.raises(ImportFileError, match="summary alone has no per-request times"):
        read_result_file(alone)


def test_a_damaged_aiperf_line_names_its_line(tmp_path):
    lines = (AIPERF / "concurrency1" / "profile_export.jsonl").read_text().splitlines()
    record = json.loads(lines[1])
    record["metrics"]["time_to_first_token"] = {"value": "soon", "unit": "ms"}
    (tmp_path / "profile_export.jsonl").write_text("\n".join([lines[0], json.dumps(record)]))
    with pytest.raises(
        ImportFileError,
        match=r"^profile_export.jsonl:2: metrics.time_to_first_token.value must be a number",
    ):
        read_result_file(tmp_path / "profile_export.jsonl")
    (tmp_path / "profile_export.jsonl").write_text(lines[0] + "\n{oops\n")
    with pytest.raises(ImportFileError, match=r"^profile_export.jsonl:2: not valid JSON"):
        read_result_file(tmp_path / "profile_export.jsonl")


def test_sessions_of_one_name_and_minute_get_a_column_each(tmp_path):
    """One file imported twice: the rows are keyed by column, so the second's values showed
    under the first's."""
    assert distinct(["a", "b", "a", "a"]) == ["a", "b", "a (2)", "a (3)"]
    twice = [import_file(GUIDELLM, tmp_path) for _ in range(2)]
    sessions = [open_session(p) for p in twice]
    try:
        rows = compare_sessions(sessions).rows()
    finally:
        for session in sessions:
            session.close()
    assert len(rows[0]) == 3 + 2  # configuration, metric, key, and a value per session
