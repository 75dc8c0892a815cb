"""Sessions side by side: configurations aligned by their sweep label, one column per session,
and warnings where the comparison is not fair (different model, prompts, output length, context
per slot, load)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.engine.analysis.library import model_name
from workbench.engine.base.untrusted import markdown
from workbench.engine.config.experiment import short_name
from workbench.engine.config.settings import show_value
from workbench.engine.figures.metrics import Figure, View, figure, shown_in
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.store import Session

RELATIVE_UNIT = "x of 1 slot"
WORKLOAD_FAIRNESS = ("max_tokens", "prompts", "ignore_eos", "endpoint", "requests", "concurrency")


@dataclass
class Comparison:
    columns: list[str]
    labels: list[str]
    cells: dict[tuple[str, str], list[float | None]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    relative: bool = False

    def rows(self) -> list[dict[str, Any]]:
        """Flat rows (configuration, metric, the figure's key, one value per session) for
        CSV, Markdown and JSON, in the catalogue's order."""
        out = []
        for label in self.labels:
            for metric in shown_in(View.COMPARISON):
                values = self.cells.get((label, metric.key))
                if values is None:
                    continue
                heading = metric.heading
                if self.relative and metric.relative:
                    heading = f"{metric.title} ({RELATIVE_UNIT})"
                row: dict[str, Any] = {"configuration": label, "metric": heading}
                row["key"] = metric.key
                row.update(dict(zip(self.columns, values, strict=True)))
                out.append(row)
        return out

    def cell_text(self, row: dict[str, Any], column: str) -> str:
        """A value in its figure's display format; a ratio to 1 slot with two decimals."""
        metric = figure(row["key"])
        value = row[column]
        if self.relative and metric.relative and value is not None:
            return f"{value:.2f}"
        return metric.text(value)


def session_column(session: Session) -> str:
    hw = session.hardware
    gpus = [g.name or "?" for g in hw.gpus]
    machine = gpus[0] if gpus else hw.machine_name
    backends = sorted({c.facts.backend for c in session.configs if c.facts and c.facts.backend})
    when = (session.meta.get("created_at") or "")[:16].replace("T", " ")
    return f"{session.meta['name']} · {machine} · {'/'.join(backends) or '?'} · {when}"


KEY_FIELDS = ("slots", "ctx", "cont_batching", "kv_unified", "concurrency", "max_tokens")


def _varying(summaries: list[list[ConfigSummary]], fields: tuple[str, ...]) -> list[str]:
    """The fields that take more than one value within some session (its sweep axes)."""
    return [
        f
        for f in fields
        if any(len({getattr(s, f) for s in per_session}) > 1 for per_session in summaries)
    ]


def config_key(s: ConfigSummary, fields: list[str]) -> tuple[object, ...]:
    """What a configuration is along the swept settings, whatever its label says ("np=4" in
    a slots sweep is "c=8192" in a context sweep at 4 slots). Differences in settings that no
    session sweeps become warnings, not separate rows."""
    return tuple(getattr(s, f) is True if f == "kv_unified" else getattr(s, f) for f in fields)


def _baseline(
    s: ConfigSummary, per_session: list[ConfigSummary], fields: list[str]
) -> ConfigSummary | None:
    """The 1-slot configuration with the same other swept settings: what "relative"
    divides by."""
    others = [f for f in fields if f != "slots"]
    wanted = config_key(s, others)
    return next((b for b in per_session if b.slots == 1 and config_key(b, others) == wanted), None)


def compare_sessions(sessions: list[Session], relative: bool = False) -> Comparison:
    summaries = [s.summaries() for s in sessions]
    columns = [session_column(s) for s in sessions]
    fields = _varying(summaries, KEY_FIELDS)

    def key_of(s: ConfigSummary) -> tuple[object, ...]:
        return config_key(s, fields)

    labels_by_key: dict[tuple[object, ...], list[str]] = {}
    for per_session in summaries:
        for s in per_session:
            names = labels_by_key.setdefault(key_of(s), [])
            if s.label not in names:
                names.append(s.label)
    label_of = {key: " / ".join(names) for key, names in labels_by_key.items()}
    comparison = Comparison(columns, list(label_of.values()), relative=relative)
    indexed = [{key_of(s): s for s in per_session} for per_session in summaries]
    missing_base = False
    for key, label in label_of.items():
        for metric in shown_in(View.COMPARISON):
            values: list[float | None] = []
            for table, per_session in zip(indexed, summaries, strict=True):
                summary = table.get(key)
                value = metric.of(summary) if summary is not None else None
                if relative and metric.relative and summary is not None:
                    base = _baseline(summary, per_session, fields)
                    base_value = metric.of(base) if base is not None else None
                    missing_base |= base is None
                    value = value / base_value if value is not None and base_value else None
                values.append(value)
            comparison.cells[(label, metric.key)] = values
    by_label = [{label_of[k]: s for k, s in table.items()} for table in indexed]
    comparison.warnings = fairness_warnings(sessions, by_label)
    if relative and missing_base:
        comparison.warnings.append(
            "'relative to 1 slot' needs a 1-slot configuration with the same other settings; "
            "cells without one are left empty"
        )
    return comparison


def fairness_warnings(
    sessions: list[Session], indexed: list[dict[str, ConfigSummary]]
) -> list[str]:
    """What differs between the sessions besides the machine: each makes numbers less
    comparable."""
    warnings = []
    models = [
        sorted({model_name(c.server.get("model", "default")) for c in s.configs}) for s in sessions
    ]
    if len({tuple(m) for m in models}) > 1:
        warnings.append("different models: " + " vs ".join(", ".join(m) for m in models))
    for key in WORKLOAD_FAIRNESS:
        values = [
            sorted({str(c.workload.get(key, "(default)")) for c in s.configs}) for s in sessions
        ]
        if len({tuple(v) for v in values}) > 1:
            warnings.append(
                f"different workload {key}: " + " vs ".join("/".join(v) for v in values)
            )
    shared = set.intersection(*(set(t) for t in indexed)) if indexed else set()
    for label in sorted(shared):
        per_slot = [t[label].n_ctx_slot for t in indexed]
        if len(set(per_slot)) > 1:
            warnings.append(
                f"{label}: different context per slot: " + " vs ".join(str(v) for v in per_slot)
            )
    return warnings


def to_markdown(comparison: Comparison) -> str:
    header = ["configuration", "metric", *comparison.columns]
    lines = ["| " + " | ".join(map(markdown, header)) + " |", "|" + "---|" * len(header)]
    for row in comparison.rows():
        cells = [row["configuration"], row["metric"]] + [
            comparison.cell_text(row, c) for c in comparison.columns
        ]
        lines.append("| " + " | ".join(map(markdown, cells)) + " |")
    if comparison.warnings:
        lines += ["", "Not a like-for-like comparison:"]
        lines += [f"- {markdown(w)}" for w in comparison.warnings]
    return "\n".join(lines) + "\n"


AXES = (
    ("slots", "slots (-np)"),
    ("ctx", "context (-c)"),
    ("concurrency", "concurrency"),
    ("max_tokens", "max tokens"),
)


@dataclass
class Series:
    name: str
    x: list[float]
    y: list[float]


@dataclass
class ChartData:
    key: str
    title: str
    unit: str
    x_label: str
    series: list[Series]
    x_ticks: list[tuple[float, str]] | None = None  # names for a categorical axis


def sweep_axis(summaries: list[list[ConfigSummary]]) -> tuple[str, str] | None:
    """The numeric setting that varies across configurations (slots first), or None when
    only on/off settings vary (the configurations are then shown side by side by name)."""
    for key, label in AXES:
        if any(len({getattr(s, key) for s in per_session}) > 1 for per_session in summaries):
            return key, label
    return None


def chart_data(sessions: list[Session], relative: bool = False) -> list[ChartData]:
    """One chart per metric against the swept setting, one series per session."""
    return chart_data_from([(session_column(s), s.summaries()) for s in sessions], relative)


def chart_data_from(
    named: list[tuple[str, list[ConfigSummary]]],
    relative: bool = False,
    metrics: tuple[Figure, ...] | None = None,
) -> list[ChartData]:
    """The same from summaries (a live run's, before any session is reopened), for
    ``metrics`` (the catalogue's chart figures by default). A sweep over more than one
    setting gets one series per value of the others (e.g. one line per ctx)."""
    all_summaries = [summaries for _, summaries in named]
    axis = sweep_axis(all_summaries)
    others = [f for f in KEY_FIELDS if axis is None or f != axis[0]]
    others = _varying(all_summaries, tuple(others)) if axis is not None else []
    names: dict[str, float] = {}
    if axis is None:  # categorical: one point per configuration, in the order they ran
        for summaries in all_summaries:
            for s in summaries:
                names.setdefault(s.label, float(len(names) + 1))
    key_fields = _varying(all_summaries, KEY_FIELDS)
    charts = []
    for metric in shown_in(View.CHART) if metrics is None else metrics:
        series = []
        for name, summaries in named:
            ok = [s for s in summaries if s.status == "ok" and metric.of(s) is not None]
            groups: dict[tuple[object, ...], list[ConfigSummary]] = {}
            for s in ok:
                groups.setdefault(tuple(getattr(s, f) for f in others), []).append(s)
            for group, members in groups.items():
                points = []
                for s in members:
                    value = metric.of(s)
                    if relative:
                        base = _baseline(s, summaries, key_fields)
                        base_value = metric.of(base) if base is not None else None
                        if not base_value:
                            continue
                        value = value / base_value
                    x = float(getattr(s, axis[0])) if axis else names[s.label]
                    points.append((x, value))
                points.sort()
                suffix = " · ".join(
                    f"{short_name(f)}={show_value(v)}" for f, v in zip(others, group, strict=True)
                )
                series.append(
                    Series(
                        f"{name} · {suffix}" if suffix else name,
                        [p[0] for p in points],
                        [p[1] for p in points],
                    )
                )
        ticks = [(x, label) for label, x in names.items()] if axis is None else None
        charts.append(
            ChartData(
                metric.key,
                metric.title,
                RELATIVE_UNIT if relative else metric.unit,
                axis[1] if axis else "configuration",
                series,
                ticks,
            )
        )
    return charts
