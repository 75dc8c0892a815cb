"""The experiment file reader, fuzzed: whatever TOML comes in (made up, a shipped experiment
changed, its text cut or spliced), ``parse_experiment`` either gives an experiment whose
configurations expand and whose file reads back the same, or refuses it with one
``ExperimentError`` line; nothing else escapes."""

from __future__ import annotations

import datetime
import tomllib
from pathlib import Path
from typing import Any

import tomli_w
from hypothesis import event, given
from hypothesis import strategies as st

from workbench.engine.base.errors import ExperimentError
from workbench.engine.config.experiment import SETTINGS, parse_experiment
from workbench.engine.config.settings import fields_of

SHIPPED = sorted((Path(__file__).resolve().parents[2] / "experiments").glob("*.toml"))
TEXTS = [p.read_text(encoding="utf-8") for p in SHIPPED]
NAMES = sorted({f.name for cls in SETTINGS for f in fields_of(cls)})
TOP = ["name", "description", "zip", "server", "workload"]

numbers = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=-3, max_value=300),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 0.5, 1e-300, 1e300, 2**63 - 1]),
)
words = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["slots", "requests", "conversations", "trace", "burst", "poisson", ""]),
    st.sampled_from(["chat", "on", "off", "auto", "q8_0", "default", "server.slots"]),
)
scalars = st.one_of(
    numbers,
    words,
    st.booleans(),
    st.datetimes(min_value=datetime.datetime(1, 1, 1)),
    st.dates(),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(st.sampled_from(NAMES) | st.text(max_size=8), inner, max_size=4),
    ),
    max_leaves=20,
)
tables = st.dictionaries(st.sampled_from(NAMES) | st.text(max_size=12), values, max_size=8)
documents = st.dictionaries(
    st.sampled_from(TOP) | st.text(max_size=10),
    st.one_of(tables, values),
    max_size=6,
)


def _refused_in_one_line(text: str) -> None:
    """The reader's whole contract on ``text``: an experiment that expands and writes back,
    or one line of ExperimentError."""
    try:
        experiment = parse_experiment(text)
    except ExperimentError as exc:
        event("refused")
        said = str(exc)
        assert "\n" not in said and "\r" not in said, said
        assert 0 < len(said) < 2000, said
        return
    event("read")
    configs = experiment.configs()
    assert len(configs) == experiment.count() >= 1
    assert len(experiment.configs(external=True)) == experiment.count(external=True)
    again = parse_experiment(experiment.to_toml())
    assert [c.to_dict() for c in again.configs()] == [c.to_dict() for c in configs]


def _dumped(document: dict[str, Any]) -> str | None:
    try:
        return tomli_w.dumps(document)
    except (TypeError, ValueError):  # what TOML cannot hold (a table inside an array of values)
        return None


@given(documents)
def test_any_toml_document_is_read_or_refused_in_one_line(document):
    text = _dumped(document)
    if text is not None:
        _refused_in_one_line(text)


@given(
    st.sampled_from(TEXTS),
    st.lists(
        st.tuples(
            st.sampled_from(["drop", "set", "wrap", "move"]),
            st.sampled_from(["server", "workload"]),
            st.sampled_from(NAMES),
            values,
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_a_shipped_experiment_changed_is_read_or_refused_in_one_line(text, changes):
    document = tomllib.loads(text)
    for change, table, name, value in changes:
        values_of = document.setdefault(table, {})
        if change == "drop":
            values_of.pop(name, None)
        elif change == "set":
            values_of[name] = value
        elif change == "wrap" and name in values_of:
            values_of[name] = [values_of[name], value]
        elif change == "move" and values_of:
            moved = next(iter(values_of))
            other = document.setdefault("server" if table == "workload" else "workload", {})
            other[moved] = values_of.pop(moved)
    dumped = _dumped(document)
    if dumped is not None:
        _refused_in_one_line(dumped)


@given(st.sampled_from(TEXTS), st.integers(min_value=0), st.integers(min_value=0), st.text())
def test_a_shipped_experiments_text_cut_and_spliced_is_read_or_refused(text, at, length, extra):
    start = at % (len(text) + 1)
    _refused_in_one_line(text[:start] + extra + text[start + length % 200 :])
