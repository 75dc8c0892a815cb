"""The schema of an experiment's settings: each field declared once, with everything about it.

A field is a dataclass field of ``ServerSettings`` or ``WorkloadSettings`` whose metadata is a
``Setting``: its label, meaning, bounds or choices, the llama-server flag it becomes, its short
name in configuration labels, and whether the window's form shows it. Validation, the form,
the TOML writer, the server's command line, comparison labels, reading a stored configuration
back and the documentation's field tables (written at build time by ``docs/hooks/``) are all
derived from these declarations, so a new setting is one declaration (PyMeasure's
``Parameter``s drive both its inputs and its results the same way).
"""

from __future__ import annotations

import dataclasses
import functools
import reprlib
import types
import typing
from dataclasses import dataclass
from typing import Any

from workbench.engine.base.errors import ExperimentError

DAY_S = 86_400.0

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict = 3, 6, 6, 4
_SHORT.maxstring = _SHORT.maxother = 80
_SHORT.maxlong = 40


def shown(value: Any) -> str:
    """A value as an error line names it: its repr, cut short (a few items, a few levels,
    80 characters of text), so a line never echoes a megabyte a file or flag held."""
    return _SHORT.repr(value)


@dataclass(frozen=True)
class Setting:
    """What the rest of the program needs to know about one field."""

    label: str
    """The form's label and the short description."""
    help: str
    """What the field means (the documentation's table, the form's tooltip)."""
    low: float | None = None
    high: float | None = None
    also: tuple[float, ...] = ()
    """Values allowed outside [low, high] (e.g. -1 for 'auto')."""
    note: str = ""
    """Said after a bounds error: what the odd values mean."""
    choices: tuple[str, ...] = ()
    required: str = ""
    """A text field that must not be empty: what to say when it is."""
    flag: str | None = None
    """The llama-server flag that takes this value."""
    with_flags: tuple[str, ...] = ()
    """Flags the server needs beside ``flag`` whenever it is given (a draft model is used only
    with ``--spec-type draft-simple``)."""
    switch: tuple[str, str] | None = None
    """A boolean's llama-server flags when on and off (none given when the value is None)."""
    short: str | None = None
    """The name in configuration labels (``np=4``); the field name when None."""
    in_form: bool = False
    hint: str = ""
    """The form's placeholder; ``{cores}`` becomes this machine's core count."""
    file_filter: str = ""
    """A file-picking field: the dialog's filter."""
    follows: str | None = None
    """A server field whose value this one may take in each configuration of a sweep: the
    file gives that field's name (``concurrency = "slots"``) instead of a number."""


def setting(default: Any, **declared: Any) -> Any:
    """A dataclass field carrying its ``Setting``; ``default`` is the value a file may omit."""
    return dataclasses.field(default=default, metadata={"setting": Setting(**declared)})


@dataclass(frozen=True)
class Field:
    """One declared field as the rest of the program sees it."""

    table: str
    name: str
    default: Any
    kind: type
    """int, float, str, bool, or tuple (a list of arguments)."""
    optional: bool
    """None is allowed: 'leave it to the server'."""
    setting: Setting

    @property
    def short(self) -> str:
        return self.setting.short or self.name

    @property
    def is_args(self) -> bool:
        return self.kind is tuple

    def accepted_types(self) -> tuple[type, ...]:
        return (int, float) if self.kind is float else (self.kind,)

    def is_axis(self, value: Any) -> bool:
        """A list is a sweep; an argument list sweeps when it is a list of lists."""
        if self.is_args:
            return bool(value) and all(isinstance(v, list | tuple) for v in value)
        return isinstance(value, list)

    def problem(self, value: Any) -> str | None:
        """Why ``value`` (one value, not a sweep) is not allowed, or None."""
        if self.setting.follows is not None and value == self.setting.follows:
            return None
        types_ = self.accepted_types()
        # bool is an int in Python; a number field must not silently accept true/false.
        if (bool not in types_ and isinstance(value, bool)) or not isinstance(value, types_):
            names = " or ".join("number" if t is float else t.__name__ for t in types_)
            return f"must be {names}, got {shown(value)}"
        s = self.setting
        if s.required and not value:
            return f"{s.required}, got {shown(value)}"
        if s.choices and value not in s.choices:
            return f"must be one of {', '.join(s.choices)}, got {shown(value)}"
        bounded = s.low is not None and s.high is not None and value not in s.also
        if bounded and not s.low <= value <= s.high:  # type: ignore[operator]
            extra = f" ({s.note})" if s.note else ""
            return f"must be between {s.low:g} and {s.high:g}{extra}, got {shown(value)}"
        return None

    def check(self, value: Any) -> None:
        """Raise ExperimentError naming the table and field for a bad value or sweep."""
        where = f"[{self.table}] {self.name}"
        if self.is_args:
            for v in value if self.is_axis(value) else [value]:
                if not isinstance(v, list | tuple) or not all(isinstance(a, str) for a in v):
                    raise ExperimentError(
                        f"{where} must be a list of strings "
                        f"(or a list of such lists to sweep), got {shown(value)}"
                    )
            return
        if isinstance(value, list) and not value:
            raise ExperimentError(f"{where}: a sweep list must not be empty")
        for v in value if isinstance(value, list) else [value]:
            problem = self.problem(v)
            if problem:
                raise ExperimentError(f"{where} {problem}")

    def flags(self, value: Any) -> list[str]:
        """This field's part of the llama-server command line."""
        s = self.setting
        if value is None or value == "":  # "" is a path field's "none"
            return []
        if s.switch is not None:
            return [s.switch[0] if value else s.switch[1]]
        if s.flag is not None:
            return [s.flag, str(value), *s.with_flags]
        return []


def _kind(hint: Any) -> tuple[type, bool]:
    """(kind, optional) from a field's annotation: ``int | None`` is an optional int."""
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        kinds = [a for a in args if a is not type(None)]
        return _kind(kinds[0])[0], type(None) in args
    origin = typing.get_origin(hint)
    return (origin or hint), False


@functools.cache
def fields_of(cls: type) -> tuple[Field, ...]:
    """The declared fields of a settings class, in declaration order."""
    table = cls.__dict__["TABLE"]
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        kind, optional = _kind(hints[f.name])
        out.append(Field(table, f.name, f.default, kind, optional, f.metadata["setting"]))
    return tuple(out)


def field_named(cls: type, name: str) -> Field:
    return next(f for f in fields_of(cls) if f.name == name)


def from_stored(cls: type, values: dict[str, Any]) -> Any:
    """Settings from a stored configuration (a session's JSON, perhaps from another version
    or another machine): unknown fields are dropped, and a missing or invalid value takes the
    field's default, so nothing unchecked reaches a figure."""
    kept = {}
    for f in fields_of(cls):
        value = values.get(f.name, f.default)
        if f.is_args:
            valid = isinstance(value, list | tuple) and all(isinstance(a, str) for a in value)
            kept[f.name] = tuple(value) if valid else f.default
        elif value is None:
            kept[f.name] = None if f.optional else f.default
        else:
            kept[f.name] = value if f.problem(value) is None else f.default
    return cls(**kept)


def show_value(value: Any) -> str:
    """A value as configuration labels and legends show it: on/off, space-joined lists."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list | tuple):
        return " ".join(map(str, value)) or "none"
    return str(value) or "none"  # an empty path: no file (``draft_model = ""``)
