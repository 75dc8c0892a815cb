"""Sessions side by side: configurations aligned by their sweep label, one column per session,
and warnings where the comparison is not fair (different model, prompts, output length, context
per slot, load)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from workbench.engine.analysis.library import session_models
from workbench.engine.base.escaping import markdown, printable
from workbench.engine.base.states import ConfigStatus
from workbench.engine.config.experiment import WorkloadSettings, short_name
from workbench.engine.config.settings import from_stored, show_value
from workbench.engine.figures.metrics import Figure, View, figure, shown_in
from workbench.engine.figures.per_request import request_metrics
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
    """A session's column: its name, machine, backend and time; a session measured on
    another machine through the agent also names that host, since two hosts of one kind
    would otherwise read alike."""
    when = (session.meta.get("created_at") or "")[:16].replace("T", " ")
    source = session.import_source()
    if source is not None:
        return f"{session.meta['name']} · imported from {source.tool} · {when}"
    hw = session.hardware
    gpus = [g.name or "?" for g in hw.gpus]
    machine = gpus[0] if gpus else hw.machine_name
    if (origin := session.remote_origin()) is not None:
        machine = f"{printable(origin.host)}: {machine}"
    backends = sorted({c.facts.backend for c in session.configs if c.facts and c.facts.backend})
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


def distinct(names: list[str]) -> list[str]:
    """Column names told apart: the rows are keyed by them, so two sessions of one name and
    minute (two runs of one tool, a file and its copy) would share a column."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    return out


def compare_sessions(sessions: list[Session], relative: bool = False) -> Comparison:
    summaries = [s.summaries() for s in sessions]
    columns = distinct([session_column(s) for s in sessions])
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
    models = [session_models(s) for s in sessions]
    if len({tuple(m) for m in models}) > 1:
        warnings.append("different models: " + " vs ".join(", ".join(m) for m in models))
    for key in WORKLOAD_FAIRNESS:
        values = [sorted({_sent(c.workload, key) for c in s.configs}) for s in sessions]
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


def _sent(workload: dict[str, Any], key: str) -> str:
    """A workload setting as it acted, not as it was spelled: a default left out equals the
    same value written, and concurrency is as sent (``effective_concurrency``)."""
    settings = from_stored(WorkloadSettings, workload)
    if key == "concurrency":
        return str(settings.effective_concurrency)
    return show_value(getattr(settings, key, ""))  # another kind's field: none


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


class ChartKind(StrEnum):
    """How a chart draws its series: lines against a swept setting, a trade-off with one
    labelled point per configuration, or cumulative distributions."""

    SWEEP = "sweep"
    TRADE_OFF = "trade_off"
    CDF = "cdf"


@dataclass
class Series:
    name: str
    x: list[float]
    y: list[float]
    # Per point: the standard deviation across repeats (None with a single repeat).
    err: list[float | None] = field(default_factory=list)
    # Which session the series belongs to: its colour, the same in every chart of a
    # comparison. ``variant`` tells a session's lines apart (its other swept settings).
    session: int = 0
    variant: int = 0
    labels: list[str] = field(default_factory=list)  # per point, where points are named


@dataclass
class ChartData:
    key: str
    title: str
    unit: str
    x_label: str
    series: list[Series]
    x_ticks: list[tuple[float, str]] | None = None  # names for a categorical axis
    subtitle: str = ""  # the workload the chart measured
    kind: ChartKind = ChartKind.SWEEP
    y_scale: float = 1.0  # what the figure's values were multiplied by to read in ``unit``


CDF_POINTS = 400  # a distribution's line keeps at most this many points (its quantiles)
TRADE_OFF = ("ttft_p50_s", "agg_tok_s")  # x and y of the throughput-vs-TTFT chart


def suited_unit(unit: str, values: list[float]) -> tuple[str, float]:
    """The unit to show ``values`` in, and the factor to get there: seconds read as
    milliseconds when every value is below one second."""
    if unit == "s" and values and max(abs(v) for v in values) < 1.0:
        return "ms", 1000.0
    return unit, 1.0


def _scaled(series: list[Series], factor: float, axis: str = "y") -> None:
    for s in series:
        if axis == "x":
            s.x = [v * factor for v in s.x]
        else:
            s.y = [v * factor for v in s.y]
            s.err = [e * factor if e is not None else None for e in s.err]


def workload_caption(all_summaries: list[list[ConfigSummary]], bars: str = "") -> str:
    """What every configuration of every session was asked to do, for a chart's subtitle:
    the settings they share (a setting that varies is on the axis or in the legend). With
    ``bars`` (what carries error bars: "bars", "y bars"), where repeats give them, what they
    mean."""
    configs = [s for per_session in all_summaries for s in per_session if s.runs]

    def shared(value: Any) -> Any:
        values = {value(s) for s in configs}
        return values.pop() if len(values) == 1 else None

    parts = []
    requests = shared(lambda s: s.runs[0].requests)
    if requests:
        parts.append(f"{requests} requests")
    concurrency = shared(lambda s: s.concurrency)
    if concurrency:
        parts.append(f"concurrency {concurrency}")
    input_tokens = shared(lambda s: s.input_tokens)
    if input_tokens:
        parts.append(f"{input_tokens} tokens in")
    max_tokens = shared(lambda s: s.max_tokens)
    if max_tokens:
        parts.append(f"{max_tokens} tokens out")
    repeats = shared(lambda s: len(s.runs))
    if repeats and repeats > 1:
        parts.append(f"{repeats} repeats" + (f", {bars} ±1 sd" if bars else ""))
    elif bars and any(len(s.runs) > 1 for s in configs):
        parts.append(f"{bars} ±1 sd across repeats")
    return " · ".join(parts)


def sweep_axis(summaries: list[list[ConfigSummary]]) -> tuple[str, str] | None:
    """The numeric setting that varies across configurations (slots first), or None when
    only on/off settings vary (the configurations are then shown side by side by name)."""
    for key, label in AXES:
        if any(len({getattr(s, key) for s in per_session}) > 1 for per_session in summaries):
            return key, label
    return None


def chart_data(sessions: list[Session], relative: bool = False) -> list[ChartData]:
    """Every chart of a comparison (or of one session): one per metric against the swept
    setting with one series per session, the throughput-vs-TTFT trade-off, and the TTFT
    distributions."""
    named = [(session_column(s), s.summaries()) for s in sessions]
    charts = chart_data_from(named, relative)
    if not relative:  # the trade-off and the distributions are in their own units
        charts += [c for c in (trade_off_chart(named),) if c is not None]
        charts += ttft_cdf_charts(sessions, named)
    return charts


def chart_data_from(
    named: list[tuple[str, list[ConfigSummary]]],
    relative: bool = False,
    metrics: tuple[Figure, ...] | None = None,
) -> list[ChartData]:
    """The metric charts from summaries (a live run's, before any session is reopened), for
    ``metrics`` (the catalogue's chart figures by default). A sweep over more than one
    setting gets one series per value of the others (e.g. one line per ctx), in its
    session's colour. Each point carries its spread across repeats."""
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
    caption = workload_caption(all_summaries, "bars")
    charts = []
    for metric in shown_in(View.CHART) if metrics is None else metrics:
        series = []
        for session, (name, summaries) in enumerate(named):
            ok = [
                s
                for s in summaries
                if s.status == ConfigStatus.OK
                and metric.of(s) is not None
                and (axis is None or getattr(s, axis[0]) is not None)  # unknown: not placed
            ]
            groups: dict[tuple[object, ...], list[ConfigSummary]] = {}
            for s in ok:
                groups.setdefault(tuple(getattr(s, f) for f in others), []).append(s)
            for variant, (group, members) in enumerate(groups.items()):
                points = []
                for s in members:
                    value, sd = metric.of(s), metric.sd_of(s)
                    if relative:
                        base = _baseline(s, summaries, key_fields)
                        base_value = metric.of(base) if base is not None else None
                        if not base_value:
                            continue
                        value = value / base_value
                        sd = sd / base_value if sd is not None else None
                    x = float(getattr(s, axis[0])) if axis else names[s.label]
                    points.append((x, value, sd))
                points.sort(key=lambda p: p[0])
                suffix = " · ".join(
                    f"{short_name(f)}={show_value(v)}" for f, v in zip(others, group, strict=True)
                )
                series.append(
                    Series(
                        f"{name} · {suffix}" if suffix else name,
                        [p[0] for p in points],
                        [p[1] for p in points],
                        [p[2] for p in points],
                        session,
                        variant,
                    )
                )
        unit, scale = (
            (RELATIVE_UNIT, 1.0)
            if relative
            else suited_unit(metric.unit, [y for s in series for y in s.y])
        )
        _scaled(series, scale)
        ticks = [(x, label) for label, x in names.items()] if axis is None else None
        charts.append(
            ChartData(
                metric.key,
                metric.title,
                unit,
                axis[1] if axis else "configuration",
                series,
                ticks,
                caption,
                y_scale=scale,
            )
        )
    return charts


def trade_off_chart(named: list[tuple[str, list[ConfigSummary]]]) -> ChartData | None:
    """Aggregate throughput against TTFT p50, one point per configuration joined in the
    order they ran: what more slots buy in throughput and cost in waiting, in one picture.
    None when no configuration has both."""
    x_figure, y_figure = (figure(key) for key in TRADE_OFF)
    series = []
    for session, (name, summaries) in enumerate(named):
        ok = [
            s
            for s in summaries
            if s.status == ConfigStatus.OK
            and x_figure.of(s) is not None
            and y_figure.of(s) is not None
        ]
        if ok:
            series.append(
                Series(
                    name,
                    [x_figure.of(s) for s in ok],
                    [y_figure.of(s) for s in ok],
                    [y_figure.sd_of(s) for s in ok],
                    session,
                    labels=[s.label for s in ok],
                )
            )
    if not series:
        return None
    x_unit, x_scale = suited_unit(x_figure.unit, [x for s in series for x in s.x])
    _scaled(series, x_scale, "x")
    return ChartData(
        "throughput_vs_ttft",
        f"{y_figure.title} vs {x_figure.title}",
        y_figure.unit,
        f"{x_figure.title} ({x_unit})",
        series,
        subtitle=workload_caption([summaries for _, summaries in named], "throughput bars"),
        kind=ChartKind.TRADE_OFF,
    )


def ttft_cdf_charts(
    sessions: list[Session], named: list[tuple[str, list[ConfigSummary]]]
) -> list[ChartData]:
    """TTFT distributions of the measured requests (all repeats). One session: one chart, a
    line per configuration. Several: a chart per configuration (aligned as the table aligns
    them), a line per session in its colour."""
    all_summaries = [summaries for _, summaries in named]
    fields = _varying(all_summaries, KEY_FIELDS)
    caption = workload_caption(all_summaries)
    # Per configuration: (session, label, TTFTs of the answered, requests measured).
    keyed: dict[tuple[object, ...], list[tuple[int, str, list[float], int]]] = {}
    labels: dict[tuple[object, ...], str] = {}
    for i, (session, summaries) in enumerate(zip(sessions, all_summaries, strict=True)):
        for s in (s for s in summaries if s.status == ConfigStatus.OK):  # as the other charts
            measured = [r for r in session.records(s.index) if not r.warmup]
            ttfts = sorted(m.ttft_s for m in map(request_metrics, measured) if m is not None)
            if ttfts:
                key = config_key(s, fields)
                labels.setdefault(key, s.label)
                keyed.setdefault(key, []).append((i, s.label, ttfts, len(measured)))
    unit, scale = suited_unit("s", [t[-1] for lines in keyed.values() for _, _, t, _ in lines])
    charts = []
    if len(sessions) == 1:
        every = [line for lines in keyed.values() for line in lines]
        series = [
            _cdf_series(label, ttfts, total, scale, n)
            for n, (_, label, ttfts, total) in enumerate(every)
        ]
        if series:
            charts.append(_cdf_chart("ttft_cdf", "TTFT distribution", unit, series, caption))
        return charts
    for n, (key, lines) in enumerate(keyed.items()):
        series = [_cdf_series(named[i][0], ttfts, total, scale, i) for i, _, ttfts, total in lines]
        title = f"TTFT distribution · {labels[key]}"
        charts.append(_cdf_chart(f"ttft_cdf_{n + 1}", title, unit, series, caption))
    return charts


def _cdf_series(name: str, ttfts: list[float], total: int, scale: float, color: int) -> Series:
    """The share of the ``total`` requests measured whose first token came within x: a line
    that ends below 1 when some failed. At most ``CDF_POINTS`` points (the quantiles, when
    there are more requests)."""
    n = len(ttfts)
    ranks = (
        range(n)
        if n <= CDF_POINTS
        else (round(k * (n - 1) / (CDF_POINTS - 1)) for k in range(CDF_POINTS))
    )
    points = [(ttfts[r] * scale, (r + 1) / total) for r in ranks]
    return Series(name, [p[0] for p in points], [p[1] for p in points], session=color)


def _cdf_chart(key: str, title: str, unit: str, series: list[Series], caption: str) -> ChartData:
    return ChartData(
        key,
        title,
        "share of requests",
        f"TTFT ({unit})",
        series,
        subtitle=caption,
        kind=ChartKind.CDF,
    )
