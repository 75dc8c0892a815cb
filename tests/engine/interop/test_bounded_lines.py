"""Reading another program's lines with every bound named: the file, the line, the limit."""

from __future__ import annotations

import os

import pytest

from workbench.engine.base.errors import ExperimentError, ImportFileError
from workbench.engine.interop.files import bounded_lines


def test_lines_come_as_written(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n')
    assert list(bounded_lines(path, ExperimentError, max_lines=3)) == [
        '{"a": 1}\n',
        "\n",
        '{"a": 2}\n',
    ]


def test_one_line_too_many_names_the_limit(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("\n" * 5)
    with pytest.raises(ExperimentError, match=r"t\.jsonl: over 4 lines"):
        list(bounded_lines(path, ExperimentError, max_lines=4))


def test_a_line_too_long_names_its_number(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("short\n" + "x" * 100 + "\n")
    with pytest.raises(ImportFileError, match=r"t\.jsonl:2: a line over 50 bytes"):
        list(bounded_lines(path, max_line_bytes=50))


def test_a_fifo_is_refused_before_it_is_opened(tmp_path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ExperimentError, match=r"pipe\.jsonl: not a file"):
        list(bounded_lines(fifo, ExperimentError))
