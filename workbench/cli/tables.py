"""Everything the commands print that is more than a sentence: rich tables and the lines
that describe a record (a session, a model, an event), so each command only gathers its data
and prints what these return. ``results_table`` is shared by ``run`` (live) and ``show``
(from a session)."""

from __future__ import annotations

import argparse
import difflib
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, JustifyMethod, RenderResult
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from workbench.engine.analysis.compare import Comparison
from workbench.engine.analysis.export import LATER_PARTS, MemoryCheck, request_rows
from workbench.engine.analysis.library import SessionInfo, configurations_line
from workbench.engine.analysis.planner import PlanRow
from workbench.engine.analysis.roofline import RooflineRow
from workbench.engine.analysis.slo import SHOWN, ConfigGoodput, machines_needed
from workbench.engine.analysis.verdicts import HELD, LOST, CacheVerdict, Verdict
from workbench.engine.base.records import Hardware, ImportSource
from workbench.engine.base.states import NoticeLevel, RunStatus
from workbench.engine.base.words import plural
from workbench.engine.events import ConfigFinished, ConfigStarted, Notice, ServerReady
from workbench.engine.figures.metrics import (
    SUMMARY_PARTS,
    Figure,
    Part,
    View,
    figure,
    in_part,
    shown_in,
)
from workbench.engine.figures.predicted import RunPrediction
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.models.memory import ModelFacts, kv_bytes_per_token
from workbench.engine.predict.run_prediction import prediction_notes
from workbench.engine.predict.sweep import against_header, against_rows

# The width to lay tables out at when neither a terminal nor ``COLUMNS`` says one (a log, a
# pipe in CI): rich's own 80 would wrap the lab's table more than a log reader's window needs.
DEFAULT_WIDTH = 120


def output_console() -> Console:
    """The console the commands print to: as wide as the terminal (stdout's, or stdin's or
    stderr's when stdout is piped) or ``COLUMNS``, as rich finds them, else ``DEFAULT_WIDTH``."""
    if os.environ.get("COLUMNS", "").isdigit() or _terminal_width():
        return Console()
    return Console(width=DEFAULT_WIDTH)


MAX_ERROR_CHARS = 2000
"""The most of an error line printed: its opening and its end (where the advice is), never
the megabytes a message built from a huge input could hold."""


def print_error(text: str) -> None:
    """An error as one line on stderr, whatever its length: a console would break it at its
    width, and a script reading stdout must not get it with the results. A line over
    ``MAX_ERROR_CHARS`` keeps its opening and its last 500 characters."""
    if len(text) > MAX_ERROR_CHARS:
        cut = len(text) - MAX_ERROR_CHARS
        head, tail = text[: MAX_ERROR_CHARS - 500], text[-500:]
        text = f"{head} … ({cut:,} characters left out) … {tail}"
    Console(stderr=True).print(
        f"[bold red]error:[/bold red] {escape(text)}", highlight=False, soft_wrap=True
    )


def _terminal_width() -> int:
    """The width of the first of stdin, stdout and stderr that is a terminal (rich's own
    order), 0 when none is."""
    for fd in (0, 1, 2):
        try:
            return os.get_terminal_size(fd).columns
        except (OSError, ValueError):
            continue
    return 0


def _num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


# -- laying a table out at the console's width ----------------------------------------------
Cell = Text | str
"""A table cell: a ``str`` is plain text (never read as markup), a ``Text`` keeps its style."""


@dataclass(frozen=True)
class Column:
    """A column of a ``Fitted`` table: its header and the side its cells keep to."""

    header: str
    justify: JustifyMethod = "right"


def _widest_word(text: Text) -> int:
    return max((cell_len(word) for word in text.plain.split()), default=0)


def _lines(text: str, width: int) -> int:
    """The lines ``text`` takes wrapped between words at ``width``, as rich wraps it."""
    total = 0
    for line in text.splitlines() or [""]:
        count, used = 1, 0
        for word in map(cell_len, line.split()):
            if used and used + 1 + word > width:
                count, used = count + 1, word
            else:
                used += word + (1 if used else 0)
        total += count
    return total


def _widest_line(text: Text) -> int:
    return max((cell_len(line) for line in text.plain.splitlines()), default=0)


class Fitted:
    """A table laid out at the width it is printed at, so that no number, label or path is
    cut: a cell wraps only between words, and a column is never narrower than its longest
    word. A table too wide for that is split into tables that each repeat the ``keys``
    leading columns (the row's name) beside as many of the others as fit. A column that
    does not fit beside them even alone (a long URL in an error) follows as a block of
    ``header: value`` lines per row that has a value, as ``vllm bench serve`` prints a
    result; where the keys alone do not fit, every row is such a block. With ``merge_first``
    the first column shows a value only where it changes (a configuration over the rows of
    its metrics)."""

    def __init__(
        self,
        columns: Sequence[Column],
        rows: Iterable[Sequence[Cell]],
        *,
        title: str = "",
        keys: int = 1,
        merge_first: bool = False,
    ) -> None:
        self.columns = list(columns)
        self.rows = [[Text(c) if isinstance(c, str) else c for c in row] for row in rows]
        self.title = title  # markup, as a rich table's title
        self.keys = keys
        self.merge_first = merge_first
        headers = [Text(c.header) for c in self.columns]
        cells = [[header, *(row[i] for row in self.rows)] for i, header in enumerate(headers)]
        self._least = [max(map(_widest_word, texts)) for texts in cells]
        self._most = [max(map(_widest_line, texts)) for texts in cells]
        self._plain = [[text.plain for text in texts] for texts in cells]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.title:
            yield Text.from_markup(self.title, style="table.title")
        groups, apart = self._layout(options.max_width)
        for group in groups:
            yield self._table(group, options.max_width)
        yield from self._blocks(apart, every_row=not groups)

    def _fits(self, group: list[int], width: int) -> bool:
        return sum(self._least[i] for i in group) + 3 * len(group) + 1 <= width

    def _layout(self, width: int) -> tuple[list[list[int]], list[int]]:
        """The columns of each table to print, and the columns left to blocks."""
        every = list(range(len(self.columns)))
        keys, others = every[: self.keys], every[self.keys :]
        if self._fits(every, width):
            return [every], []
        if not self._fits(keys, width):
            return [], others
        groups: list[list[int]] = []
        group, apart = list(keys), []
        for i in others:
            if not self._fits([*keys, i], width):
                apart.append(i)
            elif self._fits([*group, i], width):
                group.append(i)
            else:
                groups.append(group)
                group = [*keys, i]
        return [*groups, group] if group != keys else groups, apart

    def _widths(self, group: list[int], width: int) -> dict[int, int]:
        """Each column's width: as wide as its text where the table fits, else narrowed a
        character at a time where that makes the table least taller (a header that wraps
        adds a line once, a column of long names a line per row), the roomiest first, and
        never under its longest word."""
        widths = {i: self._most[i] for i in group}
        lines: dict[tuple[int, int], list[int]] = {}

        def lines_at(i: int, w: int) -> list[int]:
            if (i, w) not in lines:
                lines[i, w] = [_lines(text, w) for text in self._plain[i]]
            return lines[i, w]

        for _ in range(sum(widths.values()) + 3 * len(group) + 1 - width):
            now = [lines_at(i, widths[i]) for i in group]
            # Per row (the header first): its tallest cell's column, that cell's lines, and
            # the lines of the tallest of the others.
            tops = []
            for row in zip(*now, strict=True):
                ranked = sorted(zip(row, group, strict=True), reverse=True)
                tops.append((ranked[0][1], ranked[0][0], ranked[1][0] if len(group) > 1 else 0))
            choices = []
            for i in group:
                if widths[i] > self._least[i]:
                    narrower = lines_at(i, widths[i] - 1)
                    height = sum(
                        max(other if top == i else tallest, n)
                        for (top, tallest, other), n in zip(tops, narrower, strict=True)
                    )
                    choices.append((height, self._least[i] - widths[i], i))
            widths[min(choices)[2]] -= 1
        return widths

    def _table(self, group: list[int], width: int) -> Table:
        widths = self._widths(group, width)
        table = Table(header_style="bold")
        for i in group:
            column = self.columns[i]
            table.add_column(
                Text(column.header), justify=column.justify, width=widths[i], overflow="fold"
            )
        previous = None
        for row in self.rows:
            cells = [row[i] for i in group]
            if self.merge_first:
                first = row[0].plain
                cells[0] = row[0] if first != previous else Text("")
                previous = first
            table.add_row(*cells)
        return table

    def _blocks(self, apart: list[int], every_row: bool) -> Iterator[Text]:
        """Per row, its name (the keys) and a line for each column of ``apart``; beside
        tables, only the rows with something to say (not ``-``)."""
        for row in self.rows:
            cells = [(self.columns[i], row[i]) for i in apart]
            if not every_row:
                cells = [(column, cell) for column, cell in cells if cell.plain not in ("", "-")]
                if not cells:
                    continue
            if self.keys == 1:
                name = row[0].copy()
            else:
                named = (
                    Text(f"{c.header} ") + cell
                    for c, cell in zip(self.columns, row[: self.keys], strict=False)
                )
                name = Text(", ").join(named)
            name.stylize("bold")
            yield name
            for column, cell in cells:
                yield Text.assemble("  ", (f"{column.header}: ", "dim"), cell)


# -- results ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ResultColumns:
    """Which figures the results tables show. By default the lab's (total time, aggregate
    tok/s, TTFT p50 and max, decode tok/s), then the settings, then the rest of the
    terminal's figures, a table each, and a table each for the steady state, TTFO and the
    conversations' turns where a configuration has them; ``wide``: all of them in one;
    ``keys``: those figures of the catalogue, in one. Each table leads with the
    configuration and its marks. Read when printed, so a figure added to the catalogue is
    in them."""

    keys: tuple[str, ...] = ()
    wide: bool = False

    def groups(self, having: Sequence[ConfigSummary] = ()) -> list[tuple[Figure, ...]]:
        """The tables' figures for the configurations ``having`` (an optional figure only
        where one of them has a value)."""
        if self.keys:
            return [tuple(figure(key) for key in self.keys)]
        shown = tuple(f for f in shown_in(View.TERMINAL, having=having) if f.key != LABEL)
        if self.wide:
            return [shown]
        lab = tuple(f for f in shown if f.lab and f.part is Part.RUN)
        settings = tuple(f for f in shown if f.part in (Part.CONFIG, Part.SERVER))
        rest = tuple(f for f in shown if f.part is Part.RUN and f not in lab)
        later = [tuple(f for f in shown if f.part is p) for p in LATER_PARTS]
        return [group for group in (lab, settings, rest, *later) if group]

    def lead(self) -> ResultColumns:
        """Only the first table: the live display's, small enough to watch."""
        return ResultColumns(tuple(f.key for f in self.groups()[0]))


LABEL = "label"


def parse_columns(text: str) -> ResultColumns:
    """``--columns``: figures by their ``concurrency.csv`` columns (``total_s``) or catalogue
    keys (``makespan_s``), comma-separated."""
    figures = [f for f in in_part(*SUMMARY_PARTS) if f.key != LABEL]
    known = {f.column: f.key for f in figures} | {f.key: f.key for f in figures}
    asked = [name.strip() for name in text.split(",") if name.strip()]
    for name in asked:
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            columns = ", ".join(f.column for f in figures)
            raise argparse.ArgumentTypeError(f"no figure '{name}'{hint}; the figures: {columns}")
    if not asked:
        raise argparse.ArgumentTypeError("give figures, e.g. --columns agg_tok_s,ttft_p99_s")
    return ResultColumns(tuple(dict.fromkeys(known[name] for name in asked)))


def add_table_flags(parser: argparse.ArgumentParser) -> None:
    """``--wide`` and ``--columns``, for the commands that print the results table; the
    choice is ``args.results_columns``."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--wide",
        dest="results_columns",
        action="store_const",
        const=ResultColumns(wide=True),
        default=ResultColumns(),
        help="the results in one table of every figure (split where the terminal is narrow)",
    )
    group.add_argument(
        "--columns",
        dest="results_columns",
        type=parse_columns,
        metavar="KEY[,KEY...]",
        help="the results table's figures, by their keys in concurrency.csv's header "
        "(e.g. agg_tok_s,ttft_p99_s,tpot_p50_ms)",
    )


def results_table(
    summaries: list[ConfigSummary], title: str = "Results", columns: ResultColumns | None = None
) -> Group:
    """The configurations' figures in the terminal, as ``columns`` chooses (the lab's, with
    ± sd across repeats, first), each table led by the label and its marks."""
    label = figure(LABEL)
    names = [Text(s.label + "".join(f" [{flag}]" for flag in s.flags)) for s in summaries]
    tables = []
    for n, group in enumerate((columns or ResultColumns()).groups(summaries)):
        rows = [
            [name, *(_result_cell(f, s) for f in group)]
            for name, s in zip(names, summaries, strict=True)
        ]
        header = [Column(label.header, "left"), *(Column(f.header) for f in group)]
        tables.append(Fitted(header, rows, title="" if n else title))
    return Group(*tables)


def _result_cell(f: Figure, summary: ConfigSummary) -> Text:
    failed = f.key == "failed" and f.of(summary)
    return Text(f.cell(summary, with_sd=True), style="red" if failed else "")


def hardware_line(hw: Hardware) -> str:
    if hw == Hardware():
        return "machine: not recorded"
    ram = hw.ram_bytes
    gpus = ", ".join(g.name or "?" for g in hw.gpus)
    cores = hw.cpu_physical_cores, hw.cpu_logical_cores
    parts = [
        hw.machine_name,
        f"{cores[0]}C/{cores[1]}T" if all(cores) else "",
        f"{ram / 2**30:.0f} GiB RAM" if ram else "",
        hw.os or "",
        f"GPU: {gpus}" if gpus else "",
        hw.llama_server_build or "",
    ]
    return " | ".join(p for p in parts if p)


def requests_table(session: Any) -> Fitted:
    """Every measured request of a session, one row each, under its configuration's label
    and its number (as its stream pane and Gantt row show it); in a trace replay, the line
    of the trace each replays; in a session with conversations, each one's conversation and
    turn, and the history a later turn processed again."""
    measured = [row for row in request_rows(session) if not row["warmup"]]
    turns = ("conversation", "turn", "reprefilled_tokens")
    names = (
        "label",
        "repeat",
        "request",
        *(("trace_line",) if any(row["trace_line"] is not None for row in measured) else ()),
        *(turns if any(row["conversation"] is not None for row in measured) else ()),
        "ok",
        "ttft_s",
        "queue_wait_s",
        "e2e_s",
        "output_tokens",
        "decode_tok_s",
        "cache_hit",
        "error",
    )
    rows = [[_num(row[c], 3) for c in names] for row in measured]
    columns = [
        Column(
            {
                "label": "config",
                "reprefilled_tokens": "re-prefilled",
                "trace_line": "trace line",
            }.get(n, n),
            "left" if n in ("label", "conversation", "error") else "right",
        )
        for n in names
    ]
    # the columns that say which request a row is: up to its number, line and turn
    keys = max(names.index(n) for n in ("request", "trace_line", "turn") if n in names) + 1
    return Fitted(columns, rows, title="Requests", keys=keys)


# -- run ------------------------------------------------------------------------------------
def run_line(name: str, n_configs: int, n_done: int, session_path: Path | None) -> str:
    """What ``workbench run`` is about to do, printed once the run is prepared: every
    configuration of the experiment, and those a resumed session finished already."""
    done = f", {n_done} already done" if n_done else ""
    return (
        f"[bold]{escape(name)}[/bold]: {plural(n_configs, 'configuration')}{done}; "
        f"session {escape(str(session_path))}"
    )


def event_line(event: object) -> str | None:
    """One line of plain progress for a terminal that is not interactive (CI logs, pipes)."""
    match event:
        case ConfigStarted(config=config):
            return f"config {config.index + 1}: {escape(config.label)}"
        case ServerReady(facts=facts):
            return (
                f"  server ready: n_slots={facts.n_slots} "
                f"n_ctx_slot={facts.n_ctx_slot} kv_unified={facts.kv_unified}"
            )
        case ConfigFinished(summary=summary) if summary is not None:
            agg = figure("agg_tok_s")
            rate = agg.of(summary)
            line = (
                f"  {summary.status}: {summary.value('ok') or 0}/{summary.value('requests') or 0}"
                f" requests ok" + (f", {agg.text(rate)} {agg.unit} aggregate" if rate else "")
            )
            if why := summary.not_same_task:
                line += f"\n  [red]not the same task:[/red] {escape(why)}"
            return line
        case Notice(level=level, text=text):
            style = "red" if level == NoticeLevel.ERROR else "yellow"
            return f"[{style}]{level}:[/{style}] {escape(text)}"
    return None


# -- sessions -------------------------------------------------------------------------------
def session_line(meta: dict[str, Any], status: str) -> str:
    """A session's name, date, status and mode, the first line of ``show``."""
    return (
        f"[bold]{escape(meta['name'])}[/bold]  {meta['created_at']}  status: "
        f"[{'green' if status == RunStatus.COMPLETE else 'yellow'}]{status}"
        f"[/]  mode: {meta['mode']}" + (f" {escape(meta['base_url'])}" if meta["base_url"] else "")
    )


def reported_table(session: Any, source: ImportSource) -> Fitted:
    """An imported file's own figures, under its names, one column per configuration: kept
    apart from the results above, which the workbench derived from the file's times."""
    reported = [session.reported_figures(c.index) for c in session.configs]
    rows = []
    for name in dict.fromkeys(n for figures in reported for n in figures):
        values = [figures.get(name) for figures in reported]
        shown = [int(v) if v is not None and v.is_integer() else v for v in values]
        rows.append([name, *(_num(v, 3) for v in shown)])
    columns = [Column("figure", "left"), *(Column(c.label) for c in session.configs)]
    title = escape(f"As {source.tool} reported them ({source.file_name})")
    return Fitted(columns, rows, title=title)


def against_table(predicted: list[ConfigSummary], measured: list[ConfigSummary]) -> Fitted:
    """Each configuration's compared figures, predicted / measured and the error
    (``against_rows``): ``predict --against``'s and ``show``'s for a session that stored
    its prediction."""
    header = against_header()
    columns = [Column(header[0], "left"), *(Column(h) for h in header[1:])]
    rows = against_rows(predicted, measured)
    return Fitted(columns, rows, title="Predicted / measured (error)")


def print_prediction(
    console: Console, prediction: RunPrediction, measured: list[ConfigSummary]
) -> None:
    """A session's stored prediction beside what it measured, the calibrations it came
    from, and each configuration it left out."""
    if prediction.configs:
        console.print(against_table([c.summary for c in prediction.configs], measured))
    for line in prediction_notes(prediction):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def memory_table(checks: list[MemoryCheck]) -> Fitted:
    """The server's buffer figures against its measured memory, one row per configuration."""
    names = ("config", "model + KV + compute MiB", "peak RSS MiB", "unaccounted")
    rows = [
        [
            check.label,
            f"{check.predicted_mib:.0f}",
            "-" if check.peak_rss_mib is None else f"{check.peak_rss_mib:.0f}",
            "-" if check.error is None else f"{check.error:.0%}",
        ]
        for check in checks
    ]
    columns = [Column(n, "left" if n == "config" else "right") for n in names]
    return Fitted(columns, rows, title="Memory: the server's buffers against its measured RSS")


def print_sessions(console: Console, infos: list[SessionInfo]) -> None:
    """The sessions found in folders, an unreadable one named with its error, numbered;
    then each one's file, on a line of its own that nothing cuts or breaks (to copy into
    the next command)."""
    names = ("#", "name", "created", "status", "mode", "hardware", "backend", "model")
    rows: list[list[Cell]] = []
    for n, info in enumerate(infos, 1):
        if info.error:  # the error's path is the file's below: its name says which here
            error = info.error.replace(str(info.path), info.path.name)
            rows.append([str(n), error, "-", Text("unreadable", style="red"), *["-"] * 5])
            continue
        style = {RunStatus.COMPLETE: "green", RunStatus.INCOMPLETE: "yellow"}.get(
            info.status, "red"
        )
        label = info.name + (f" ({info.notes.label})" if info.notes.label else "")
        if info.notes.tags:
            label += " [" + ", ".join(info.notes.tags) + "]"
        rows.append(
            [
                str(n),
                label,
                info.created_at.replace("T", " "),
                Text(info.status, style=style),
                info.mode,
                info.hardware,
                info.backend or "unknown",
                info.model,
                configurations_line(info.configs),
            ]
        )
    columns = [Column(n, "right" if n == "#" else "left") for n in (*names, "configurations")]
    console.print(Fitted(columns, rows, title="Sessions", keys=2))
    console.print("files:", highlight=False)
    for n, info in enumerate(infos, 1):
        console.print(f"{n:>3}  {info.path}", soft_wrap=True, markup=False, highlight=False)


def comparison_table(comparison: Comparison, relative: bool) -> Fitted:
    """Sessions side by side: a row per configuration and metric, a column per session."""
    rows = [
        [
            row["configuration"],
            row["metric"],
            *(comparison.cell_text(row, c) for c in comparison.columns),
        ]
        for row in comparison.rows()
    ]
    columns = [
        Column("configuration", "left"),
        Column("metric", "left"),
        *(Column(c) for c in comparison.columns),
    ]
    title = "Comparison" + (" (relative to 1 slot)" if relative else "")
    return Fitted(columns, rows, title=title, keys=2, merge_first=True)


def verdict_line(verdict: Verdict) -> Text:
    """A hypothesis and whether the session supports it, in the verdict's colour."""
    styles = {"supported": "green", "not supported": "red", "inconclusive": "yellow"}
    return Text(f"{verdict.verdict.upper()}", style=f"bold {styles[verdict.verdict]}") + Text(
        f"  {verdict.hypothesis}"
    )


def cache_line(verdict: CacheVerdict) -> Text:
    """Whether a conversations configuration's slots held its conversations' caches, in the
    colour of how it went."""
    style = {HELD: "green", LOST: "red"}.get(verdict.state, "yellow")
    return Text("caches: ", style=f"bold {style}") + Text(verdict.sentence)


# -- capacity -------------------------------------------------------------------------------
def model_line(model: ModelFacts, kv_type: str, available: int, where: str) -> str:
    """What the plan is made of: the model's shape, its KV cost per token, the memory."""
    per_token_kib = kv_bytes_per_token(model, kv_type, kv_type) / 1024
    window = model.window
    layers = f"{model.layers} layers"
    if window is not None:
        layers += (
            f" ({model.layers - window.windowed_layers} full, {window.windowed_layers} with a "
            f"{window.tokens}-token window)"
        )
    state = model.recurrent
    if state is not None:
        attending = f"{state.attention_layers} with a KV cache, " if state.attention_layers else ""
        layers += (
            f" ({attending}{state.recurrent_layers} recurrent: "
            f"{state.bytes_per_sequence / 2**20:.1f} MiB of state per sequence)"
        )
    return (
        f"{model.name} ({model.architecture}, {model.quantization}): {layers}, "
        f"{max(model.kv_heads)} KV heads x {model.head_k}, weights "
        f"{model.tensor_bytes / 2**20:.0f} MiB, KV {per_token_kib:.1f} KiB per token "
        f"({kv_type}); memory to plan for: {available / 2**30:.1f} GiB ({where})"
    )


def footprint_note(
    model: ModelFacts, rows: list[PlanRow], ubatch: int, flash_attn: bool, repack: bool
) -> str:
    """What a plan's total adds up, and how far each part was checked."""
    repacked = model.shape.repacked_bytes / 2**20 if repack else 0.0
    weights = f"weights {model.tensor_bytes / 2**20 + repacked:.0f} MiB"
    if repacked:
        weights += f" ({repacked:.1f} MiB of it the copies the CPU backend repacks)"
    runtime = rows[0].runtime_mib if rows else 0.0
    return (
        f"total MiB = {weights} + KV + compute MiB (the compute buffer for -ub {ubatch}, flash "
        f"attention {'on' if flash_attn else 'off'}, and one token's logits a slot) + "
        f"{runtime:.0f} MiB of the server process's own (--overhead-mib). Checked against "
        "llama-server b11434's logged buffers on SmolLM2-135M and Gemma 3 270M on the CPU; "
        "for other shapes (mixture of experts, recurrent layers) the compute is an estimate "
        "and a GPU backend's driver adds its own."
    )


def window_note(model: ModelFacts, ubatch: int, swa_full: bool) -> str:
    """How the plan counts a sliding-window model's KV (empty for a model without one)."""
    window = model.window
    if window is None:
        return model.window_note and f"Note: {model.window_note}."
    held = (
        "the whole context too (--swa-full)"
        if swa_full
        else f"its {window.tokens}-token window plus the {ubatch}-token micro-batch (per slot; "
        "the window of every slot in a unified pool), padded to 256"
    )
    return (
        f"KV MiB counts two caches: the {model.layers - window.windowed_layers} full layers "
        f"hold each slot's context, the {window.windowed_layers} windowed layers {held}. "
        "A request's prompt limit is still the ctx per request."
    )


def recurrent_note(model: ModelFacts) -> str:
    """How the plan counts a recurrent or hybrid model's memory (empty for a transformer)."""
    state = model.recurrent
    if state is None:
        return model.recurrent_note and f"Note: {model.recurrent_note}."
    kv = (
        f"KV MiB is the {state.attention_layers} attention layers' cache only"
        if state.attention_layers
        else "no layer holds a KV cache"
    )
    return (
        f"State MiB is the {state.recurrent_layers} recurrent layers' fixed state, one "
        "sequence's a slot (f32 whatever --kv-type), which does not grow with the context; "
        f"{kv}. These figures are modelled from llama.cpp's source and not checked on a server."
    )


def plan_table(rows: list[PlanRow]) -> Fitted:
    """Each context and slot count: the KV cache (apart from a recurrent model's fixed
    state, where it has one), the total, and whether it fits."""
    stateful = any(r.state_mib for r in rows)
    names = (
        "ctx",
        "slots",
        "KV",
        "ctx per request",
        "KV MiB",
        *(("state MiB",) if stateful else ()),
        "compute MiB",
        "total MiB",
        "fits?",
        "warning",
    )
    styles = {"fits": "green", "tight": "yellow", "does not fit": "red"}
    cells = [
        [
            str(r.ctx),
            str(r.slots),
            "unified" if r.unified else "per slot",
            str(r.ctx_per_request),
            f"{r.kv_mib - r.state_mib:.1f}",
            *((f"{r.state_mib:.1f}",) if stateful else ()),
            f"{r.compute_mib:.1f}",
            f"{r.total_mib:.0f}",
            Text(r.fit, style=styles[r.fit]),
            r.warning,
        ]
        for r in rows
    ]
    columns = [Column(n, "left" if n in ("fits?", "warning") else "right") for n in names]
    return Fitted(columns, cells, keys=2)


def slo_table(results: list[ConfigGoodput], peak: int | None) -> Fitted:
    """Goodput per configuration against the SLO, and the users each one serves (with the
    machines a ``peak`` of concurrent users needs)."""
    names = (
        "config",
        "slots",
        "concurrency",
        "good / requests",
        *(figure(key).header for key in SHOWN),
        "meets SLO",
        "users served",
        "why not",
    )
    rows = []
    for r in results:
        served = r.concurrency if r.acceptable else 0
        users = str(served)
        if peak is not None and served:
            users += f" ({machines_needed(peak, served)} machines for {peak})"
        rows.append(
            [
                r.label,
                str(r.slots),
                str(r.concurrency),
                f"{r.good}/{r.requests}",
                *(figure(key).text(getattr(r, key)) for key in SHOWN),
                Text("yes" if r.acceptable else "no", style="green" if r.acceptable else "red"),
                users,
                "; ".join(r.reasons),
            ]
        )
    columns = [Column(n, "left" if n in ("config", "why not") else "right") for n in names]
    return Fitted(columns, rows)


def roofline_table(rows: list[RooflineRow]) -> Fitted:
    """Measured decode speed against the bound memory bandwidth sets, per configuration."""
    names = (
        "config",
        "slots",
        "batch",
        "weights MiB",
        "KV in use MiB/seq",
        "bound tok/s",
        "decode tok/s",
        "of bound",
    )
    cells = [
        [
            r.label,
            str(r.slots),
            str(r.batch),
            f"{r.weights_mib:.0f}",
            f"{r.kv_in_use_mib:.2f}",
            f"{r.bound_tok_s:.0f}",
            "-" if r.decode_tok_s is None else f"{r.decode_tok_s:.1f}",
            "-" if r.share is None else f"{r.share:.0%}",
        ]
        for r in rows
    ]
    columns = [Column(n, "left" if n == "config" else "right") for n in names]
    return Fitted(columns, cells)
