"""The bounds of the numbers a command's flags take: a flag that takes a server setting's value
(``plan --slots``, ``plan --ctx``) is checked by the setting's own schema."""

from __future__ import annotations

import argparse

import pytest

from workbench.cli.bounds import PLAN_CTX, PLAN_SLOTS, Bounded
from workbench.engine.config.settings import Field


def test_a_settings_flag_allows_what_its_schema_allows_and_says_the_bounds():
    assert PLAN_SLOTS("1,4,-1") == [1, 4, -1]  # -1: auto, as the schema allows
    assert PLAN_CTX("1,8192") == [1, 8192]
    with pytest.raises(argparse.ArgumentTypeError, match="from 1 to 1024 or -1"):
        PLAN_SLOTS("0")
    with pytest.raises(argparse.ArgumentTypeError, match="from 1 to 10000000"):
        PLAN_CTX("0")  # narrower than the schema: a plan's context cannot be 'the model's'


def test_the_schemas_check_decides_for_a_settings_flag(monkeypatch):
    """What the schema refuses, the flag refuses, even within the bounds it says."""
    slots = Bounded.of_setting("slots")
    assert slots("3") == 3
    schema_problem = Field.problem

    def problem(self: Field, value: object) -> str | None:
        return "not 3" if value == 3 else schema_problem(self, value)

    monkeypatch.setattr(Field, "problem", problem)
    with pytest.raises(argparse.ArgumentTypeError):
        slots("3")
    assert slots("4") == 4
