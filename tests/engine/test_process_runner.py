"""The child-process runner: merged token chunks, errors that keep their class."""

from __future__ import annotations

import pytest

from workbench.engine.errors import ModelFileError
from workbench.engine.events import FirstToken, RequestFinished, TokenChunkArrived
from workbench.engine.experiment import parse_experiment
from workbench.engine.process_runner import ProcessRunner, coalesce
from workbench.engine.records import RequestRecord
from workbench.engine.runner import RunOptions


def test_coalesce_merges_each_requests_chunks_and_keeps_everything_else_in_place():
    first = FirstToken(0, 0, 1, 5)
    done = RequestFinished(RequestRecord(0, 0, 2, "p"))
    events = [
        first,
        TokenChunkArrived(0, 0, 1, 5, "He"),
        TokenChunkArrived(0, 0, 2, 6, "Wo"),
        TokenChunkArrived(0, 0, 1, 7, "llo"),
        TokenChunkArrived(0, 0, 2, 8, "rld"),
        done,
    ]
    assert coalesce(events) == [
        first,
        TokenChunkArrived(0, 0, 1, 7, "Hello", count=2),
        TokenChunkArrived(0, 0, 2, 8, "World", count=2),
        done,
    ]
    assert coalesce([]) == []


def test_an_error_while_preparing_comes_back_with_its_class(tmp_path):
    experiment = parse_experiment(f'[server]\nmodel = "{tmp_path / "missing.gguf"}"\n')
    runner = ProcessRunner(experiment, RunOptions(tmp_path / "out"))
    with pytest.raises(ModelFileError, match="model file not found"):
        runner.prepare()
