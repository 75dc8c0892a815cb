"""The one voice of validation: a pydantic report becomes one line a user can act on."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from workbench.engine.base.errors import ImportFileError, WorkbenchError
from workbench.engine.base.validation import MAX_TEXT, as_text, place, shown, validated


class _Run(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    ttft_ms: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    count: Annotated[int, Field(ge=1, le=100)]


class _File(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    version: Literal[1]
    runs: list[_Run]


def test_a_valid_value_comes_back_typed():
    got = validated(_File, {"version": 1, "runs": [{"ttft_ms": 1, "count": 2}]}, "f.json")
    assert got.runs[0] == _Run(ttft_ms=1.0, count=2)


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ({"version": 2, "runs": []}, "f.json: version must be 1, got 2"),
        (
            {"version": 1, "runs": [{"ttft_ms": -1, "count": 2}]},
            "f.json: runs[0].ttft_ms must be greater than or equal to 0, got -1",
        ),
        (
            {"version": 1, "runs": [{"ttft_ms": 1, "count": 2.0}]},
            "f.json: runs[0].count must be a whole number, got 2.0",
        ),
        (
            {"version": 1, "runs": [{"ttft_ms": 1, "count": 2, "x": 0}]},
            "f.json: runs[0].x is not a field here",
        ),
        ({"version": 1}, "f.json: runs is missing"),
        ([1], "f.json: must be a table, got [1]"),
        (
            {"version": 1, "runs": [{"ttft_ms": float("nan"), "count": 1}]},
            "f.json: runs[0].ttft_ms must be a finite number, got nan",
        ),
    ],
)
def test_the_first_problem_in_one_line(value, line):
    with pytest.raises(ImportFileError) as caught:
        validated(_File, value, "f.json", ImportFileError)
    assert str(caught.value) == line


def test_a_huge_value_is_named_short():
    with pytest.raises(WorkbenchError) as caught:
        validated(_File, {"version": 1, "runs": [{"ttft_ms": 1, "count": "x" * 10**6}]}, "f")
    assert len(str(caught.value)) < 200


def test_a_nested_value_is_named_short_in_all():
    """A few items at each of a few levels still multiply: 6 lists of 6 lists of long text
    is cut as a whole."""
    nested = [[["z" * 100] * 6] * 6] * 6
    with pytest.raises(WorkbenchError) as caught:
        validated(_File, {"version": 1, "runs": nested}, "f")
    assert len(str(caught.value)) < 250


def test_text_is_not_a_number_when_strict():
    with pytest.raises(WorkbenchError, match="must be a number"):
        validated(float, "1.5", "flag")
    assert validated(float, "1.5", "flag", strict=False) == 1.5


def test_places_and_values_read_as_a_user_writes_them():
    assert place(("runs", 2, "ttft_ms")) == "runs[2].ttft_ms"
    assert place(("runs", 0, "\r")) == "runs[0]['\\r']"  # a key that is no name: its repr
    assert len(place(("k" * 10**6,))) < 100
    assert shown("y" * 500).count("y") < 100


class _Ping(BaseModel):
    model_config = ConfigDict(strict=True)
    op: Literal["ping"]
    seq: int


class _Stop(BaseModel):
    model_config = ConfigDict(strict=True)
    op: Literal["stop"]


_Op = Annotated[_Ping | _Stop, Field(discriminator="op")]


def test_json_text_is_read_as_json():
    assert validated(_Op, b'{"op": "ping", "seq": 3}', "line", json=True) == _Ping(op="ping", seq=3)
    assert validated(tuple[int, ...], "[1, 2]", "line", json=True) == (1, 2)


@pytest.mark.parametrize(
    ("text", "line"),
    [('{"op": "exec"}', "line: op is not a kind known here, got 'exec'"),
     ('{"seq": 1}', "line: op is missing"),
     ('{"op": "ping", "seq": "1"}', "line: ping.seq must be a whole number, got '1'"),
     ("not json", "line: invalid JSON: expected ident at line 1 column 2, got 'not json'"),
     ('{"op": "ping", "seq": 1e999}', "line: ping.seq must be a whole number, got inf")],
)  # fmt: skip
def test_a_json_line_s_first_problem_in_one_line(text, line):
    with pytest.raises(WorkbenchError) as caught:
        validated(_Op, text, "line", json=True)
    assert str(caught.value) == line


def test_an_unknown_key_is_named_whatever_it_looks_like():
    """A key of the input's own that looks like pydantic's internal names (brackets, a
    ``function-`` prefix) is still the field the line names."""
    for key in ("a[0]", "function-x"):
        with pytest.raises(WorkbenchError) as caught:
            validated(_File, {"version": 1, "runs": [], key: 1}, "f.json")
        assert key in str(caught.value) and "  " not in str(caught.value)


def test_as_text_is_bounded_and_never_raises():
    assert as_text("x" * 1000) == "x" * MAX_TEXT
    assert as_text("x" * 1000, 64) == "x" * 64
    assert as_text({"a": 1}) == '{"a": 1}'
    assert as_text(float("nan")) == "NaN"
    loop: list = []
    loop.append(loop)
    assert as_text(loop) == "[[...]]"  # JSON cannot: its repr


def _at_least_0(value: float) -> float:
    if value < 0:
        raise ValueError("must be at least 0: a cost is never negative")
    return value


def _on_or_off(value: str) -> str:
    if value not in ("on", "off"):
        raise ValueError(f"{shown(value)} is not on or off")
    return value


def _sorted(value: list[int]) -> list[int]:
    if value != sorted(value):  # an ``assert``'s error: pytest rewrites one written here
        raise AssertionError("must be in order, smallest first")
    return value


class _Rules(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    cost: Annotated[float, AfterValidator(_at_least_0)] = 0.0
    switch: Annotated[str, AfterValidator(_on_or_off)] = "on"
    steps: Annotated[list[int], AfterValidator(_sorted)] = []
    low: int = 0
    high: int = 0

    @model_validator(mode="after")
    def _low_first(self) -> _Rules:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) is above high ({self.high})")
        return self


@pytest.mark.parametrize(
    ("value", "line"),
    [
        # A rule on one value that does not name it: the value follows, as the library's do.
        ({"cost": -8.7e-05}, "f: cost must be at least 0: a cost is never negative, got -8.7e-05"),
        # One that names it already: not twice.
        ({"switch": "maybe"}, "f: switch 'maybe' is not on or off"),
        # One on a list or a whole table: its words say what is wrong; the input is not echoed.
        ({"steps": [3, 1, 2]}, "f: steps must be in order, smallest first"),
        ({"low": 5, "high": 2}, "f: low (5) is above high (2)"),
    ],
)
def test_a_custom_rule_s_words_are_not_followed_by_what_they_already_say(value, line):
    with pytest.raises(WorkbenchError) as caught:
        validated(_Rules, value, "f")
    assert str(caught.value) == line
