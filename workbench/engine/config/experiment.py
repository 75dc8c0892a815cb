"""Experiment definitions: what server to start and what load to send it.

An experiment file is TOML with a ``[server]`` and a ``[workload]`` table. Any field given as a
list (other than ``extra_args``, which is a list by nature and sweeps when given as a list of
lists) is a sweep axis; the experiment expands into the Cartesian product of its axes, server
axes outermost so that consecutive configurations differ in the workload last.
"""

from __future__ import annotations

import difflib
import itertools
import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from workbench.engine.base.errors import ExperimentError

ARRIVALS = ("burst", "poisson", "fixed")
ENDPOINTS = ("chat", "completion")
KV_CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")


@dataclass(frozen=True)
class ServerSettings:
    """How to start one llama-server (ignored in external mode, where the server exists)."""

    model: str = "default"
    slots: int = 1
    ctx: int = 8192
    cont_batching: bool = True
    kv_unified: bool | None = None
    cache_type_k: str | None = None
    cache_type_v: str | None = None
    threads: int | None = None
    batch_size: int | None = None
    ubatch_size: int | None = None
    gpu_layers: int | None = None
    port: int | None = None
    cache_ram_mib: int | None = 0
    extra_args: tuple[str, ...] = ()
    startup_timeout_s: float = 120.0


@dataclass(frozen=True)
class WorkloadSettings:
    """The requests fired at a server for one configuration."""

    requests: int = 8
    concurrency: int = 0
    arrival: str = "burst"
    rate: float = 0.0
    max_tokens: int = 64
    temperature: float = 0.0
    seed: int = 42
    prompts: str = "builtin"
    endpoint: str = "chat"
    cache_prompt: bool = False
    ignore_eos: bool = True
    warmup: int = 1
    repeats: int = 1
    request_timeout_s: float = 300.0
    model_name: str = "default"

    @property
    def effective_concurrency(self) -> int:
        """0 means 'no client-side limit': every request may be in flight at once."""
        return self.concurrency or self.requests


@dataclass(frozen=True)
class RunConfig:
    """One point of a sweep: a server setting and a workload, measured ``repeats`` times."""

    index: int
    label: str
    server: ServerSettings
    workload: WorkloadSettings

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "label": self.label,
            "server": asdict(self.server),
            "workload": asdict(self.workload),
        }


@dataclass(frozen=True)
class Experiment:
    """A parsed, validated experiment file."""

    name: str
    description: str
    server: dict[str, Any]
    workload: dict[str, Any]
    source: str = ""
    path: str | None = None
    sweep_axes: tuple[str, ...] = field(default=())

    def configs(self, external: bool = False) -> list[RunConfig]:
        """Expand the sweep. In external mode server axes cannot be set, so they collapse."""
        server = {k: v for k, v in self.server.items() if not (external and _is_axis(k, v))}
        server_axes = [k for k, v in server.items() if _is_axis(k, v)]
        workload_axes = [k for k, v in self.workload.items() if _is_axis(k, v)]
        combos = itertools.product(
            *[server[k] for k in server_axes], *[self.workload[k] for k in workload_axes]
        )
        configs = []
        for index, combo in enumerate(combos):
            values = dict(zip([*server_axes, *workload_axes], combo, strict=True))
            s = {k: values.get(k, v) for k, v in server.items()}
            w = {k: values.get(k, v) for k, v in self.workload.items()}
            if "extra_args" in s:
                s["extra_args"] = tuple(s["extra_args"])
            server_settings = ServerSettings(**s)
            workload_settings = WorkloadSettings(**w)
            label = " ".join(f"{_short(k)}={_fmt(v)}" for k, v in values.items())
            configs.append(
                RunConfig(
                    index,
                    label or _default_label(server_settings, external),
                    server_settings,
                    workload_settings,
                )
            )
        return configs

    def with_overrides(self, server: dict[str, Any] | None = None) -> Experiment:
        """The same experiment with some server fields replaced (CLI flags such as --model)."""
        merged = {**self.server, **(server or {})}
        _validate_table("server", merged, ServerSettings)
        return replace(self, server=merged)


def _is_axis(key: str, value: Any) -> bool:
    if key == "extra_args":
        return bool(value) and all(isinstance(v, list | tuple) for v in value)
    return isinstance(value, list)


_SHORT = {"slots": "np", "ctx": "c", "cont_batching": "cb", "kv_unified": "kvu"}


def _short(key: str) -> str:
    return _SHORT.get(key, key)


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list | tuple):
        return " ".join(map(str, value)) or "none"
    return str(value)


def _default_label(server: ServerSettings, external: bool) -> str:
    return "external" if external else f"np={server.slots} c={server.ctx}"


def load_experiment(path: str | Path) -> Experiment:
    """Read and validate an experiment file, with errors that name the file and field."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ExperimentError(f"experiment file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ExperimentError(f"cannot read experiment file {p}: {exc}") from None
    return parse_experiment(text, name_hint=p.stem, path=str(p))


def parse_experiment(
    text: str, name_hint: str = "experiment", path: str | None = None
) -> Experiment:
    where = path or "<experiment>"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ExperimentError(f"{where}: not valid TOML: {exc}") from None
    allowed_top = {"name", "description", "server", "workload"}
    for key in data:
        if key not in allowed_top:
            raise ExperimentError(
                f"{where}: unknown top-level field '{key}'{_suggest(key, allowed_top)}"
            )
    name = data.get("name", name_hint)
    description = data.get("description", "")
    for key, value in (("name", name), ("description", description)):
        if not isinstance(value, str):
            raise ExperimentError(f"{where}: '{key}' must be a string, got {value!r}")
    server = data.get("server", {})
    workload = data.get("workload", {})
    for table, value in (("server", server), ("workload", workload)):
        if not isinstance(value, dict):
            raise ExperimentError(f"{where}: [{table}] must be a table")
    try:
        _validate_table("server", server, ServerSettings)
        _validate_table("workload", workload, WorkloadSettings)
        _validate_workload_consistency(workload)
    except ExperimentError as exc:
        raise ExperimentError(f"{where}: {exc}") from None
    axes = tuple(
        [f"server.{k}" for k, v in server.items() if _is_axis(k, v)]
        + [f"workload.{k}" for k, v in workload.items() if _is_axis(k, v)]
    )
    return Experiment(name, description, dict(server), dict(workload), text, path, axes)


def _suggest(key: str, options: set[str] | list[str]) -> str:
    close = difflib.get_close_matches(key, list(options), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _validate_table(table: str, values: dict[str, Any], cls: type) -> None:
    known = {f.name: f for f in fields(cls)}
    for key, value in values.items():
        if key not in known:
            raise ExperimentError(f"[{table}] unknown field '{key}'{_suggest(key, set(known))}")
        if key == "extra_args":
            candidates = value if _is_axis(key, value) else [value]
            for v in candidates:
                if not isinstance(v, list) or not all(isinstance(a, str) for a in v):
                    raise ExperimentError(
                        f"[{table}] extra_args must be a list of strings "
                        f"(or a list of such lists to sweep), got {value!r}"
                    )
            continue
        if isinstance(value, list):
            if not value:
                raise ExperimentError(f"[{table}] {key}: a sweep list must not be empty")
            for v in value:
                _check_value(table, key, v)
        else:
            _check_value(table, key, value)


def _between(low: float, high: float, also: tuple[float, ...] = (), note: str = "") -> Any:
    """A check that a number lies in [low, high] (or is one of ``also``): every number in
    an experiment file has a sane bound, so a typo cannot ask for 2**63 requests."""

    def check(value: float) -> str | None:
        if value in also or low <= value <= high:
            return None
        extra = f" ({note})" if note else ""
        return f"must be between {low:g} and {high:g}{extra}"

    return check


DAY_S = 86_400.0

_RULES: dict[str, tuple[tuple[type, ...], Any]] = {
    # field: (accepted types, extra check returning an error text or None)
    "model": ((str,), lambda v: None if v else "must not be empty"),
    "slots": ((int,), _between(1, 1024, (-1,), "or -1 for auto")),
    "ctx": ((int,), _between(0, 10_000_000, (), "0 = the model's own")),
    "cont_batching": ((bool,), None),
    "kv_unified": ((bool,), None),
    "cache_type_k": ((str,), lambda v: _one_of(v, KV_CACHE_TYPES)),
    "cache_type_v": ((str,), lambda v: _one_of(v, KV_CACHE_TYPES)),
    "threads": ((int,), _between(1, 1024, (-1,), "or -1")),
    "batch_size": ((int,), _between(1, 1_000_000)),
    "ubatch_size": ((int,), _between(1, 1_000_000)),
    "gpu_layers": ((int,), _between(-1, 10_000)),
    "port": ((int,), _between(1, 65535, (), "a TCP port")),
    "cache_ram_mib": ((int,), _between(-1, 10_000_000, (), "-1 = no limit")),
    "startup_timeout_s": ((int, float), _between(0.1, DAY_S, (), "seconds")),
    "requests": ((int,), _between(1, 100_000)),
    "concurrency": ((int,), _between(0, 10_000, (), "0 = all at once")),
    "arrival": ((str,), lambda v: _one_of(v, ARRIVALS)),
    "rate": ((int, float), _between(0.001, 100_000, (0,), "requests/s, 0 for burst")),
    "max_tokens": ((int,), _between(1, 1_000_000)),
    "temperature": ((int, float), _between(0, 100)),
    "seed": ((int,), _between(-(2**63), 2**63 - 1)),
    "prompts": ((str,), lambda v: None if v else "must be 'builtin' or a file path"),
    "endpoint": ((str,), lambda v: _one_of(v, ENDPOINTS)),
    "cache_prompt": ((bool,), None),
    "ignore_eos": ((bool,), None),
    "warmup": ((int,), _between(0, 1000)),
    "repeats": ((int,), _between(1, 1000)),
    "request_timeout_s": ((int, float), _between(0.1, DAY_S, (), "seconds")),
    "model_name": ((str,), None),
}


def _one_of(value: str, options: tuple[str, ...]) -> str | None:
    return None if value in options else f"must be one of {', '.join(options)}"


def _check_value(table: str, key: str, value: Any) -> None:
    types, check = _RULES[key]
    # bool is an int in Python; a number field must not silently accept true/false.
    if (bool not in types and isinstance(value, bool)) or not isinstance(value, types):
        names = " or ".join("number" if t is float else t.__name__ for t in types)
        raise ExperimentError(f"[{table}] {key} must be {names}, got {value!r}")
    problem = check(value) if check else None
    if problem:
        raise ExperimentError(f"[{table}] {key} {problem}, got {value!r}")


def _validate_workload_consistency(workload: dict[str, Any]) -> None:
    arrivals = workload.get("arrival", "burst")
    rates = workload.get("rate", 0.0)
    arrival_list = arrivals if isinstance(arrivals, list) else [arrivals]
    rate_list = rates if isinstance(rates, list) else [rates]
    if any(a != "burst" for a in arrival_list) and any(r <= 0 for r in rate_list):
        raise ExperimentError("[workload] arrival 'poisson' or 'fixed' needs rate > 0 (requests/s)")
    requests = workload.get("requests", 8)
    most = max(requests) if isinstance(requests, list) else requests
    slowest = min((r for r in rate_list if r > 0), default=0)
    if any(a != "burst" for a in arrival_list) and slowest and most / slowest > DAY_S:
        raise ExperimentError(
            f"[workload] {most} requests at {slowest:g}/s would take {most / slowest / 3600:.0f} "
            "hours to send: raise rate or lower requests (a run is bounded to a day)"
        )


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise ExperimentError(f"cannot write {value!r} to an experiment file")


def experiment_to_toml(
    name: str, description: str, server: dict[str, Any], workload: dict[str, Any]
) -> str:
    """An experiment file for these fields; ``parse_experiment`` reads it back unchanged."""
    lines = [f"name = {_toml_value(name)}"]
    if description:
        lines.append(f"description = {_toml_value(description)}")
    for table, values in (("server", server), ("workload", workload)):
        lines += ["", f"[{table}]"]
        lines += [
            f"{key} = {_toml_value(value)}" for key, value in values.items() if value is not None
        ]
    return "\n".join(lines) + "\n"
