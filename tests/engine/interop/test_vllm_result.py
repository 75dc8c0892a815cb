"""vllm bench serve's result file, both ways: a file of vLLM's documented shape imports into a
read-only session, and a session exported in that shape imports back with identical figures.

The vLLM file under tests/data/imports/vllm was built from the schema in vLLM's source
(vllm/benchmarks/serve.py), not written by vLLM: see the README beside it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.made_sessions import write_sweep
from workbench.engine.base.errors import ImportFileError
from workbench.engine.interop.formats import read_result_file
from workbench.engine.interop.imported import write_imported_session
from workbench.engine.interop.vllm_result import write_vllm_results
from workbench.engine.store import open_session

DATA = Path(__file__).parents[2] / "data" / "imports" / "vllm"
(VLLM_FILE,) = DATA.glob("*.json")


def imported(path: Path, folder: Path) -> Path:
    return write_imported_session(read_result_file(path), folder / f"{path.stem}.session.sqlite")


def test_a_vllm_file_becomes_a_session_with_its_times_and_its_own_figures(tmp_path):
    with open_session(imported(VLLM_FILE, tmp_path)) as session:
        source = session.import_source()
        assert (source.tool, source.version) == ("vllm bench serve", None)
        assert source.file_name == VLLM_FILE.name and session.status == "complete"
        (config,) = session.configs
        assert config.label == "concurrency=2"
        assert config.workload["concurrency"] == 2 and config.workload["requests"] == 4
        assert config.workload["endpoint"] == "chat"
        records = session.records(0)
        assert [r.ok for r in records] == [True, True, True, False]
        assert "HTTP 503" in records[3].error
        # Every time the file keeps, on the session's clock (its first send at 0).
        assert [r.t_submit_ns for r in records] == [0, 0, 550_000_000, 900_000_000]
        assert [r.t_first_token_ns for r in records[:3]] == [100_000_000, 120_000_000, 600_000_000]
        assert [len(r.chunks) for r in records[:3]] == [8, 8, 8]
        assert records[0].text == "The sky is blue because of Rayleigh"
        # The workbench's own figures, from those times, by its catalogue.
        (summary,) = session.summaries()
        assert summary.value("ttft_p50_s") == pytest.approx(0.1)
        assert summary.value("failed") == 1 and summary.value("output_tokens") == 24
        # The file's figures kept as they are, under its own names.
        reported = session.reported_figures(0)
        assert reported["median_ttft_ms"] == pytest.approx(100.0)
        assert reported["duration"] == 1.05 and reported["completed"] == 3
        assert "request_goodput" not in reported  # null in the file: not a figure
        assert any("imported from vllm bench serve" in (n.text or "") for n in session.notices())


def figures_only(document: dict) -> dict:
    """What a vLLM result says about the run: everything but when and from what it was
    written, and where on its clock it started."""
    skip = {"date", "workbench_session", "start_times", "label"}
    return {k: v for k, v in document.items() if k not in skip}


def test_an_exported_session_imports_back_with_identical_figures(tmp_path):
    original = write_sweep(tmp_path / "sweep.session.sqlite")
    with open_session(original) as session:
        exported = write_vllm_results(session, tmp_path / "vllm")
        ours = session.summaries()
    assert [p.name for p in exported] == ["sweep-0-np=1.json", "sweep-1-np=2.json"]
    first = [json.loads(p.read_text()) for p in exported]
    assert first[0]["max_concurrency"] is None and first[0]["completed"] == 3
    assert first[0]["ttfts"] == [0.1, 1.3, 2.5]  # the warm-up is left out, as vLLM has none
    for path, document in zip(exported, first, strict=True):
        back = imported(path, tmp_path)
        with open_session(back) as session:
            again = write_vllm_results(session, tmp_path / f"again-{path.stem}")
            (theirs,) = session.summaries()
            assert session.reported_figures(0)["mean_ttft_ms"] == document["mean_ttft_ms"]
        (round_trip,) = [json.loads(p.read_text()) for p in again]
        assert figures_only(round_trip) == figures_only(document)
        mine = ours[exported.index(path)]
        for name in ("ttft_p50_s", "ttft_max_s", "agg_tok_s", "tpot_p50_ms", "itl_p99_ms"):
            assert theirs.value(name) == mine.value(name), name


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"benchmarks_of_something": []}', "not a result file this version reads"),
        (b"[1, 2, 3]", "not a result file this version reads"),
        (
            b'{"completed": 1, "request_throughput": 2.0, "mean_ttft_ms": 5}',
            "without per-request times (no ttfts, itls, latencies, input_lens, output_lens, "
            "errors): run it with --save-result --save-detailed",
        ),
    ],
)
def test_a_file_that_is_not_a_vllm_result_is_one_clear_line(tmp_path, content, says):
    path = tmp_path / "result.json"
    path.write_bytes(content)
    with pytest.raises(ImportFileError) as caught:
        read_result_file(path)
    assert str(caught.value).startswith("result.json: ") and says in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d["ttfts"].__setitem__(1, "fast"), "ttfts[1] must be a number, got 'fast'"),
        (
            lambda d: d["latencies"].__setitem__(0, -1.0),
            "latencies[0] must be greater than or equal to 0, got -1.0",
        ),
        (lambda d: d["itls"][2].append(None), "itls[2][7] must be a number, got None"),
        (
            lambda d: d["output_lens"].pop(),
            "output_lens has 3 entries for 4 requests",  # the rule says it: no list echoed
        ),
        (
            lambda d: d.__setitem__("max_concurrency", 1.5),
            "max_concurrency must be a whole number, got 1.5",
        ),
        (lambda d: d["errors"].__setitem__(0, 17), "errors[0] must be text, got 17"),
        (
            lambda d: d["ttfts"].__setitem__(0, 1e300),
            "ttfts[0] must be less than or equal to 10000000, got 1e+300",
        ),
        (
            lambda d: d["start_times"].__setitem__(2, -1e12),
            "start_times[2] must be greater than or equal to -10000000000, got -1000000000000.0",
        ),
    ],
)
def test_a_damaged_vllm_file_names_the_value(tmp_path, change, says):
    document = json.loads(VLLM_FILE.read_text())
    change(document)
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(document).replace("Infinity", "1e999"))
    with pytest.raises(ImportFileError, match="^damaged.json: " + re.escape(says) + "$"):
        read_result_file(path)


def test_a_count_written_as_a_whole_float_is_that_count(tmp_path):
    """Some tools write counts as floats (2.0): the checked readers took them, and so do the
    models; 1.5 stays refused (above)."""
    document = json.loads(VLLM_FILE.read_text())
    document["max_concurrency"] = 2.0
    document["output_lens"] = [float(n) for n in document["output_lens"]]
    path = tmp_path / "floats.json"
    path.write_text(json.dumps(document))
    (run,) = read_result_file(path).runs
    assert run.concurrency == 2


def test_a_first_token_after_the_end_is_refused(tmp_path):
    document = json.loads(VLLM_FILE.read_text())
    document["ttfts"][1] = 5.0
    path = tmp_path / "late.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ImportFileError, match=r"request 1 of run 1: its first token \(5 s\)"):
        write_imported_session(read_result_file(path), tmp_path / "late.session.sqlite")
    assert not (tmp_path / "late.session.sqlite").exists()


def test_infinite_and_nan_values_are_refused(tmp_path):
    document = json.loads(VLLM_FILE.read_text())
    text = json.dumps(document).replace('"ttfts": [0.1', '"ttfts": [NaN', 1)
    path = tmp_path / "nan.json"
    path.write_text(text)
    with pytest.raises(ImportFileError, match=r"ttfts\[0\] must be a finite number, got nan"):
        read_result_file(path)


def test_an_imported_session_compares_with_a_measured_one(tmp_path):
    from workbench.engine.analysis.compare import compare_sessions

    with (
        open_session(imported(VLLM_FILE, tmp_path)) as theirs,
        open_session(write_sweep(tmp_path / "sweep.session.sqlite")) as ours,
    ):
        comparison = compare_sessions([theirs, ours])
    assert comparison.columns[0].startswith("vllm bench serve import · imported from vllm")
    assert comparison.columns[1].startswith("sweep · Made CPU 8-Core")
    # Aligned by what varies, the sweep's slots: the file does not say the import's, so it
    # aligns with none.
    assert comparison.labels == ["concurrency=2", "np=1", "np=2"]
    assert comparison.cells[("concurrency=2", "ttft_p50_s")] == [pytest.approx(0.1), None]
    assert comparison.cells[("np=1", "ttft_p50_s")] == [None, pytest.approx(1.3)]


def test_a_run_with_a_failed_request_round_trips_too(tmp_path):
    """A failed request's time to its end is exported (vLLM leaves it out of its figures):
    its 30 s decide the run's duration, and so the throughputs, both ways."""
    from tests.made_sessions import Config, build_session, failed, request

    requests = [
        request(0, submit_s=0.0),
        request(1, submit_s=0.5),
        failed(2, submit_s=1.0, done_s=30.0, error="HTTP 500: the server gave up"),
    ]
    toml = "[server]\nslots = 1\n[workload]\nrequests = 3\nwarmup = 0\n"
    original = build_session(tmp_path / "fail.session.sqlite", toml, [Config(requests)])
    with open_session(original) as session:
        (exported,) = write_vllm_results(session, tmp_path / "vllm")
        (ours,) = session.summaries()
    document = json.loads(exported.read_text())
    assert document["duration"] == 30.0 and document["failed"] == 1
    assert document["latencies"][2] == 29.0 and document["errors"][2].startswith("HTTP 500")
    with open_session(imported(exported, tmp_path)) as session:
        (again,) = write_vllm_results(session, tmp_path / "again")
        (theirs,) = session.summaries()
    assert figures_only(json.loads(again.read_text())) == figures_only(document)
    assert theirs.value("agg_tok_s") == ours.value("agg_tok_s")
    assert theirs.value("failed") == 1


def test_the_exported_model_is_the_file_the_server_ran_and_imports_back_named(tmp_path):
    """A session of the default model writes its file's name as ``model_id`` (not
    ``default``), so the session imported back names its model instead of an unknown one."""
    from workbench.engine.analysis.library import UNKNOWN_MODEL, session_models
    from workbench.engine.models.model_file import DEFAULT_MODEL_FILE

    original = write_sweep(tmp_path / "sweep.session.sqlite")
    with open_session(original) as session:
        exported = write_vllm_results(session, tmp_path / "vllm")
    for path in exported:
        assert json.loads(path.read_text())["model_id"] == DEFAULT_MODEL_FILE
        with open_session(imported(path, tmp_path)) as session:
            assert session_models(session) == [DEFAULT_MODEL_FILE] != [UNKNOWN_MODEL]
