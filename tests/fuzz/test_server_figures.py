"""A server's figures fuzzed: whatever JSON a ``usage`` or ``timings`` table holds, the client
keeps a table of at most ``MAX_KEYS`` short keys whose values are a number within bounds, as
it came, or that value's bounded text (a nested table once more); it never raises."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.json_documents import JSON, NEAR
from workbench.engine.base.validation import MAX_NUMBER, MAX_TEXT, as_text
from workbench.engine.measure.client import MAX_KEYS, numbers

_VALUES = JSON | NEAR
_TABLES = st.dictionaries(
    st.text(max_size=80), _VALUES | st.dictionaries(st.text(max_size=80), _VALUES), max_size=70
)


def _figure(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and abs(value) <= MAX_NUMBER
    )


def _kept(value: Any, kept: Any) -> None:
    if value is None or _figure(value):
        assert kept == value and type(kept) is type(value)
    else:
        assert kept == as_text(value) and len(kept) <= MAX_TEXT


@given(_TABLES)
def test_a_server_table_keeps_its_figures_and_the_rest_as_text(table: dict[str, Any]) -> None:
    kept = numbers(table)
    expected_keys = list(dict.fromkeys(k[:64] for k in list(table)[:MAX_KEYS]))
    assert list(kept) == expected_keys
    last = {k[:64]: v for k, v in list(table.items())[:MAX_KEYS]}
    for key, value in last.items():
        if isinstance(value, dict):
            inner = {k[:64]: v for k, v in list(value.items())[:MAX_KEYS]}
            assert list(kept[key]) == list(dict.fromkeys(inner))
            for k, v in inner.items():
                _kept(v, kept[key][k])
        else:
            _kept(value, kept[key])
