"""Experiment definitions: what server to start and what load to send it.

An experiment file is TOML with a ``[server]`` and a ``[workload]`` table. Any field given as a
list (other than ``extra_args``, which is a list by nature and sweeps when given as a list of
lists) is a sweep axis; the experiment expands into the Cartesian product of its axes, server
axes outermost so that consecutive configurations differ in the workload last. Each
configuration's settings are validated by pydantic against their declaration
(``settings.validated_as``), so an error names the table and field of the first that is not.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import itertools
import tomllib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import tomli_w

from workbench.engine.base.errors import ExperimentError
from workbench.engine.base.validation import validated
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.settings import (
    CONFIG,
    Field,
    Text,
    field_named,
    fields_of,
    show_value,
    shown,
    validated_as,
)
from workbench.engine.config.workloads import (
    MAX_WORKERS,
    ConversationsWorkload,
    RequestsWorkload,
    TraceWorkload,
    Workload,
    WorkloadSettings,
    kind_of,
)

__all__ = [
    "MAX_CONFIGURATIONS",
    "MAX_WORKERS",
    "SETTINGS",
    "ConversationsWorkload",
    "Experiment",
    "RequestsWorkload",
    "RunConfig",
    "TraceWorkload",
    "Workload",
    "WorkloadSettings",
    "experiment_to_toml",
    "load_experiment",
    "of_its_kinds",
    "parse_experiment",
    "short_name",
    "sweep_count",
    "workload_file",
]

MAX_CONFIGURATIONS = 10_000
"""The most configurations one experiment's sweep may make: each starts a server (about 2 s
before its first measured request with the default model), so 10,000 take the better part of
a day before any request; ``predict`` models each one."""
MAX_FILE_BYTES = 2**20  # an experiment file: a few KB by hand, a sweep of 10,000 values in 1 MiB


SETTINGS = (ServerSettings, WorkloadSettings)
"""The experiment file's tables, in file order."""


def short_name(key: str) -> str:
    """A setting's name in configuration labels and legends (``slots`` is ``np``)."""
    for cls in SETTINGS:
        for f in fields_of(cls):
            if f.name == key:
                return f.short
    return key


@dataclass(frozen=True)
class RunConfig:
    """One point of a sweep: a server setting and a workload, measured ``repeats`` times."""

    index: int
    label: str
    server: ServerSettings
    workload: Workload

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "label": self.label,
            "server": asdict(self.server),
            "workload": asdict(self.workload),
        }


@dataclass(frozen=True)
class Experiment:
    """A parsed, validated experiment file: its tables as the file gives them (a list is a
    sweep axis), and the typed, validated settings of each configuration they make."""

    name: str
    description: str
    server: dict[str, Any]
    workload: dict[str, Any]
    source: str = ""
    path: str | None = None
    sweep_axes: tuple[str, ...] = field(default=())
    zipped: tuple[str, ...] = field(default=())
    """Axes (``table.field``) that step together instead of multiplying: the file's
    top-level ``zip``."""

    def configs(self, external: bool = False) -> list[RunConfig]:
        """Expand the sweep: the Cartesian product of its axes, the zipped ones stepping
        together as one. In external mode server axes cannot be set, so they collapse."""
        return list(self._external if external else self._managed)

    @functools.cached_property
    def _managed(self) -> tuple[RunConfig, ...]:
        return _expand(self.server, self.workload, self.zipped, external=False)

    @functools.cached_property
    def _external(self) -> tuple[RunConfig, ...]:
        return _expand(self.server, self.workload, self.zipped, external=True)

    def count(self, external: bool = False) -> int:
        """How many configurations the sweep makes (``configs``, nothing expanded): the
        zipped axes step as one; in external mode the server's axes collapse."""
        server = {k: v for k, v in self.server.items() if not external}
        return sweep_count(server, self.workload, self.zipped)

    def with_overrides(
        self, server: dict[str, Any] | None = None, workload: dict[str, Any] | None = None
    ) -> Experiment:
        """The same experiment with some fields replaced (CLI flags such as --model or
        --slots), checked as a file's would be. The session keeps what ran: its source
        becomes this experiment written out, with the replaced values."""
        merged = {**self.server, **(server or {})}
        loads = {**self.workload, **(workload or {})}
        changed = _checked(replace(self, server=merged, workload=loads), self.path or "<flags>")
        return replace(changed, source=changed.to_toml())

    def to_toml(self) -> str:
        """This experiment as a file; ``parse_experiment`` reads it back unchanged."""
        return experiment_to_toml(
            self.name, self.description, self.server, self.workload, self.zipped
        )


def _expand(
    server: dict[str, Any], workload: dict[str, Any], zipped: tuple[str, ...], external: bool
) -> tuple[RunConfig, ...]:
    """Every configuration of these tables, each one's settings validated (ExperimentError
    ``[table] field ...`` for the first that is not)."""
    server = {
        k: v
        for k, v in server.items()
        if not (external and field_named(ServerSettings, k).is_axis(v))
    }
    axes = [
        (table, f, values[f.name])
        for table, cls, values in (
            ("server", ServerSettings, server),
            ("workload", WorkloadSettings, workload),
        )
        for f in fields_of(cls)
        if f.name in values and f.is_axis(values[f.name])
    ]
    together = [a for a in axes if f"{a[0]}.{a[1].name}" in zipped]
    if len(together) < 2:
        together = []
    # Each step of the product: one value of every free axis, one row of the zipped ones.
    steps: list[list[tuple[tuple[str, Field, Any], ...]]] = [
        [((a[0], a[1], v),) for v in a[2]] for a in axes if a not in together
    ]
    if together:
        rows = zip(*(a[2] for a in together), strict=True)
        steps.insert(
            axes.index(together[0]),
            [tuple((a[0], a[1], v) for a, v in zip(together, row, strict=True)) for row in rows],
        )
    # The same settings come back in many configurations of a product: each is checked once.
    checked: dict[str, Any] = {}
    configs = []
    for index, parts in enumerate(itertools.product(*steps)):
        picked = sorted((p for part in parts for p in part), key=lambda p: _axis_order(axes, p))
        chosen = {(table, f.name): v for table, f, v in picked}
        s = {k: chosen.get(("server", k), v) for k, v in server.items()}
        w = {k: chosen.get(("workload", k), v) for k, v in workload.items()}
        kind = kind_of(w)
        own = {k: v for k, v in w.items() if k in _names(kind)}
        server_settings = _draft_alone(_settings(ServerSettings, s, checked))
        followed = _follow(own, None if external else server_settings)
        workload_settings = _settings(kind, followed, checked)
        label = " ".join(f"{f.short}={show_value(v)}" for _, f, v in picked)
        configs.append(
            RunConfig(
                index,
                label or _default_label(server_settings, external),
                server_settings,
                workload_settings,
            )
        )
    return tuple(configs)


@functools.cache
def _names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields_of(cls))


def _settings(cls: type, values: dict[str, Any], checked: dict[str, Any]) -> Any:
    key = f"{cls.__name__} {values!r}"
    if key not in checked:
        checked[key] = validated_as(cls, values)
    return checked[key]


def _axis_order(axes: list[tuple[str, Field, Any]], picked: tuple[str, Field, Any]) -> int:
    """Where an axis stands in the file's order (labels read the same however they step)."""
    return next(i for i, a in enumerate(axes) if a[0] == picked[0] and a[1] is picked[1])


def _follow(workload: dict[str, Any], server: ServerSettings | None) -> dict[str, Any]:
    """Workload fields that follow a server field take its value in this configuration
    (``concurrency = "slots"``: as many in flight as slots), or their default where there is
    no such value (``-np -1``; an external server, whose settings the file does not set)."""
    out = dict(workload)
    for f in fields_of(WorkloadSettings):
        if f.setting.follows is not None and out.get(f.name) == f.setting.follows:
            value = None if server is None else getattr(server, f.setting.follows)
            out[f.name] = value if isinstance(value, int) and value > 0 else f.default
    return out


def _draft_alone(server: ServerSettings) -> ServerSettings:
    """Without a draft model the draft's token counts mean nothing: a configuration of a
    sweep over ``draft_model = ["", ...]`` holds none (its server gets no draft flag, and its
    calibration is the plain server's)."""
    if server.draft_model:
        return server
    return replace(server, draft_model=None, draft_max=None, draft_min=None)


def _default_label(server: ServerSettings, external: bool) -> str:
    """A configuration no axis names is named as a slots sweep names its own (``np=2``),
    so a lone run and a sweep point of the same slots read alike; its context is in its
    ctx column."""
    return "external" if external else f"{short_name('slots')}={show_value(server.slots)}"


def workload_file(name: str, spec: str, base_dir: Path | None) -> Path:
    """The file a workload field names (``prompts``, ``trace``, ``conversations_file``):
    relative to the experiment file's folder when it is there, else as given; one that does
    not exist is an error naming the field."""
    path = Path(spec).expanduser()
    if not path.is_absolute() and base_dir is not None and (base_dir / path).exists():
        path = base_dir / path
    if not path.exists():
        raise ExperimentError(f"[workload] {name}: cannot read {path}: no such file")
    return path


def load_experiment(path: str | Path) -> Experiment:
    """Read and validate an experiment file, with errors that name the file and field. At
    most ``MAX_FILE_BYTES`` are read."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise ExperimentError(
                f"experiment file {p} is over {MAX_FILE_BYTES // 2**20} MiB: not an experiment "
                "this version reads"
            )
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise ExperimentError(f"experiment file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ExperimentError(f"cannot read experiment file {p}: {exc}") from None
    return parse_experiment(text, name_hint=p.stem, path=str(p))


@dataclass(frozen=True, kw_only=True)
class _Document:
    """An experiment file's top level, as pydantic checks it; each table's fields are its
    settings class's."""

    __pydantic_config__ = CONFIG

    name: Text | None = None
    description: Text = ""
    zip: list[Text] = field(default_factory=list)
    server: dict[Text, Any] = field(default_factory=dict)
    workload: dict[Text, Any] = field(default_factory=dict)


_TOP_LEVEL = tuple(f.name for f in dataclasses.fields(_Document))


def parse_experiment(
    text: str, name_hint: str = "experiment", path: str | None = None, *, stored: bool = False
) -> Experiment:
    """An experiment from its file's text; ExperimentError in one line naming where and the
    field. ``stored``: the experiment a session kept, perhaps written before a workload
    held its own kind's fields alone (a form wrote every kind's): the fields of another kind
    are left out, as its run ignored them, so that every session reads back."""
    where = path or "<experiment>"
    if len(text) > MAX_FILE_BYTES:  # a session's stored experiment is read here too
        raise ExperimentError(
            f"{where}: over {MAX_FILE_BYTES // 2**20} MiB of text: not an experiment this "
            "version reads"
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ExperimentError(f"{where}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ExperimentError(
            f"{where}: arrays or tables nested hundreds deep: not an experiment (a setting is "
            "a value, a list of values to sweep, or a list of such lists)"
        ) from None
    for key in data:
        if key not in _TOP_LEVEL:
            raise ExperimentError(
                f"{where}: unknown top-level field {shown(key)}{_suggest(key, _TOP_LEVEL)}"
            )
    document: _Document = validated(_Document, data, where, ExperimentError, strict=False)
    experiment = Experiment(
        document.name if document.name is not None else name_hint,
        document.description,
        dict(document.server),
        of_its_kinds(document.workload) if stored else _untouched_left_out(document.workload),
        text,
        path,
        zipped=tuple(document.zip),
    )
    return _checked(experiment, where)


def _checked(experiment: Experiment, where: str) -> Experiment:
    """``experiment`` with its sweep axes, once its tables, its zip, its count and every
    configuration they make are valid; ExperimentError naming ``where`` and the field."""
    server, workload, zipped = experiment.server, experiment.workload, experiment.zipped
    try:
        _check_table(ServerSettings, server)
        _check_table(WorkloadSettings, workload)
        _check_kinds(workload)
        _validate_zip(zipped, server, workload)
        _validate_count(server, workload, zipped)
        configs = _expand(server, workload, zipped, external=False)
        _validate_server_consistency(server)
    except ExperimentError as exc:
        raise ExperimentError(f"{where}: {exc}") from None
    checked = replace(experiment, sweep_axes=_axes(server, workload))
    checked.__dict__["_managed"] = configs  # the configurations just checked are its own
    return checked


def _check_table(cls: type, values: dict[str, Any]) -> None:
    """Every field of a table is one of ``cls``'s, and a list given for one is a sweep it
    takes: at least one value, of a field that sweeps. The values themselves are checked in
    the configurations they make (``validated_as``)."""
    known = {f.name: f for f in fields_of(cls)}
    for key, value in values.items():
        f = known.get(key)
        if f is None:
            raise ExperimentError(
                f"[{cls.TABLE}] unknown field {shown(key)}{_suggest(key, set(known))}"
            )
        if isinstance(value, list) and not value and not f.is_args:
            raise ExperimentError(f"[{cls.TABLE}] {key}: a sweep list must not be empty")
        if not f.setting.sweeps and f.is_axis(value):
            raise ExperimentError(f"[{cls.TABLE}] {key} cannot be swept: {f.setting.unswept}")


def _check_kinds(workload: dict[str, Any]) -> None:
    """Every field of the table belongs to a kind the table is (``kind`` and ``arrival``, or
    each of their values in a sweep: each configuration takes its own kind's fields); a
    trace's times are the trace's, so its arrival is not swept with others."""
    arrivals = _values(workload, "arrival")
    if "trace" in arrivals and len(arrivals) > 1:
        raise ExperimentError(
            "[workload] arrival = 'trace' cannot be swept with other arrivals: a trace run's "
            "times are the trace's"
        )
    kinds = _kinds(workload)
    for key in workload:
        if not any(key in _names(kind) for kind in kinds):
            owners = " or ".join(k.NAME for k in WorkloadSettings.KINDS if key in _names(k))
            which = " or ".join(sorted(k.NAME for k in kinds))
            raise ExperimentError(
                f"[workload] {key} is a field of {owners}, not of this workload ({which})"
            )


def _kinds(workload: dict[str, Any]) -> set[type[WorkloadSettings]]:
    """The kinds of a table's configurations: of each ``kind`` and ``arrival`` it sweeps."""
    arrivals = _values(workload, "arrival")
    return {kind_of({"kind": k, "arrival": a}) for k in _values(workload, "kind") for a in arrivals}


def of_its_kinds(workload: dict[str, Any]) -> dict[str, Any]:
    """A ``[workload]`` table without the fields none of its kinds has: what a form that
    keeps every kind's fields (showing only its kind's) writes."""
    kinds = _kinds(workload)
    return {k: v for k, v in workload.items() if any(k in _names(kind) for kind in kinds)}


def _untouched_left_out(workload: dict[str, Any]) -> dict[str, Any]:
    """A ``[workload]`` table without another kind's fields that hold that kind's default:
    the window's form once wrote every kind's fields, so a file saved by it says ``users``
    and ``turns`` under a requests workload without meaning them. A field of another kind
    set to anything else is a mix of kinds, which ``_check_kinds`` refuses."""
    kinds = _kinds(workload)

    def untouched(key: str, value: Any) -> bool:
        if key in ("kind", "arrival"):  # what says the kinds: never left out
            return False
        owners = [k for k in WorkloadSettings.KINDS if key in _names(k)]
        return any(
            value == (default := field_named(k, key).default)
            and isinstance(value, bool) == isinstance(default, bool)
            for k in owners
        )

    return {
        key: value
        for key, value in workload.items()
        if any(key in _names(kind) for kind in kinds) or not untouched(key, value)
    }


def _values(table: dict[str, Any], name: str) -> list[Any]:
    """A workload field's values in the file: its sweep's, its one value, or its default."""
    value = table.get(name, field_named(WorkloadSettings, name).default)
    return value if isinstance(value, list) else [value]


def _validate_zip(
    zipped: tuple[str, ...], server: dict[str, Any], workload: dict[str, Any]
) -> None:
    """``zip = ["server.slots", "workload.concurrency"]``: two or more sweep axes of the same
    length, which step together (slots 1, 2, 4 with concurrency 1, 2, 4: three
    configurations, not nine)."""
    if not zipped:
        return
    axes = _axes(server, workload)
    if len(zipped) < 2 or len(set(zipped)) != len(zipped):
        raise ExperimentError(f"zip names two or more different axes, got {shown(list(zipped))}")
    for name in zipped:
        if name not in axes:
            known = ", ".join(axes) or "none"
            raise ExperimentError(
                f"zip: {shown(name)} is not a sweep axis of this experiment (its axes: {known})"
            )
    tables = {"server": server, "workload": workload}
    lengths = {name: len(tables[name.split(".")[0]][name.split(".")[1]]) for name in zipped}
    if len(set(lengths.values())) > 1:
        said = ", ".join(f"{name} has {n}" for name, n in lengths.items())
        raise ExperimentError(f"zip: the zipped axes must have as many values each ({said})")


def _axes(server: dict[str, Any], workload: dict[str, Any]) -> tuple[str, ...]:
    """The sweep axes, as ``table.field``."""
    return tuple(
        f"{cls.TABLE}.{k}"
        for cls, values in ((ServerSettings, server), (WorkloadSettings, workload))
        for k, v in values.items()
        if field_named(cls, k).is_axis(v)
    )


def _axis_lengths(server: dict[str, Any], workload: dict[str, Any]) -> dict[str, int]:
    """Each sweep axis (``table.field``) and how many values it has."""
    tables = {"server": server, "workload": workload}
    return {
        axis: len(tables[axis.split(".")[0]][axis.split(".")[1]])
        for axis in _axes(server, workload)
    }


def sweep_count(
    server: dict[str, Any], workload: dict[str, Any], zipped: tuple[str, ...] = ()
) -> int:
    """The configurations a sweep of these (validated) tables makes: the product of its
    axes' lengths, the zipped ones (when two or more) counted once."""
    lengths = _axis_lengths(server, workload)
    together = [axis for axis in lengths if axis in zipped]
    if len(together) < 2:
        together = []
    count = max((lengths[axis] for axis in together), default=1)
    for axis, n in lengths.items():
        if axis not in together:
            count *= n
    return count


def _validate_count(
    server: dict[str, Any], workload: dict[str, Any], zipped: tuple[str, ...]
) -> None:
    """At most ``MAX_CONFIGURATIONS``, said with each axis's length (a list is never
    echoed)."""
    count = sweep_count(server, workload, zipped)
    if count <= MAX_CONFIGURATIONS:
        return
    axes = " x ".join(f"{axis} {n:,}" for axis, n in _axis_lengths(server, workload).items())
    raise ExperimentError(
        f"the sweep makes {count:,} configurations ({axes}), over the {MAX_CONFIGURATIONS:,} "
        "one experiment may run (each starts its server): sweep fewer values, or split it"
    )


def _suggest(key: str, options: set[str] | tuple[str, ...]) -> str:
    if len(key) > 100:  # no name is that long: nothing is close
        return ""
    close = difflib.get_close_matches(key, list(options), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _server_values(server: dict[str, Any], name: str) -> list[Any]:
    value = server.get(name, field_named(ServerSettings, name).default)
    return value if isinstance(value, list) else [value]


def _validate_server_consistency(server: dict[str, Any]) -> None:
    """The draft's token counts mean something only with a draft model, and the fewest
    cannot be more than the most (in a sweep: any fewest against any most); a context is
    not given with ``kv_unified_per_slot``, which makes the pool (``ServerSettings``)."""
    if "ctx" in server and "kv_unified_per_slot" in server:
        raise ExperimentError(
            "[server] ctx and kv_unified_per_slot cannot both be given: the pool is "
            "slots x kv_unified_per_slot, so leave ctx out"
        )
    most = [v for v in _server_values(server, "draft_max") if v is not None]
    fewest = [v for v in _server_values(server, "draft_min") if v is not None]
    if not any(_server_values(server, "draft_model")):
        for name, given in (("draft_max", most), ("draft_min", fewest)):
            if given:
                raise ExperimentError(
                    f'[server] {name} = {shown(given[0])} needs draft_model = "DRAFT.gguf" '
                    "(speculative decoding)"
                )
    if most and fewest and max(fewest) > min(most):
        raise ExperimentError(
            f"[server] draft_min = {max(fewest)} is above draft_max = {min(most)}: the "
            "fewest drafted tokens cannot be more than the most"
        )


def experiment_to_toml(
    name: str,
    description: str,
    server: dict[str, Any],
    workload: dict[str, Any],
    zipped: tuple[str, ...] = (),
) -> str:
    """An experiment file for these fields; ``parse_experiment`` reads it back unchanged
    (tomli-w escapes every string, so a pasted description with control characters is kept)."""
    document: dict[str, Any] = {"name": name}
    if description:
        document["description"] = description
    if zipped:
        document["zip"] = list(zipped)
    for table, values in (("server", server), ("workload", workload)):
        document[table] = {
            key: list(value) if isinstance(value, tuple) else value
            for key, value in values.items()
            if value is not None
        }
    try:
        return tomli_w.dumps(document)
    except TypeError as exc:
        raise ExperimentError(f"cannot write an experiment file: {exc}") from None
