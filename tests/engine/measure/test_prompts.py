"""Prompts: unique built-ins, and a user's file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.engine.base.errors import ExperimentError
from workbench.engine.measure.prompts import PromptSource, builtin_prompt, load_prompts


def test_builtin_prompts_are_unique() -> None:
    prompts = [builtin_prompt(i) for i in range(1000)]
    assert len(set(prompts)) == 1000
    assert all(p.startswith(f"Request {i}. ") for i, p in enumerate(prompts))


def test_builtin_prompts_vary_beyond_the_number() -> None:
    bodies = {builtin_prompt(i).split(". ", 1)[1] for i in range(120)}
    assert len(bodies) == 120  # every subject with every task


def test_builtin_source() -> None:
    source = load_prompts("builtin")
    assert source.origin == "builtin" and source.size is None
    assert source.get(5) == builtin_prompt(5)
    assert source.get(5) != source.get(6)


def test_text_file_one_prompt_per_line(tmp_path: Path) -> None:
    path = tmp_path / "prompts.txt"
    path.write_text("  first prompt  \n\nsecond prompt\n   \nthird\n", encoding="utf-8")
    source = load_prompts(str(path))
    assert source.size == 3
    assert source.origin == str(path)
    assert [source.get(i) for i in range(5)] == [
        "first prompt",
        "second prompt",
        "third",
        "first prompt",
        "second prompt",
    ]


def test_jsonl_file(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    lines = [
        json.dumps({"prompt": "a\nmulti-line prompt", "id": 1}),
        "",
        json.dumps({"prompt": "b"}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    source = load_prompts(str(path))
    assert source.size == 2
    assert source.get(0) == "a\nmulti-line prompt"
    assert source.get(1) == "b"


def test_jsonl_bad_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "ok"}\n\n{"prompt": oops}\n', encoding="utf-8")
    with pytest.raises(ExperimentError, match=r"bad\.jsonl:3: not valid JSON"):
        load_prompts(str(path))


@pytest.mark.parametrize("line", ['{"text": "no prompt key"}', '"just a string"', '{"prompt": 3}'])
def test_jsonl_without_a_prompt_string_names_the_line(tmp_path: Path, line: str) -> None:
    path = tmp_path / "shape.jsonl"
    path.write_text('{"prompt": "ok"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(
        ExperimentError, match=r'shape\.jsonl:2: expected an object with a "prompt"'
    ):
        load_prompts(str(path))


@pytest.mark.parametrize(
    ("name", "content"), [("empty.txt", ""), ("blank.txt", "\n  \n"), ("empty.jsonl", "\n\n")]
)
def test_empty_file_is_an_error(tmp_path: Path, name: str, content: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ExperimentError, match=r"holds no prompts") as info:
        load_prompts(str(path))
    assert name in str(info.value)


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ExperimentError, match=r"\[workload\] prompts: cannot read .*nope\.txt"):
        load_prompts(str(tmp_path / "nope.txt"))


def test_relative_path_is_taken_from_base_dir(tmp_path: Path, monkeypatch) -> None:
    experiment_dir = tmp_path / "experiments"
    (experiment_dir / "data").mkdir(parents=True)
    (experiment_dir / "data" / "p.txt").write_text("from the experiment folder\n", "utf-8")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    source = load_prompts("data/p.txt", base_dir=experiment_dir)
    assert source.get(0) == "from the experiment folder"
    with pytest.raises(ExperimentError, match="cannot read"):
        load_prompts("data/p.txt")  # without base_dir, relative to the working directory


def test_prompt_source_from_a_list() -> None:
    source = PromptSource(["x", "y"], origin="test")
    assert [source.get(i) for i in range(4)] == ["x", "y", "x", "y"]
    assert source.size == 2


def test_a_prompt_file_must_be_a_regular_file_of_bounded_size(tmp_path, monkeypatch):
    import os

    from workbench.engine.measure import prompts as module

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ExperimentError, match="is not a regular file"):
        load_prompts(str(fifo))  # would block for ever on reading
    big = tmp_path / "big.txt"
    big.write_text("a prompt\n" * 20)
    monkeypatch.setattr(module, "MAX_PROMPT_FILE_BYTES", 100)
    with pytest.raises(ExperimentError, match="is over 0 MiB"):
        load_prompts(str(big))


def test_a_run_says_where_its_prompts_come_from(tmp_path):
    import asyncio

    from tests.fakes.sse_server import Behaviour, FakeServer
    from workbench.engine.config.experiment import parse_experiment
    from workbench.engine.run.lifecycle import run_experiment
    from workbench.engine.run.runner import RunOptions
    from workbench.engine.store import open_session

    (tmp_path / "mine.txt").write_text("first prompt\nsecond prompt\n")
    experiment = parse_experiment(
        '[workload]\nrequests = 2\nmax_tokens = 2\nwarmup = 0\nprompts = "mine.txt"\n',
        path=str(tmp_path / "e.toml"),
    )

    async def run() -> Path:
        async with FakeServer(Behaviour(tokens=2)) as server:
            options = RunOptions(tmp_path, base_url=server.base_url)
            return (await asyncio.to_thread(run_experiment, experiment, options)).session_path

    with open_session(asyncio.run(run())) as session:
        texts = [n.text for n in session.notices() if n.level == "info"]
    assert f"prompts: 2 from {tmp_path / 'mine.txt'} (not the built-in set)" in texts
