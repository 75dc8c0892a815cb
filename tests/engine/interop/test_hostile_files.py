"""Result files from anyone: whatever a file holds, an import either keeps every request it
holds or refuses the file in one line naming where, and leaves no half-written session."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from workbench.engine.base.errors import ImportFileError, WorkbenchError
from workbench.engine.interop import imported
from workbench.engine.interop.formats import import_file, one_per_run, read_result_file
from workbench.engine.interop.values import MAX_FIGURES
from workbench.engine.store import open_session

DATA = Path(__file__).parents[2] / "data" / "imports"
(VLLM_FILE,) = (DATA / "vllm").glob("*.json")
GUIDELLM = DATA / "guidellm" / "benchmarks.json"
AIPERF = DATA / "aiperf" / "concurrency1"


def vllm(tmp_path: Path, change, name: str = "result.json") -> Path:
    document = json.loads(VLLM_FILE.read_text())
    change(document)
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def refused(path: Path, says: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(WorkbenchError) as caught:
        import_file(path, out)
    message = str(caught.value)
    assert says in message and "\n" not in message and len(message) < 500, message
    assert not list(out.glob("*.session.sqlite*")) if out.exists() else True


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            lambda d: d["input_lens"].__setitem__(0, 10**30),
            "input_lens[0] must be less than or equal to 1000000000000, got 1000000",
        ),
        (
            lambda d: d["output_lens"].__setitem__(1, 10**400),
            "output_lens[1] must be less than or equal to 1000000000000, got 1000",
        ),
        (lambda d: d.__setitem__("start_times", [-9e9, 9e9, 0, 1]), "start 1.8e+10 s apart"),
        (lambda d: d["itls"].__setitem__(0, [100, 100, 100]), "its chunks (300 s after the"),
    ],
)
def test_values_the_store_cannot_hold_refuse_the_file(tmp_path, change, says):
    """Each of these once imported with a request silently missing (SQLite refused it)."""
    refused(vllm(tmp_path, change), says, tmp_path)


def test_a_request_the_store_refuses_keeps_no_session(tmp_path, monkeypatch):
    """The writer goes past an event SQLite refuses (a run must keep the rest); an import
    must not keep a session without it."""
    real = imported.ImportedRequest.record

    def too_big(self, config_index, index, origin_s):
        record = real(self, config_index, index, origin_s)
        if index == 1:
            record.t_submit_ns = 2**70  # more than SQLite's integers hold
        return record

    monkeypatch.setattr(imported.ImportedRequest, "record", too_big)
    refused(VLLM_FILE, "could not store a RequestFinished", tmp_path)
    assert not list((tmp_path / "out").iterdir())


SUMMARY = AIPERF / "profile_export_aiperf.json"


def requests_of(d: dict) -> dict:
    return d["benchmarks"][0]["requests"]


@pytest.mark.parametrize(
    ("tool_file", "change", "says"),
    [
        (GUIDELLM, lambda d: requests_of(d).update(successful=5), "successful must be a list"),
        (GUIDELLM, lambda d: requests_of(d)["successful"].append(7), "[5] must be a table, got 7"),
        (GUIDELLM, lambda d: d["benchmarks"].__setitem__(1, "x"), "[1] must be a table"),
        (SUMMARY, lambda d: d["input_config"]["models"].update(items=5), "items must be a list"),
        (SUMMARY, lambda d: d["input_config"]["models"].update(items={"a": 1}), "must be a list"),
    ],
)
def test_a_shape_no_tool_writes_is_one_line(tmp_path, tool_file, change, says):
    folder = tmp_path / "run"
    folder.mkdir()
    for sibling in tool_file.parent.glob("profile_export*"):
        (folder / sibling.name).write_bytes(sibling.read_bytes())
    document = json.loads(tool_file.read_text())
    change(document)
    (folder / tool_file.name).write_text(json.dumps(document))
    refused(folder / tool_file.name, says, tmp_path)


def test_a_jsonl_line_nested_too_deep_is_one_line(tmp_path):
    (tmp_path / "profile_export.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    refused(tmp_path / "profile_export.jsonl", "profile_export.jsonl:1: not valid JSON", tmp_path)


def test_a_fifo_is_not_read(tmp_path):
    os.mkfifo(tmp_path / "result.json")
    refused(tmp_path / "result.json", "result.json: not a file", tmp_path)


def test_the_figures_a_file_states_are_bounded(tmp_path):
    names = ("".join(chr(97 + i // 26**k % 26) for k in range(3)) for i in range(3000))
    many = vllm(tmp_path, lambda d: d.update({f"mean_{name}_ms": 1.0 for name in names}))
    with open_session(import_file(many, tmp_path / "out")) as session:
        assert len(session.reported_figures(0)) == MAX_FIGURES


def test_a_whole_answer_is_a_success_not_a_failure(tmp_path):
    """A run without streaming has no first-token time: its requests succeeded, whole."""
    lines = []
    for line in (AIPERF / "profile_export.jsonl").read_text().splitlines():
        record = json.loads(line)
        for name in ("time_to_first_token", "inter_chunk_latency"):
            record["metrics"].pop(name, None)
        lines.append(json.dumps(record))
    (tmp_path / "profile_export.jsonl").write_text("\n".join(lines))
    with open_session(import_file(tmp_path / "profile_export.jsonl", tmp_path / "out")) as s:
        records = s.records(0)
        (summary,) = s.summaries()
        assert s.configs[0].workload["stream"] is False  # the workload says so too
    assert all(r.ok and not r.streamed for r in records)
    assert all(r.t_first_token_ns == r.t_last_token_ns for r in records)
    assert summary.value("ttft_p50_s") == summary.value("e2e_p50_s")


def test_names_with_markup_are_printed_as_they_are(tmp_path, capsys):
    from workbench.cli.main import main

    odd = vllm(tmp_path, lambda d: None, name="[red]y.json")
    assert main(["import", str(odd), "--out", str(tmp_path / "out")]) == 0
    (session,) = (tmp_path / "out").glob("*.session.sqlite")
    assert main(["show", str(session)]) == 0
    assert "[red]y" in capsys.readouterr().out


def test_both_files_of_an_aiperf_run_are_one_run():
    given = [AIPERF / "profile_export_aiperf.json", AIPERF / "profile_export.jsonl", GUIDELLM]
    assert one_per_run(given) == given[1:]
    assert one_per_run(given[:1]) == given[:1]


def test_an_unforeseen_shape_is_still_one_line(tmp_path):
    path = vllm(tmp_path, lambda d: d.update(itls=["x", [0.1], [0.1], []]))
    with pytest.raises(ImportFileError, match=r"^result.json: itls\[0\] must be a list"):
        read_result_file(path)
