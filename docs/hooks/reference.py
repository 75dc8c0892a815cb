"""The site's reference tables, written at build time from the code that defines them.

A page asks for a table with a marker, ``<!-- reference: settings -->``; this mkdocs hook
(``hooks:`` in ``mkdocs.yml``) puts the table in its place. The experiment fields come from
the settings schema, the figures from the metric catalogue, the server kinds from their
``/metrics`` names and the shipped experiments from their own files, so none of them is
pasted into a page where it could drift from the code.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

from workbench.engine.analysis import export
from workbench.engine.base.server_kinds import KINDS
from workbench.engine.config.experiment import SETTINGS
from workbench.engine.config.settings import Field, fields_of
from workbench.engine.figures import metrics

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
MARKER = re.compile(r"<!-- reference: ([a-z-]+) -->")


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def settings_tables() -> str:
    """One table per settings class: each field, its default and what it means."""
    parts = []
    for cls in SETTINGS:
        rows = [(f"`{f.name}`", _default_text(f), _meaning(f)) for f in fields_of(cls)]
        about = (cls.__doc__ or "").strip().splitlines()[0]
        title = f"`[{cls.__dict__['TABLE']}]`: {about[:1].lower()}{about[1:]}"
        parts.append(title + "\n\n" + _table(("field", "default", "meaning"), rows))
    return "\n\n".join(parts)


def _default_text(f: Field) -> str:
    if f.default is None:
        return "server default" if f.setting.flag or f.setting.switch else "none"
    if f.is_args:
        return "`[]`"
    if isinstance(f.default, str):
        return f'`"{f.default}"`'
    if isinstance(f.default, bool):
        return f"`{str(f.default).lower()}`"
    return f"`{f.default:g}`" if isinstance(f.default, float) else f"`{f.default}`"


def _meaning(f: Field) -> str:
    s = f.setting
    text = s.help
    if s.switch:
        text = f"`{s.switch[0]}` / `{s.switch[1]}`: {text}"
    elif s.flag:
        text = f"`{s.flag}`: {text}"
    if f.choices:
        text += "; one of " + ", ".join(f"`{c}`" for c in f.choices)
    if f.range is not None:
        text += f"; {_number(f.range.low)} to {_number(f.range.high)}"
        if f.range.also:
            text += " or " + ", ".join(_number(a) for a in f.range.also)
    if not s.sweeps:
        text += f"; not swept ({s.unswept})"
    if 0 < len(f.kinds) < len(getattr(f.kinds[0], "KINDS", ())):
        text += "; a field of " + " and ".join(f"`{k.NAME}`" for k in f.kinds)
    return text


def _number(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:g}"


def metric_tables() -> str:
    """Every figure of the catalogue, one table per part it belongs to, with its column of
    ``concurrency.csv`` (and the JSON export) where it has one."""
    exported = set(export.concurrency_columns())
    parts = []
    for part in metrics.Part:
        rows = [
            (
                f.title,
                _code(f.column) if f.column in exported else "",
                f.unit,
                f.combine.value,
                f.definition,
            )
            for f in metrics.in_part(part)
        ]
        header = ("figure", "CSV column", "unit", "over repeats", "definition")
        parts.append(f"### {part.value[:1].upper()}{part.value[1:]}\n\n{_table(header, rows)}")
    return "\n\n".join(parts)


def request_metric_table() -> str:
    """The per-request figures: ``requests.csv`` and ``workbench show --requests``."""
    rows = [(r.title, f"`{r.column}`", r.unit, r.definition) for r in metrics.REQUEST_FIGURES]
    return _table(("figure", "CSV column", "unit", "definition"), rows)


def server_kinds_table() -> str:
    """The servers told apart by their ``/metrics`` names, and the names each fact is read
    under (the current name first, older ones after)."""

    def names(found: tuple[str, ...]) -> str:
        return ", ".join(f"`{n}`" for n in found) or "none"

    rows = [
        (
            k.name + (f" (`{k.metrics_switch}`)" if k.metrics_switch else ""),
            f"{names(k.running)} / {names(k.waiting)}",
            names(k.kv_usage),
            "yes" if k.slots else "no",
            f"{names(k.prompt_tokens)}; {names(k.output_tokens)}; {names(k.requests)}",
            f"{names(k.cached_tokens)}; {names(k.prompt_seconds)}; {names(k.output_seconds)}",
        )
        for k in KINDS
    ]
    header = (
        "server",
        "requests running / waiting",
        "KV-cache use",
        "`/slots` and `/props`",
        "counters: prompt tokens; output tokens; requests",
        "counters: cached prompt tokens; prompt seconds; output seconds",
    )
    return _table(header, rows)


def shipped_experiments() -> str:
    """The experiment files in ``experiments/``, each with the question its description asks."""
    rows = []
    for path in sorted(EXPERIMENTS.glob("*.toml")):
        with path.open("rb") as file:
            description = tomllib.load(file).get("description", "")
        rows.append((f"`{path.name}`", " ".join(description.split())))
    return _table(("file", "what it is for"), rows)


def _columns(names: list[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)


def concurrency_columns() -> str:
    """``concurrency.csv``'s header, in order."""
    return _columns(export.concurrency_columns())


def request_columns() -> str:
    """``requests.csv``'s header, in order."""
    return _columns(export.REQUEST_COLUMNS)


TABLES: dict[str, Callable[[], str]] = {
    "settings": settings_tables,
    "metrics": metric_tables,
    "request-metrics": request_metric_table,
    "server-kinds": server_kinds_table,
    "experiments": shipped_experiments,
    "concurrency-columns": concurrency_columns,
    "request-columns": request_columns,
}


def fill(markdown: str, where: str) -> str:
    """``markdown`` with each marker replaced by its table; an unknown marker stops the
    build, so a misspelt one cannot leave a page without its table."""

    def table(found: re.Match[str]) -> str:
        name = found.group(1)
        if name not in TABLES:
            raise PluginError(f"{where}: no reference table named {name!r} ({', '.join(TABLES)})")
        return TABLES[name]()

    return MARKER.sub(table, markdown)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """mkdocs' hook: each page's Markdown before it is rendered."""
    return fill(markdown, page.file.src_path)
