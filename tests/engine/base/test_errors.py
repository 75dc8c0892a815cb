"""Every error a user can act on reaches them as one line and a non-zero exit, never a
traceback."""

from __future__ import annotations

import argparse

import pytest

import workbench.cli.main as cli_main
from workbench.cli.exit_codes import EXIT_ERROR
from workbench.engine.base import errors

ERRORS = [
    value
    for value in vars(errors).values()
    if isinstance(value, type)
    and issubclass(value, Exception)
    and value.__module__ == errors.__name__
]


def test_every_error_of_the_module_is_a_workbench_error_that_says_what_it_is_for() -> None:
    assert len(ERRORS) > 1
    for error in ERRORS:
        assert issubclass(error, errors.WorkbenchError) and error.__doc__


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: e.__name__)
def test_the_cli_prints_each_as_one_line(monkeypatch, capsys, error) -> None:
    def handler(args: argparse.Namespace, console: object) -> int:
        raise error("the file x.toml: slots must be 1 to 1024 (got 0)")

    parser = argparse.ArgumentParser()
    parser.set_defaults(handler=handler)
    monkeypatch.setattr(cli_main, "build_parser", lambda: parser)
    assert cli_main.main([]) == EXIT_ERROR
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "slots must be 1 to 1024 (got 0)" in lines[0]
    assert "Traceback" not in captured.err
