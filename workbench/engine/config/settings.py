"""The schema of an experiment's settings: each field declared once, with everything about it.

A field is a dataclass field of a settings class (``ServerSettings``, a workload kind) whose
annotation says all there is to know about it: its type and constraints as pydantic reads
them (``Int``, ``Number``, ``Text``, ``Switch``, ``Args``; a ``Range``, ``NonEmpty``, a
``Literal`` of choices) and, in the same ``Annotated``, its ``Setting``: the label, meaning,
llama-server flag, short name in labels, form hint and whether it sweeps. Validation (pydantic,
strict: text is not a number, 1.5 is not a count), the form, the TOML writer, the command
line and its flags, comparison labels, reading a stored configuration back and the
documentation's field tables (written at build time by ``docs/hooks/``) are all derived from
these declarations, so a new setting is one declaration.

A settings class is a frozen standard dataclass that pydantic validates (``validated_as``):
code builds and changes one with ``dataclasses`` as any record, and whatever comes in (a file,
a flag, a stored session, a message) is checked against the declaration before it is one.
"""

import dataclasses
import functools
import math
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NoReturn

from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError, core_schema
from typing_extensions import TypedDict

from workbench.engine.base.errors import ExperimentError
from workbench.engine.base.validation import adapter, problem, shown

__all__ = [
    "CONFIG",
    "DAY_S",
    "TIME_FORMS",
    "Args",
    "Field",
    "Finite",
    "Int",
    "NonEmpty",
    "Number",
    "Range",
    "Setting",
    "Strict",
    "Switch",
    "Text",
    "as_typed",
    "error_line",
    "field_named",
    "fields_of",
    "from_stored",
    "refuse",
    "revalidated",
    "seconds_from_text",
    "setting",
    "show_value",
    "shown",
    "validated_as",
]

DAY_S = 86_400.0

CONFIG: dict[str, Any] = {"extra": "forbid"}
"""A settings class's pydantic configuration (its ``__pydantic_config__``): a field it does
not declare is refused. Strictness is each field's own (``Int``, ``Number``, ...)."""


class Strict:
    """A value taken as it is or refused, never coerced (pydantic's strict mode, for one
    type): no text as a number, no 1.5 as a count, no true as 1. (pydantic's own ``Strict``
    is in a module a tenth of a second to import; this marker needs none of it.)"""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        schema = handler(source)
        schema["strict"] = True
        return schema


class Finite:
    """A number that is finite: no inf, no nan."""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        schema = handler(source)
        schema["allow_inf_nan"] = False
        return schema


class _AsTuple:
    """A list (a file's) as the tuple a settings record holds."""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        return core_schema.no_info_before_validator_function(_as_tuple, handler(source))


def _as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


# The types a field is declared with: strict, so that what a file or flag gives is taken as
# it is or refused, never coerced (a count of 1.5, "2" for a number, true for 1).
Int = Annotated[int, Strict()]
Number = Annotated[float, Strict()]  # a whole number is a number too (TOML's 2 for 2.0)
Text = Annotated[str, Strict()]
Switch = Annotated[bool, Strict()]
Args = Annotated[tuple[Text, ...], _AsTuple()]
"""A list of arguments: a file's list of text, held as a tuple."""


def as_typed(value: float) -> str:
    """A bound as a user types it: 10000000, 0.001, -1."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


TIME_FORMS = "90, 90s, 10m or 1h"
"""How a time is typed (``seconds_from_text``), as an error or a tooltip says it."""
_TIME = re.compile(r"\s*([-+]?\d+(?:\.\d*)?)\s*([smh]?)\s*")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600}


def seconds_from_text(text: str) -> float:
    """A time as a user types it, on a flag or in a field: ``90``, ``90s``, ``10m`` or
    ``1h``, in seconds; ValueError in words if it is not one. A sign is read, so that ``-5``
    is refused by the bound it breaks, which says what is allowed."""
    found = _TIME.fullmatch(text.lower())
    if found is None:
        raise ValueError(f"{shown(text)} is not a time ({TIME_FORMS})")
    return float(found[1]) * _UNIT_S[found[2]]


def time_refused(text: str, low_s: float, high_s: float) -> str:
    """Why ``text`` is no time from ``low_s`` to ``high_s``, each bound in hours where it is
    a whole number of them (24 h), else in seconds as typed (0.001 s, 10000000 s)."""

    def bound(seconds: float) -> str:
        hours = seconds / 3600
        return f"{hours:g} h" if hours >= 1 and hours.is_integer() else f"{as_typed(seconds)} s"

    return (
        f"must be a time from {bound(low_s)} to {bound(high_s)} ({TIME_FORMS}), got {shown(text)}"
    )


@dataclass(frozen=True)
class Range:
    """A number from ``low`` to ``high`` (both allowed), or one of ``also`` (-1 for 'auto');
    ``note`` says what the odd values mean, after the bounds in an error."""

    low: float
    high: float
    also: tuple[float, ...] = ()
    note: str = ""

    def words(self) -> str:
        extra = f" ({self.note})" if self.note else ""
        return f"must be between {as_typed(self.low)} and {as_typed(self.high)}{extra}"

    def allows(self, value: float | None) -> bool:
        """Whether ``value`` is within: None (a field left to the server) always is."""
        return value is None or value in self.also or self.low <= value <= self.high

    def _check(self, value: Any) -> Any:
        if self.allows(value):
            return value
        raise PydanticCustomError("range", "{words}", {"words": self.words()})

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        return core_schema.no_info_after_validator_function(self._check, handler(source))


@dataclass(frozen=True)
class NonEmpty:
    """Text that must not be empty; ``message`` says what it must be instead."""

    message: str

    def _check(self, value: Any) -> Any:
        if value or value is None:
            return value
        raise PydanticCustomError("empty", "{words}", {"words": self.message})

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        return core_schema.no_info_after_validator_function(self._check, handler(source))


@dataclass(frozen=True)
class Setting:
    """What the rest of the program needs to know about one field besides its type."""

    label: str
    """The form's label and the short description."""
    help: str
    """What the field means (the documentation's table, the form's tooltip)."""
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
    sweeps: bool = True
    """Whether a list of values is a sweep axis (an argument list sweeps as a list of
    lists); a field that cannot be swept says why (``unswept``)."""
    unswept: str = ""


def setting(**declared: Any) -> Setting:
    """A field's ``Setting``, written inside its ``Annotated`` beside its type."""
    return Setting(**declared)


def refuse(name: str, value: Any, message: str) -> NoReturn:
    """A rule between fields is broken: the one line ``message`` (naming ``name``, the
    field to change) as pydantic's error, located on that field."""
    error = PydanticCustomError("rule", "{words}", {"words": message})
    detail = InitErrorDetails(type=error, loc=(name,), input=value)
    raise ValidationError.from_exception_data("settings", [detail])


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
    choices: tuple[str, ...] = ()
    """A field of choices (a ``Literal``): the values allowed, in order."""
    range: Range | None = None
    required: str = ""
    """Text that must not be empty: what to say when it is."""
    annotation: Any = None
    """The field's declared type with its constraints, as pydantic validates it."""
    kinds: tuple[type, ...] = ()
    """Of a table of several kinds (``[workload]``): the kinds that have this field."""

    @property
    def short(self) -> str:
        return self.setting.short or self.name

    @property
    def is_args(self) -> bool:
        return self.kind is tuple

    def is_axis(self, value: Any) -> bool:
        """A list is a sweep; an argument list sweeps when it is a list of lists."""
        if self.is_args:  # anything else (a number) is no sweep: its own check says why
            return (
                isinstance(value, list | tuple)
                and bool(value)
                and all(isinstance(v, list | tuple) for v in value)
            )
        return isinstance(value, list)

    def from_text(self, text: str) -> Any:
        """One value as typed on a command line or in the form (``"4"``, ``"on"``), as the
        file would hold it; ValueError says why it is not one. The value is then validated
        as a file's is (``validated``)."""
        text = text.strip()
        if self.setting.follows is not None and text == self.setting.follows:
            return text
        if self.kind is bool:
            if text.lower() not in BOOL_WORDS:
                raise ValueError(f"{shown(text)} is not on or off")
            return BOOL_WORDS[text.lower()]
        if self.kind in (int, float):
            try:
                number = self.kind(text)
            except ValueError:
                noun = "a whole number" if self.kind is int else "a number"
                raise ValueError(f"{shown(text)} is not {noun}") from None
            if not math.isfinite(number):
                raise ValueError(f"{shown(text)} is not a finite number")
            return number
        return text

    def validated(self, value: Any) -> Any:
        """``value`` (one value, not a sweep) as this field holds it, or ExperimentError
        naming the table and field: what the form, the flags and a tune's space check."""
        try:
            return adapter(_one_value(self)).validate_python({self.name: value})[self.name]
        except ValidationError as exc:
            raise ExperimentError(_line(self.table, exc, {self.name: self}, {})) from None

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


@functools.cache
def _one_value(f: Field) -> Any:
    """A table of ``f`` alone, as pydantic validates it (so that its errors name it); a field
    that follows a server field may also say that field's name."""
    kind = f.annotation
    if f.setting.follows is not None:
        kind = kind | Literal[f.setting.follows]
    return TypedDict(f"{f.table}_{f.name}", {f.name: kind})  # type: ignore[operator]


BOOL_WORDS = {"on": True, "true": True, "yes": True, "off": False, "false": False, "no": False}
"""What a flag or a tune's space may say for a boolean."""


def _unwrap(hint: Any) -> tuple[Any, list[Any]]:
    """A type and its ``Annotated`` metadata, nested ones flattened."""
    metadata: list[Any] = []
    while typing.get_origin(hint) is Annotated:
        metadata = [*hint.__metadata__, *metadata]
        hint = hint.__origin__
    return hint, metadata


def _describe(hint: Any) -> tuple[type, bool, tuple[str, ...], list[Any]]:
    """(kind, optional, choices, metadata) of a declared annotation: ``Int | None`` is an
    optional int, ``Literal["on", "off"]`` text of two choices."""
    hint, metadata = _unwrap(hint)
    optional = False
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(members) < len(typing.get_args(hint))
        hint, inner = _unwrap(members[0])
        metadata = [*inner, *metadata]
    if typing.get_origin(hint) is Literal:
        return str, optional, tuple(typing.get_args(hint)), metadata
    return typing.get_origin(hint) or hint, optional, (), metadata


@functools.cache
def fields_of(cls: type) -> tuple[Field, ...]:
    """The declared fields of a settings class, in declaration order; of the base of a table
    of several kinds (its ``KINDS``), every kind's, in the table's order (its ``ORDER``)."""
    if cls.__dict__.get("KINDS"):
        return _merged(cls)
    table = cls.TABLE
    hints = typing.get_type_hints(cls, include_extras=True)
    out = []
    for f in dataclasses.fields(cls):
        kind, optional, choices, metadata = _describe(hints[f.name])
        found = {type(m): m for m in metadata}
        out.append(
            Field(
                table,
                f.name,
                f.default,
                kind,
                optional,
                found[Setting],
                choices,
                found.get(Range),
                found[NonEmpty].message if NonEmpty in found else "",
                hints[f.name],
                (cls,),
            )
        )
    return tuple(out)


def _merged(base: Any) -> tuple[Field, ...]:
    """Each field of any kind once: its first kind's declaration, the choices of every kind
    that has it (``kind``: requests or conversations), the kinds that have it."""
    named: dict[str, Field] = {}
    for kind in base.KINDS:
        for f in fields_of(kind):
            first = named.get(f.name)
            if first is None:
                named[f.name] = f
                continue
            choices = tuple(dict.fromkeys((*first.choices, *f.choices)))
            annotation = first.annotation
            if choices != first.choices:
                annotation = Annotated[Literal[choices], first.setting]  # type: ignore[valid-type]
            named[f.name] = dataclasses.replace(
                first, choices=choices, annotation=annotation, kinds=(*first.kinds, kind)
            )
    place = {name: i for i, name in enumerate(base.ORDER)}
    return tuple(sorted(named.values(), key=lambda f: place.get(f.name, len(place))))


def field_named(cls: type, name: str) -> Field:
    return next(f for f in fields_of(cls) if f.name == name)


def validated_as(cls: type, values: Mapping[str, Any]) -> Any:
    """Settings of ``cls`` from ``values`` (one value a field, none a sweep), every field and
    every rule between fields checked; ExperimentError in one line ``[table] field ...``."""
    try:
        return adapter(cls).validate_python(dict(values))
    except ValidationError as exc:
        raise ExperimentError(error_line(cls, exc, values)) from None


def revalidated(settings: Any) -> Any:
    """Settings built elsewhere (read from a message, field by field) validated as a file's
    are: the same settings, or ExperimentError ``[table] field ...``."""
    return validated_as(
        type(settings), {f.name: getattr(settings, f.name) for f in fields_of(type(settings))}
    )


def error_line(cls: type, exc: ValidationError, values: Mapping[str, Any]) -> str:
    """Pydantic's first error about settings of ``cls`` as the one line a user reads:
    ``[workload] users must be between 1 and 10000, got 0``."""
    table = next(c for c in cls.__mro__ if "TABLE" in c.__dict__)
    known = {f.name: f for f in fields_of(table)}
    return _line(table.TABLE, exc, known, values)


def _line(table: str, exc: ValidationError, known: Mapping[str, Field], values: Any) -> str:
    first = exc.errors(include_url=False)[0]
    loc = first["loc"]
    name = loc[0] if loc and isinstance(loc[0], str) else ""
    f = known.get(name)
    value = values[name] if name in values else first.get("input")
    if first["type"] == "rule":
        return f"[{table}] {first['msg']}"
    if f is not None and f.is_args and (len(loc) > 1 or first["type"] != "missing"):
        return (
            f"[{table}] {name} must be a list of strings (or a list of such lists to sweep), "
            f"got {shown(value)}"
        )
    if first["type"] == "unexpected_keyword_argument":  # a field a stored record does not have
        return f"[{table}] {name} is not a field here"
    if f is not None and f.choices and first["type"] == "literal_error":
        return f"[{table}] {name} must be one of {', '.join(f.choices)}, got {shown(value)}"
    return f"[{table}] {problem(exc)}"


def from_stored(cls: type, values: Any) -> Any:
    """Settings from a stored configuration (a session's JSON, perhaps from another version
    or another machine): unknown fields are dropped, and a missing or invalid value takes the
    field's default (an invalid pair, the field a rule names), so nothing unchecked reaches a
    figure."""
    if isinstance(values, cls):
        return values
    given = values if isinstance(values, Mapping) else {}
    if cls.__dict__.get("KINDS"):
        cls = cls.kind_for(given)  # the kind the stored values say
    names = {f.name for f in fields_of(cls)}
    kept = {k: v for k, v in given.items() if k in names}
    reader = adapter(cls)
    while True:
        try:
            return reader.validate_python(kept)
        except ValidationError as exc:
            wrong = {e["loc"][0] for e in exc.errors() if e["loc"] and e["loc"][0] in kept}
            if not wrong:
                return cls()
            for name in wrong:
                del kept[name]


def show_value(value: Any) -> str:
    """A value as configuration labels and legends show it: on/off, space-joined lists."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list | tuple):
        return " ".join(map(str, value)) or "none"
    return str(value) or "none"  # an empty path: no file (``draft_model = ""``)
