"""What the fuzz tests feed a reader: any JSON value, a valid document changed in a few
places (a value replaced by another of any kind or by one just out of range, a key taken out,
a key added), and a valid file's bytes changed."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()  # NaN and the infinities too: json.dumps writes them, a hand may as well
    | st.text(max_size=30)
)
JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=20), inner, max_size=5)
    ),
    max_leaves=20,
)
"""Any JSON value (as ``json.loads`` gives one), nested a few levels."""

NEAR = st.sampled_from(
    [
        None, True, False, 0, -1, 1.5, -1e-9, -0.0, 1e7 + 1, 1e300, -1e300, 10**12 + 1, 2**63,
        float("nan"), float("inf"), float("-inf"), "", "1", "x" * 5000, "a\x1b[2J", "\u2028",
        [], {}, [1], {"": None},
    ]
).map(copy.deepcopy)  # fmt: skip
"""Values just beside what a field holds: a wrong kind, out of range, empty, huge (each a
copy: a later change may go into it)."""


NESTED = st.builds(
    lambda depth, kind: kind[0] * depth + kind[1] + kind[2] * depth,
    st.integers(1, 40_000),
    st.sampled_from(
        [("[", "", "]"), ('{"a": ', "1", "}"), ('{"version": 1, "costs": ', "{}", "}")]
    ),
)
"""A file's text nested deep: what takes a recursive reader past Python's stack."""


def _places(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a document: the path of keys and indexes to each value."""
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _places(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _places(value, (*path, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, document: dict[str, Any]) -> Any:
    """``document`` with one to four changes, each at a place drawn from those it has then."""
    changed: Any = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(_places(changed)))
        what = draw(st.sampled_from(["replace", "near", "remove", "add"]))
        if not path:
            if what in ("replace", "near"):
                changed = draw(JSON if what == "replace" else NEAR)
            continue
        *above, last = path
        parent = changed
        for key in above:
            parent = parent[key]
        if what == "replace":
            parent[last] = draw(JSON)
        elif what == "near":
            parent[last] = draw(NEAR)
        elif what == "remove":
            del parent[last]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=20))] = draw(JSON)
        else:
            parent.insert(last, draw(JSON))
    return changed


@st.composite
def mutated_bytes(draw: st.DrawFn, text: str) -> bytes:
    """A file's bytes with a few cut out, replaced or put in."""
    data = bytearray(text.encode())
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        cut = draw(st.integers(0, 8))
        data[at : at + cut] = draw(st.binary(max_size=8))
    return bytes(data)


def dumped(document: Any) -> str:
    """A document as a file holds it: NaN and the infinities as Python's json writes them."""
    return json.dumps(document)
