"""Sessions side by side: configurations aligned by their sweep label, one column per session,
and warnings where the comparison is not fair (different model, prompts, output length, context
per slot, load)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.engine.analysis import ConfigSummary
from workbench.engine.library import model_name
from workbench.engine.session import Session

# (key, title, unit); values come from ConfigSummary.value (repeats averaged).
METRICS = (
    ("makespan_s", "total", "s"),
    ("agg_tok_s", "aggregate", "tok/s"),
    ("ttft_p50_s", "TTFT p50", "s"),
    ("ttft_max_s", "TTFT max", "s"),
    ("decode_tok_s", "decode per request", "tok/s"),
    ("queue_wait_p50_s", "queue wait p50", "s"),
    ("failed", "failed", "requests"),
)
WORKLOAD_FAIRNESS = ("max_tokens", "prompts", "ignore_eos", "endpoint", "requests", "concurrency")


@dataclass
class Comparison:
    columns: list[str]
    labels: list[str]
    cells: dict[tuple[str, str], list[float | None]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    relative: bool = False

    def rows(self) -> list[dict[str, Any]]:
        """Flat rows (configuration, metric, one value per session) for CSV and Markdown."""
        out = []
        for label in self.labels:
            for key, title, unit in METRICS:
                values = self.cells.get((label, key))
                if values is None:
                    continue
                unit_text = "x of 1 slot" if self.relative and key != "failed" else unit
                row: dict[str, Any] = {"configuration": label, "metric": f"{title} ({unit_text})"}
                row.update(dict(zip(self.columns, values, strict=True)))
                out.append(row)
        return out


def session_column(session: Session) -> str:
    hw = session.hardware
    gpus = [g.get("name", "?") for g in hw.get("gpus") or []]
    machine = gpus[0] if gpus else hw.get("apple_chip") or hw.get("cpu_model") or "?"
    backends = sorted({c.facts.get("backend") for c in session.configs if c.facts.get("backend")})
    when = (session.meta.get("created_at") or "")[:16].replace("T", " ")
    return f"{session.meta['name']} · {machine} · {'/'.join(backends) or '?'} · {when}"


def _by_label(summaries: list[ConfigSummary]) -> dict[str, ConfigSummary]:
    return {s.label: s for s in summaries}


def compare_sessions(sessions: list[Session], relative: bool = False) -> Comparison:
    summaries = [s.summaries() for s in sessions]
    columns = [session_column(s) for s in sessions]
    labels: list[str] = []
    for per_session in summaries:
        labels += [s.label for s in per_session if s.label not in labels]
    comparison = Comparison(columns, labels, relative=relative)
    indexed = [_by_label(per_session) for per_session in summaries]
    baselines = [next((s for s in per_session if s.slots == 1), None) for per_session in summaries]
    for label in labels:
        for key, _, _ in METRICS:
            values: list[float | None] = []
            for table, base in zip(indexed, baselines, strict=True):
                summary = table.get(label)
                value = summary.value(key) if summary is not None else None
                if relative and key != "failed" and value is not None:
                    base_value = base.value(key) if base is not None else None
                    value = value / base_value if base_value else None
                values.append(value)
            comparison.cells[(label, key)] = values
    comparison.warnings = fairness_warnings(sessions, indexed)
    if relative and any(b is None for b in baselines):
        comparison.warnings.append(
            "'relative to 1 slot' needs a 1-slot configuration in every "
            "session; cells without one are left empty"
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
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in comparison.rows():
        cells = [row["configuration"], row["metric"]] + [
            "-" if row[c] is None else f"{row[c]:.3g}" for c in comparison.columns
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if comparison.warnings:
        lines += ["", "Not a like-for-like comparison:"]
        lines += [f"- {w}" for w in comparison.warnings]
    return "\n".join(lines) + "\n"


CHART_METRICS = (
    ("agg_tok_s", "Aggregate throughput", "tok/s"),
    ("ttft_p50_s", "TTFT p50", "s"),
    ("ttft_max_s", "TTFT max", "s"),
    ("decode_tok_s", "Per-request decode speed", "tok/s"),
    ("queue_wait_p50_s", "Queue wait p50", "s"),
)
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


def sweep_axis(summaries: list[list[ConfigSummary]]) -> tuple[str, str]:
    """The setting that varies across configurations (slots unless another one does)."""
    for key, label in AXES:
        if any(len({getattr(s, key) for s in per_session}) > 1 for per_session in summaries):
            return key, label
    return AXES[0]


def chart_data(sessions: list[Session], relative: bool = False) -> list[ChartData]:
    """One chart per metric against the swept setting, one series per session."""
    return chart_data_from([(session_column(s), s.summaries()) for s in sessions], relative)


def chart_data_from(
    named: list[tuple[str, list[ConfigSummary]]],
    relative: bool = False,
    metrics: tuple[tuple[str, str, str], ...] = CHART_METRICS,
) -> list[ChartData]:
    """The same from summaries (a live run's, before any session is reopened)."""
    axis, axis_label = sweep_axis([summaries for _, summaries in named])
    charts = []
    for key, title, unit in metrics:
        series = []
        for name, summaries in named:
            ok = [s for s in summaries if s.status == "ok" and s.value(key) is not None]
            base = next((s.value(key) for s in ok if s.slots == 1), None)
            points = sorted(
                (float(getattr(s, axis)), s.value(key) / base if relative else s.value(key))
                for s in ok
                if not relative or base
            )
            series.append(Series(name, [p[0] for p in points], [p[1] for p in points]))
        charts.append(
            ChartData(key, title, "x of 1 slot" if relative else unit, axis_label, series)
        )
    return charts
