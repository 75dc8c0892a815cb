"""One catalogue of every figure the workbench shows, so that no two views disagree.

Each figure is defined once here: its key (the ``ConfigSummary`` attribute or ``RunSummary``
field it reads), title, short header, unit, display format, how a configuration's repeats
combine into it, its one-line definition, and which views show it. The results table of the
window, the terminal's tables, ``concurrency.csv`` and the JSON export, the comparison and its
report, the SLO evaluation and the documentation's metric tables all read it, so a figure added here
(one entry) appears in each of them, and a rule changed here changes everywhere at once.
Figures shown while a run goes and computed differently from the final ones are marked as
estimates and named apart from the figures they approximate.

It is the only source of the repeat rules (``Figure.over`` applies them: a configuration's
summary, every table and export). The thresholds its definitions print live with the rules
that apply them (``client_limits``, ``machine_load``, ``saturation``, ``cross_checks``): it
reads them, and none of those modules reads it back (an import-linter contract keeps
``figures`` free of import cycles). No Qt here: the engine stays headless (import-linter
contract).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from workbench.engine.figures.client_limits import (
    CLIENT_LIMITED_RULE,
    DISPATCH_LIMIT_MS,
    DISPATCH_SHARE_OF_TTFT,
    LOOP_BUSY_LIMIT,
)
from workbench.engine.figures.cross_checks import DELIVERY_JITTER_MS
from workbench.engine.figures.machine_load import MACHINE_BUSY_RULE
from workbench.engine.figures.saturation import (
    BIN_S,
    CONFIDENCE,
    MIN_GROWTH,
    MIN_POINTS,
    WINDOW_S,
)


class Summarized(Protocol):
    """What the catalogue asks of a configuration's summary (``ConfigSummary``, and a
    prediction's): each figure's value and its spread across repeats, by key. The summary
    applies the repeat rules to its own repeats; the catalogue does not reach into it."""

    def value(self, key: str) -> Any: ...

    def spread(self, key: str) -> float | None: ...


class Combine(Enum):
    """How one configuration's repeats make its figure. The value is the rule's name, as the
    documentation, the report and the tooltips print it."""

    SETTING = "one value per configuration"
    MEAN_SD = "mean of per-repeat values (± sd)"
    MEAN = "mean of per-repeat values"
    SUM = "sum over repeats"
    RUNS = "number of repeats"
    JOINED = "each repeat's value, joined with +"
    POOLED = "all repeats' requests pooled"
    LIVE = "not combined: shown only while it runs"

    def apply(self, values: Sequence[Any]) -> Any:
        """The rule applied to each repeat's value (the one place a rule becomes a number):
        None when no repeat has a number. Not for the rules that are no arithmetic
        (``SETTING``, ``RUNS``, ``POOLED``, ``LIVE``): their figures work them out."""
        if self is Combine.JOINED:
            return "+".join(sorted({str(v) for v in values if v is not None}))
        numbers = _numbers(values)
        if not numbers:
            return None
        return sum(numbers) if self is Combine.SUM else statistics.fmean(numbers)


class Part(Enum):
    """Where a figure comes from; ``concurrency.csv`` lays its columns out in this order."""

    CONFIG = "which configuration: its settings, status and repeats"
    RUN = "measured in each repeat (RunSummary), then combined over repeats"
    SERVER = "how the server was set up and counted tokens"
    STEADY = (
        "over each repeat's steady state (the ramp-up and the drain left out), and whether its "
        "queue grew without bound"
    )
    REASONING = (
        "the answer after the reasoning: where a server streamed reasoning apart from the answer"
    )
    CONVERSATION = (
        "a conversations run's turns against the server's cache: turn 1 against the later "
        "turns, which resend their history (empty for any other run)"
    )
    SPECULATIVE = (
        "speculative decoding: a draft model's drafts, from the server's `/metrics` counters "
        "just before and after each repeat (empty without a draft model)"
    )
    STALLS = (
        "generation stalls: a stream's gaps between token chunks longer than 3 times its own "
        "median gap (and than 0.25 s), typically while another request's prompt is processed "
        "beside it"
    )
    SLO = "the SLO evaluation (per request, all repeats together)"
    LIVE = "while a run goes"


PART_RECORDS = {
    Part.STEADY: "steady",
    Part.REASONING: "reasoning",
    Part.CONVERSATION: "conversation",
    Part.SPECULATIVE: "speculative",
    Part.STALLS: "stalls",
}
"""The parts whose per-repeat figures ``RunSummary`` keeps in a sub-record, by its
attribute; the other parts' are its own fields."""


class View(Enum):
    """The summary views that show a selection of the figures (the CSV and JSON exports show
    every figure of the ``SUMMARY_PARTS``)."""

    WINDOW = "the window's results table"
    TERMINAL = "the terminal's results table (run, show)"
    COMPARISON = "the comparison table (compare, the window's comparison, the report)"
    CHART = "the charts against the swept setting (compare, export --charts, the report)"
    LIVE_CHART = "the window's charts during a run"


@dataclass(frozen=True)
class Figure:
    """One figure: what every view needs to name it, show it and explain it. Adding one
    (dispatch delay p99, a client-limited flag) is one entry in ``FIGURES``."""

    key: str
    title: str
    header: str  # short column header, on one line; the window splits it in two
    unit: str
    digits: int | None  # decimals shown; None shows the value as it is (counts, names)
    combine: Combine
    definition: str
    part: Part = Part.RUN
    views: frozenset[View] = frozenset()
    lab: bool = False  # one of the lab's concurrency.csv columns, which come first
    csv: str | None = None  # its concurrency.csv column when that is not the key
    estimate: bool = False  # a live figure that approximates a final one
    # Only some runs have it (a steady state, streamed reasoning, conversations): a view
    # shows it only where one of its configurations has a value (``shown_in``'s ``having``).
    optional: bool = False
    # Added to a part after concurrency.csv's columns settled: written after every other
    # column (with its spread), so a reader that takes the columns by place finds them all
    # where they were.
    late: bool = False

    @property
    def path(self) -> str:
        """Where a repeat's value of it is in ``RunSummary``: its key, inside its part's
        sub-record where the part has one (``steady.steady_s``)."""
        record = PART_RECORDS.get(self.part)
        return f"{record}.{self.key}" if record else self.key

    @property
    def column(self) -> str:
        """Its column in concurrency.csv."""
        return self.csv or self.key

    @property
    def heading(self) -> str:
        """Title and unit, as rows and axes name it: ``TTFT p50 (s)``."""
        return f"{self.title} ({self.unit})" if self.unit else self.title

    @property
    def spread(self) -> bool:
        """Whether views print its standard deviation across repeats beside it."""
        return self.combine is Combine.MEAN_SD

    @property
    def relative(self) -> bool:
        """Whether 'relative to 1 slot' divides it: counts, and sizes in tokens (what was
        asked of the server, not how it did), are not ratios."""
        return self.combine in (Combine.MEAN_SD, Combine.MEAN, Combine.POOLED) and (
            self.unit != "tokens"
        )

    def text(self, value: Any, sd: Any = None) -> str:
        """The display format: ``-`` for no value, ``digits`` decimals, and ``±sd``."""
        if value is None:
            return "-"
        if isinstance(value, bool):
            return "on" if value else "off"
        if self.digits is None or not isinstance(value, int | float):
            return str(value)
        text = f"{value:.{self.digits}f}"
        if isinstance(sd, float):
            text += f" ±{sd:.{self.digits}f}"
        return text

    def live_text(self, value: float) -> str:
        """How a live figure reads where it is shown, its header marking the estimate:
        ``≈21 chunks/s``."""
        return f"{self.header}{self.text(value)} {self.unit}"

    def of(self, summary: Summarized) -> Any:
        """Its value for one configuration, by its repeat rule."""
        return summary.value(self.key)

    def over(self, runs: Sequence[Any]) -> Any:
        """Its value over a configuration's repeats (``RunSummary`` each), by its repeat rule:
        the one place the rules are applied to numbers."""
        if self.combine is Combine.RUNS:  # a count of repeats: no repeat has a value of it
            return len(runs)
        return self.combine.apply([field_at(run, self.path) for run in runs])

    def sd_over(self, runs: Sequence[Any]) -> float | None:
        """Its standard deviation across ``runs``: None with fewer than two values."""
        numbers = _numbers(field_at(run, self.path) for run in runs)
        return statistics.stdev(numbers) if len(numbers) > 1 else None

    def sd_of(self, summary: Summarized) -> float | None:
        """Its standard deviation across repeats: None with fewer than two, or for a figure
        that is not a mean."""
        return summary.spread(self.key)

    def cell(self, summary: Summarized, with_sd: bool = False) -> str:
        """Its value for one configuration in the display format (with ``±sd`` on request,
        for the figures that report one)."""
        sd = self.sd_of(summary) if with_sd and self.spread else None
        return self.text(self.of(summary), sd)


SUMMARY_PARTS = (
    Part.CONFIG,
    Part.RUN,
    Part.SERVER,
    Part.STEADY,
    Part.REASONING,
    Part.CONVERSATION,
    Part.SPECULATIVE,
    Part.STALLS,
)
"""The parts whose figures a configuration's summary holds, as ``concurrency.csv`` and the
JSON export write them."""


def field_at(record: Any, path: str) -> Any:
    """A record's value at a dotted ``path`` (``steady.steady_s``, or ``ttft_p50_s``)."""
    value = record
    for name in path.split("."):
        value = getattr(value, name)
    return value


def _numbers(values: Iterable[Any]) -> list[float]:
    return [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]


_W, _T, _C, _CH, _LC = View.WINDOW, View.TERMINAL, View.COMPARISON, View.CHART, View.LIVE_CHART
_ALL_TABLES = frozenset({_W, _T, _C})

# The order here is the order of every view. The lab's figures lead each table.
FIGURES: tuple[Figure, ...] = (
    Figure(
        "label", "Configuration", "config", "", None, Combine.SETTING,
        "the configuration's name in the sweep, e.g. np=4",
        Part.CONFIG, frozenset({_W, _T}),
    ),
    Figure(
        "slots", "Slots", "np", "", None, Combine.SETTING,
        "`-np`: parallel slots the server was started with (-1 = auto)",
        Part.CONFIG, frozenset({_W, _T}), lab=True,
    ),
    Figure(
        "ctx", "Context", "ctx", "tokens", None, Combine.SETTING,
        "`-c`: the server's total context (as its log reports it, else as asked)",
        Part.CONFIG, frozenset({_T}), lab=True,
    ),
    Figure(
        "n_ctx_slot", "Context per slot", "ctx/slot", "tokens", None, Combine.SETTING,
        "`n_ctx_slot`: the context each slot gets, from the server's startup log",
        Part.CONFIG, frozenset({_W, _T}), lab=True,
    ),
    Figure(
        "concurrency", "Concurrency", "conc", "requests", None, Combine.SETTING,
        "requests in flight at most: the workload's concurrency, else all its requests",
        Part.CONFIG, frozenset({_T}), lab=True,
    ),
    Figure(
        "max_tokens", "Max tokens", "max tok", "tokens", None, Combine.SETTING,
        "tokens to generate per request",
        Part.CONFIG, lab=True,
    ),
    Figure(
        "input_tokens", "Input tokens", "in tok", "tokens", None, Combine.SETTING,
        "the prompt length asked for, chat template included (`input_tokens`; 0 = the "
        "prompts as written)",
        Part.CONFIG,
    ),
    Figure(
        "status", "Status", "status", "", None, Combine.SETTING,
        "ok, failed or cancelled",
        Part.CONFIG,
    ),
    Figure(
        "repeats", "Repeats", "repeats", "", None, Combine.RUNS,
        "measured repeats of the configuration",
        Part.CONFIG,
    ),
    Figure(
        "makespan_s", "Total time", "total s", "s", 2, Combine.MEAN_SD,
        "makespan: first submit to last done",
        views=_ALL_TABLES, lab=True, csv="total_s",
    ),
    Figure(
        "agg_tok_s", "Aggregate throughput", "agg tok/s", "tok/s", 1, Combine.MEAN_SD,
        "sum of output tokens / makespan",
        views=_ALL_TABLES | {_CH, _LC}, lab=True,
    ),
    Figure(
        "ttft_p50_s", "TTFT p50", "TTFT p50 s", "s", 3, Combine.MEAN_SD,
        "median over requests of TTFT, `t_first_token - t_submit`: the first visible text. "
        "A request not streamed (`stream = false`) shows its text only when the whole "
        "answer has come, so its TTFT is its E2E latency (and TPOT, ITL and decode speed "
        "are not seen)",
        views=_ALL_TABLES | {_CH, _LC}, lab=True,
    ),
    Figure(
        "ttft_max_s", "TTFT max", "TTFT max s", "s", 3, Combine.MEAN_SD,
        "the slowest request's TTFT",
        views=_ALL_TABLES | {_CH}, lab=True,
    ),
    Figure(
        "decode_tok_s", "Per-request decode speed", "decode tok/s", "tok/s", 1, Combine.MEAN_SD,
        "a typical request's `1 / TPOT`: `1000 / TPOT p50` (ms), so that it reads the same as "
        "the TPOT beside it; not the mean of per-request rates, which one fast request (a "
        "short answer on an idle slot) can dominate",
        views=_ALL_TABLES | {_CH, _LC}, lab=True,
    ),
    Figure(
        "requests", "Requests", "requests", "requests", None, Combine.SUM,
        "measured requests (warm-ups are recorded but not counted, nor the requests a "
        "repeat stopped when over-saturated left unsent: `stop_when_saturated`)",
    ),
    Figure(
        "failed", "Failed", "failed", "requests", None, Combine.SUM,
        "requests that failed (HTTP error, disconnect, malformed stream, timeout): "
        "left out of the latency figures",
        views=_ALL_TABLES,
    ),
    Figure(
        "context_failed", "Did not fit", "no fit", "requests", None, Combine.SUM,
        "requests a slot's context could not hold: refused (the prompt is longer than the "
        "slot) or stopped short of `max_tokens` when the context filled up; counted in "
        "failed too",
        views=frozenset({_W, _T}),
    ),
    Figure(
        "not_same_task", "Not the same task", "not the same task", "", None, Combine.SETTING,
        "why the configuration did not do the task the others did (requests that did not "
        "fit a slot's context), so its figures are not comparable; empty when it did",
    ),
    Figure(
        "prompt_tokens_p50", "Prompt tokens p50", "prompt tok", "tokens", 0, Combine.MEAN,
        "median over requests of the prompt's length by the server's count "
        "(`usage.prompt_tokens`, else `timings.prompt_n + cache_n`)",
        views=frozenset({_C}),
    ),
    Figure(
        "prefill_tok_s", "Prefill speed", "prefill tok/s", "tok/s", 1, Combine.MEAN,
        "per request `timings.prompt_n / timings.prompt_ms`: prompt tokens processed per "
        "second of prefill (cached tokens were not processed), the mean over requests",
        views=_ALL_TABLES | {_CH},
    ),
    Figure(
        "cache_hits", "Cache hits", "cache hits", "requests", None, Combine.SUM,
        "requests whose `timings.cache_n > 0` (a warm prefix cache flatters TTFT)",
        views=frozenset({_T}),
    ),
    Figure(
        "cache_state", "Prompt cache", "cache", "", None, Combine.SETTING,
        "off (`cache_prompt = false`), cold (on, nothing sent before the measured requests) "
        "or warm (on, after the warm-up requests)",
        Part.CONFIG, frozenset({_C}),
    ),
    Figure(
        "cache_hit_rate", "Cache hit rate", "cache hit", "share", 2, Combine.MEAN,
        "prompt tokens the server reused from its cache (`timings.cache_n`) over all prompt "
        "tokens (the chat template's shared opening counts too)",
        views=frozenset({_C}),
    ),
    Figure(
        "ttft_hit_p50_s", "TTFT p50, cache hits", "TTFT hit s", "s", 3, Combine.MEAN,
        "median TTFT of the requests that reused some of their prompt (`timings.cache_n > 0`)",
    ),
    Figure(
        "ttft_miss_p50_s", "TTFT p50, no cache hit", "TTFT miss s", "s", 3, Combine.MEAN,
        "median TTFT of the requests that reused none of their prompt",
    ),
    Figure(
        "output_tokens", "Output tokens", "out tok", "tokens", None, Combine.SUM,
        "the server's count: `usage.completion_tokens`, else `timings.predicted_n`; chunks "
        "are counted only as a last resort, and the token source says which",
    ),
    Figure(
        "ttft_p90_s", "TTFT p90", "TTFT p90 s", "s", 3, Combine.MEAN,
        "90th percentile over requests of TTFT",
    ),
    Figure(
        "ttft_p99_s", "TTFT p99", "TTFT p99 s", "s", 3, Combine.MEAN,
        "99th percentile over requests of TTFT",
    ),
    Figure(
        "tpot_p50_ms", "TPOT p50", "TPOT p50 ms", "ms", 2, Combine.MEAN,
        "median over requests of TPOT, `(t_last_token - t_first_token) / (output_tokens - 1)`",
        views=frozenset({_T}),
    ),
    Figure(
        "tpot_p90_ms", "TPOT p90", "TPOT p90 ms", "ms", 2, Combine.MEAN,
        "90th percentile over requests of TPOT",
    ),
    Figure(
        "tpot_p99_ms", "TPOT p99", "TPOT p99 ms", "ms", 2, Combine.MEAN,
        "99th percentile over requests of TPOT",
    ),
    Figure(
        "itl_p50_ms", "ITL p50", "ITL p50 ms", "ms", 2, Combine.MEAN,
        "median of ITL, the gaps between consecutive token chunks, pooled over requests",
    ),
    Figure(
        "itl_p90_ms", "ITL p90", "ITL p90 ms", "ms", 2, Combine.MEAN,
        "90th percentile of ITL, pooled over requests",
    ),
    Figure(
        "itl_p99_ms", "ITL p99", "ITL p99 ms", "ms", 2, Combine.MEAN,
        "99th percentile of ITL, pooled over requests",
        views=frozenset({_T}),
    ),
    Figure(
        "itl_max_ms", "ITL max", "ITL max ms", "ms", 2, Combine.MEAN,
        "the longest gap between consecutive token chunks",
    ),
    Figure(
        "e2e_p50_s", "E2E latency p50", "E2E p50 s", "s", 3, Combine.MEAN,
        "median over requests of E2E latency, `t_last_token - t_submit`",
    ),
    Figure(
        "e2e_p90_s", "E2E latency p90", "E2E p90 s", "s", 3, Combine.MEAN,
        "90th percentile over requests of E2E latency",
    ),
    Figure(
        "queue_wait_p50_s", "Queue wait p50", "queue p50 s", "s", 3, Combine.MEAN,
        "median over requests of the queue wait, `TTFT - timings.prompt_ms` floored at 0: "
        "time spent waiting for a slot",
        views=frozenset({_T, _C, _CH}),
    ),
    Figure(
        "queue_wait_max_s", "Queue wait max", "queue max s", "s", 3, Combine.MEAN,
        "the longest queue wait",
        views=frozenset({_T}),
    ),
    Figure(
        "dispatch_p50_ms", "Dispatch delay p50", "dispatch p50 ms", "ms", 2, Combine.MEAN,
        "median over requests of the dispatch delay: actual send minus when the request was "
        "free to go (its arrival time, or when a client-side concurrency place freed), less "
        "the connection set-up",
    ),
    Figure(
        "dispatch_p99_ms", "Dispatch delay p99", "dispatch p99 ms", "ms", 2, Combine.MEAN,
        "99th percentile over requests of the dispatch delay; over "
        f"{DISPATCH_LIMIT_MS:g} ms and at least {DISPATCH_SHARE_OF_TTFT:.0%} of TTFT p50, it "
        "marks the run client-limited",
        views=frozenset({_T}),
    ),
    Figure(
        "dispatch_max_ms", "Dispatch delay max", "dispatch max ms", "ms", 2, Combine.MEAN,
        "the longest dispatch delay",
    ),
    Figure(
        "connect_p50_ms", "Connect p50", "connect p50 ms", "ms", 2, Combine.MEAN,
        "median over requests of opening the request's connection (timed apart, not in TTFT)",
    ),
    Figure(
        "ttft_from_intended_p50_s", "TTFT from intended p50", "TTFT sched p50 s", "s", 3,
        Combine.MEAN,
        "median over requests of `t_first_token - t_intended` (the arrival schedule's time, "
        "as GuideLLM's scheduled latency): client-side waits and dispatch delay included",
    ),
    Figure(
        "ttft_from_intended_p99_s", "TTFT from intended p99", "TTFT sched p99 s", "s", 3,
        Combine.MEAN,
        "99th percentile over requests of TTFT from the intended time",
    ),
    Figure(
        "e2e_from_intended_p50_s", "E2E from intended p50", "E2E sched p50 s", "s", 3,
        Combine.MEAN,
        "median over requests of `t_last_token - t_intended`",
    ),
    Figure(
        "loop_busy", "Measuring loop busy", "loop busy", "share", 2, Combine.MEAN,
        "CPU time of the thread that reads the sockets, over the run's wall time; over "
        f"{LOOP_BUSY_LIMIT:g} marks the run client-limited",
    ),
    Figure(
        "tokens_per_chunk", "Tokens per chunk", "tok/chunk", "tokens", 2, Combine.MEAN,
        "output tokens by the server's count over token chunks; above 1 (speculative "
        "decoding, a proxy) ITL is a gap between chunks, and TPOT and decode speed rest on "
        "the server's count",
    ),
    Figure(
        "client_limited", "Client-limited", "client-limited", "", None, Combine.SETTING,
        f"why the client, not the server, shaped the numbers ({CLIENT_LIMITED_RULE}); empty "
        "when it did not",
    ),
    Figure(
        "cross_check_failures", "Cross-checks off", "cross-checks", "", None, Combine.SETTING,
        "client figures that disagree by over 5 % with the server's own (decode time against "
        f"`timings.predicted_ms`, and by over {DELIVERY_JITTER_MS:g} ms per request, a token's "
        "delivery spread; tokens against `/metrics` counters, requests against its log or "
        "counter), each with its likely cause; empty when all agree",
    ),
    Figure(
        "n_slots", "Slots reported", "n_slots", "", None, Combine.SETTING,
        "`n_slots`: the slots the server's startup log reports",
        Part.SERVER,
    ),
    Figure(
        "kv_unified", "Unified KV", "kvu", "", None, Combine.SETTING,
        "`kv_unified`: one KV pool for all slots, as the server's startup log reports",
        Part.SERVER,
    ),
    Figure(
        "cont_batching", "Continuous batching", "cb", "", None, Combine.SETTING,
        "`-cb` / `-nocb`, as the experiment set it",
        Part.SERVER,
    ),
    Figure(
        "token_source", "Token source", "tokens from", "", None, Combine.JOINED,
        "where output tokens were counted from: `usage`, `timings` or `chunks`",
        Part.SERVER,
    ),
    Figure(
        "steady_s", "Steady state", "steady s", "s", 2, Combine.MEAN,
        "how long the steady state lasted: for a closed loop (burst arrivals, `concurrency` "
        "below `requests`) from when the requests in flight first reach `concurrency` to the "
        "last send; for open-loop arrivals (poisson, gamma, fixed) from the 10th to the 90th "
        "percentile of the send times; a burst (every request at once) has none, so this and "
        "every steady figure are empty",
        Part.STEADY, frozenset({_T}), optional=True,
    ),
    Figure(
        "steady_requests", "Steady requests", "steady req", "requests", None, Combine.SUM,
        "requests sent inside the steady state",
        Part.STEADY,
    ),
    Figure(
        "steady_agg_tok_s", "Steady throughput", "steady tok/s", "tok/s", 1, Combine.MEAN,
        "output tokens that arrived inside the steady state (each request's count shared "
        "evenly over its chunks) / its length; empty for a burst",
        Part.STEADY, frozenset({_W, _T}), optional=True,
    ),
    Figure(
        "steady_ttft_p50_s", "Steady TTFT p50", "steady TTFT p50 s", "s", 3, Combine.MEAN,
        "median TTFT of the requests sent inside the steady state; empty for a burst",
        Part.STEADY, frozenset({_W, _T}), optional=True,
    ),
    Figure(
        "steady_ttft_p90_s", "Steady TTFT p90", "steady TTFT p90 s", "s", 3, Combine.MEAN,
        "90th percentile TTFT of the requests sent inside the steady state; empty for a burst",
        Part.STEADY, frozenset({_T}), optional=True,
    ),
    Figure(
        "steady_tpot_p50_ms", "Steady TPOT p50", "steady TPOT p50 ms", "ms", 2, Combine.MEAN,
        "median TPOT of the requests sent inside the steady state; empty for a burst",
        Part.STEADY, frozenset({_T}), optional=True,
    ),
    Figure(
        "over_saturated", "Over-saturated", "over-saturated", "", None, Combine.SETTING,
        f"why the queue grew without bound: over the last {WINDOW_S:g} s of arrivals, the "
        "requests due and not done and their TTFT from the intended time both rose (a "
        f"least-squares slope, one point per {BIN_S:g} s, above zero by a one-sided t-test at "
        f"{CONFIDENCE:.0%}) and the queue by at least {MIN_GROWTH:g} requests; its latencies "
        "then grow with the run's length. Empty when it did not, or with arrivals in under "
        f"{MIN_POINTS} of those {BIN_S:g} s (a burst, a closed loop: every request due at once)",
        Part.STEADY,
    ),
    Figure(
        "ttfo_p50_s", "TTFO p50", "TTFO p50 s", "s", 3, Combine.MEAN_SD,
        "median over requests of TTFO, `t_first_answer - t_submit`: the first answer text, "
        "after the reasoning the server streamed apart from it; empty where no request "
        "streamed reasoning apart (TTFO is then TTFT), and in a session older than schema 7",
        Part.REASONING, frozenset({_W, _T}), optional=True,
    ),
    Figure(
        "ttfo_p90_s", "TTFO p90", "TTFO p90 s", "s", 3, Combine.MEAN,
        "90th percentile over requests of TTFO; empty where no request streamed reasoning "
        "apart",
        Part.REASONING, frozenset({_T}), optional=True,
    ),
    Figure(
        "turn1_ttft_p50_s", "TTFT p50, turn 1", "turn 1 TTFT p50 s", "s", 3, Combine.MEAN,
        "median TTFT of the conversations' first turns, which carry no history; empty for a "
        "run that is not a conversations run (as every figure of this part)",
        Part.CONVERSATION, frozenset({_W, _T}), optional=True,
    ),
    Figure(
        "turn1_ttft_p90_s", "TTFT p90, turn 1", "turn 1 TTFT p90 s", "s", 3, Combine.MEAN,
        "90th percentile TTFT of the conversations' first turns",
        Part.CONVERSATION, frozenset({_T}), optional=True,
    ),
    Figure(
        "later_ttft_p50_s", "TTFT p50, later turns", "later TTFT p50 s", "s", 3, Combine.MEAN,
        "median TTFT of the turns after the first, each sending its whole conversation so "
        "far: low where the server took that history from its cache",
        Part.CONVERSATION, frozenset({_W, _T}), optional=True,
    ),
    Figure(
        "later_ttft_p90_s", "TTFT p90, later turns", "later TTFT p90 s", "s", 3, Combine.MEAN,
        "90th percentile TTFT of the turns after the first",
        Part.CONVERSATION, frozenset({_T}), optional=True,
    ),
    Figure(
        "later_cache_share", "Cache reuse, later turns", "later cached", "share", 2,
        Combine.MEAN,
        "of the history later turns resent (each one's previous turn's prompt by the "
        "server's count), the share the server took from its cache: sum of "
        "`min(timings.cache_n, history)` over the sum of the histories; 1 where the slots "
        "held every conversation",
        Part.CONVERSATION, frozenset({_W, _T}), optional=True,
    ),
    Figure(
        "reprefilled_tokens", "Re-prefilled tokens", "re-prefilled tok", "tokens", None,
        Combine.SUM,
        "history tokens later turns had to process again although the server had processed "
        "them once: per later turn its history less `timings.cache_n` (floored at 0), summed",
        Part.CONVERSATION, frozenset({_W, _T}), optional=True,
    ),
    Figure(
        "later_turns", "Later turns", "later turns", "requests", None, Combine.SUM,
        "turns after the first whose own and previous turn's token counts the server gave "
        "(a turn after a failed one is not sent)",
        Part.CONVERSATION, optional=True,
    ),
    Figure(
        "lost_turns", "Later turns that lost their cache", "lost turns", "requests", None,
        Combine.SUM,
        "later turns that processed over half their history again: their slot had served "
        "another conversation in between",
        Part.CONVERSATION, optional=True,
    ),
    Figure(
        "lost_turn_share", "Lost-cache share", "lost share", "share", 2, Combine.MEAN,
        "later turns that lost their cache, of the later turns",
        Part.CONVERSATION, frozenset({_T}), optional=True,
    ),
    Figure(
        "conversations_per_slot", "Conversations per slot", "conv/slot", "", 2,
        Combine.SETTING,
        "`users` over the slots the server ran with, where both are known: above 1, "
        "conversations share slots and a returning one may find another's history there",
        Part.CONVERSATION, frozenset({_T}), optional=True,
    ),
    Figure(
        "goodput_rps", "Goodput", "goodput req/s", "req/s", 2, Combine.POOLED,
        "requests that met every per-request SLO (TTFT, TPOT, decode speed, E2E latency), "
        "over the summed makespans",
        Part.SLO,
    ),
    Figure(
        "throughput_rps", "Request throughput", "req/s", "req/s", 2, Combine.POOLED,
        "successful requests over the summed makespans",
        Part.SLO,
    ),
    Figure(
        "live_chunk_rate", "Live chunk rate (estimate)", "live ≈", "chunks/s", 0, Combine.LIVE,
        "token chunks from all streams in the last 2 s, per second (the terminal's live "
        "line): close to aggregate tok/s when each chunk carries one token",
        Part.LIVE, estimate=True,
    ),
    Figure(
        "live_decode_rate", "Live decode rate (estimate)", "≈", "chunks/s", 0, Combine.LIVE,
        "a running request's chunks after its first, per second since its first token (its "
        "stream pane): its decode tok/s (`1 / TPOT`, from the server's count) replaces it "
        "when it ends",
        Part.LIVE, estimate=True,
    ),
    Figure(
        "e2e_p99_s", "E2E latency p99", "E2E p99 s", "s", 3, Combine.MEAN,
        "99th percentile over requests of E2E latency", late=True,
    ),
    Figure(
        "cancelled", "Cancelled", "cancelled", "requests", None, Combine.SUM,
        "requests the run's stop (Ctrl-C, Stop) cut short or left unsent: not failures, left "
        "out of the latency figures; empty when none was",
        views=_ALL_TABLES, optional=True, late=True,
    ),
    Figure(
        "machine_busy", "Busy machine", "busy machine", "", None, Combine.SETTING,
        f"why something other than the server and the workbench shaped the numbers "
        f"({MACHINE_BUSY_RULE}); `unknown` where the server runs elsewhere; empty when the "
        "machine was quiet or the session did not record it (before schema 11)",
        late=True,
    ),
    Figure(
        "spec_acceptance", "Draft acceptance", "draft accept", "share", 2, Combine.MEAN,
        "of the tokens the draft model drafted, the share the model accepted: "
        "`spec_decode_num_accepted_tokens_total` over `spec_decode_num_draft_tokens_total`, "
        "each counted over the repeat (the server adds every slot's drafts); near 1 each "
        "step keeps most of a draft, near 0 the draft is work thrown away",
        Part.SPECULATIVE, frozenset({_W, _T}), optional=True,
    ),
    Figure(
        "spec_drafts", "Drafts", "drafts", "", None, Combine.SUM,
        "drafts the model verified (`spec_decode_num_drafts_total` over the repeat)",
        Part.SPECULATIVE, optional=True,
    ),
    Figure(
        "spec_draft_tokens", "Drafted tokens", "drafted tok", "tokens", None, Combine.SUM,
        "tokens the draft model drafted (`spec_decode_num_draft_tokens_total` over the repeat)",
        Part.SPECULATIVE, frozenset({_T}), optional=True,
    ),
    Figure(
        "spec_accepted_tokens", "Accepted draft tokens", "accepted tok", "tokens", None,
        Combine.SUM,
        "drafted tokens the model accepted (`spec_decode_num_accepted_tokens_total` over the "
        "repeat): tokens it did not decode one step each",
        Part.SPECULATIVE, frozenset({_T}), optional=True,
    ),
    Figure(
        "stall_max_s", "Longest stall", "stall max s", "s", 3, Combine.MEAN,
        "the longest stall of any stream: a gap between consecutive token chunks longer than "
        "3 times the stream's own median gap and than 0.25 s (streams of at least 4 gaps); "
        "empty where none stalled",
        Part.STALLS, frozenset({_T}), optional=True, late=True,
    ),
    Figure(
        "stall_p99_s", "Stall p99", "stall p99 s", "s", 3, Combine.MEAN,
        "99th percentile of the stalls, pooled over streams; empty where none stalled",
        Part.STALLS, optional=True, late=True,
    ),
    Figure(
        "stalled_stream_share", "Streams that stalled", "stalled", "share", 2, Combine.MEAN,
        "of the streams with at least 4 gaps, the share with a stall",
        Part.STALLS, optional=True, late=True,
    ),
    Figure(
        "stalled_s", "Stalled stream time", "stalled s", "s", 2, Combine.MEAN,
        "the stalls' lengths summed over streams: seconds a user watched a stream stand still",
        Part.STALLS, optional=True, late=True,
    ),
    Figure(
        "stalled_s_per_1k_prompt", "Stalled time per 1k prompt tokens", "stalled s/1k prompt",
        "s", 3, Combine.MEAN,
        "stalled stream time over the prompt tokens the server processed in the repeat (its "
        "count, less the cached), per 1,000: what processing prompts cost the other streams",
        Part.STALLS, optional=True, late=True,
    ),
    Figure(
        "gaps_within_share", "Gaps within the stall bound", "gaps within", "share", 3,
        Combine.MEAN,
        "of the gaps between token chunks of the streams judged, the share within the stall "
        "bound (3 times their stream's median, at least 0.25 s): the tokens delivered at the "
        "stream's own pace",
        Part.STALLS, optional=True, late=True,
    ),
    Figure(
        "stalled_by_prompts_share", "Stalled time a prompt caused", "stalled by prompts",
        "share", 2, Combine.MEAN,
        "of the stalled time, the share caused by another request's prompt processing: a "
        "stall's cause is the longest prompt (by the tokens the server processed) whose "
        "processing, placed by the server's `timings.prompt_ms` before its first token, "
        "covered at least half of it; empty where none stalled",
        Part.STALLS, optional=True, late=True,
    ),
    Figure(
        "stall_cause_tokens", "Stalling prompt", "stalling prompt", "tokens", 0,
        Combine.MEAN,
        "the length (the server's count) of the prompt that caused the longest stall; empty "
        "where no prompt caused it",
        Part.STALLS, optional=True, late=True,
    ),
    Figure(
        "stall_cause_ttft_s", "Stalling prompt's TTFT", "stalling TTFT s", "s", 3, Combine.MEAN,
        "the TTFT of the request whose prompt caused the longest stall: what a smaller `-b` "
        "costs it",
        Part.STALLS, optional=True, late=True,
    ),
    Figure(
        "stall_cause_streams", "Streams the stalling prompt held", "streams held", "", 1,
        Combine.MEAN,
        "the streams that the prompt causing the longest stall stalled, that one included",
        Part.STALLS, optional=True, late=True,
    ),
    Figure(
        "stall_cause_prompts", "Prompts processed in that stall", "prompts in stall", "", 1,
        Combine.MEAN,
        "the prompts whose processing covered the longest stall, its cause included: above "
        "1, several prompts admitted together froze the streams",
        Part.STALLS, optional=True, late=True,
    ),
    Figure(
        "ttft_held_max_s", "Longest TTFT held by a prompt", "ttft held max s", "s", 3,
        Combine.MEAN,
        "the longest time a request waited for its first token while a longer prompt than "
        "its own was processed for another request (placed as for the stalls): an "
        "upper bound on what others' prompts added to a TTFT; empty where the server timed "
        "no prompt",
        Part.STALLS, optional=True, late=True,
    ),
)  # fmt: skip


def figure(key: str) -> Figure:
    """The catalogue's entry for ``key``."""
    for entry in FIGURES:
        if entry.key == key:
            return entry
    raise KeyError(key)


def shown_in(*views: View, having: Sequence[Summarized] = ()) -> tuple[Figure, ...]:
    """The figures any of ``views`` shows, in catalogue order, the optional ones only where
    a configuration of ``having`` has a value of them (none without it): a plain burst's
    table gets no empty steady-state, reasoning or conversation columns. Read at call time,
    so a figure added to ``FIGURES`` reaches every view."""
    return tuple(
        f
        for f in FIGURES
        if f.views & set(views) and (not f.optional or any(f.of(s) is not None for s in having))
    )


def in_part(*parts: Part) -> tuple[Figure, ...]:
    """The figures of ``parts``, in catalogue order."""
    return tuple(f for f in FIGURES if f.part in parts)


@dataclass(frozen=True)
class RequestFigure:
    """One figure of a single request (``requests.csv``, the requests table): the
    ``RequestMetrics`` attribute it reads, in seconds, and how it is written out."""

    key: str
    column: str  # its requests.csv column
    title: str
    unit: str
    scale: float  # from seconds (or as is) to ``unit``
    digits: int
    definition: str

    def value(self, metrics: Any) -> float | None:
        """Its value for one request's ``RequestMetrics`` (None: failed, or not measured)."""
        raw = None if metrics is None else getattr(metrics, self.key)
        return None if raw is None else round(raw * self.scale, self.digits)


REQUEST_FIGURES: tuple[RequestFigure, ...] = (
    RequestFigure(
        "ttft_s", "ttft_s", "TTFT", "s", 1, 6,
        "`t_first_token - t_submit` (not streamed: when the whole answer came)",
    ),
    RequestFigure("e2e_s", "e2e_s", "E2E latency", "s", 1, 6, "`t_last_token - t_submit`"),
    RequestFigure(
        "tpot_s", "tpot_ms", "TPOT", "ms", 1000, 4,
        "`(t_last_token - t_first_token) / (output_tokens - 1)`, tokens by the server's count",
    ),
    RequestFigure("decode_tok_s", "decode_tok_s", "Decode speed", "tok/s", 1, 3, "`1 / TPOT`"),
    RequestFigure(
        "queue_wait_s", "queue_wait_s", "Queue wait", "s", 1, 6,
        "`TTFT - timings.prompt_ms`, floored at 0: waiting for a slot",
    ),
    RequestFigure(
        "prefill_s", "prefill_s", "Prefill", "s", 1, 6, "`TTFT - queue wait`",
    ),
    RequestFigure(
        "dispatch_s", "dispatch_ms", "Dispatch delay", "ms", 1000, 3,
        "`t_submit - t_ready`, less the part of it spent connecting",
    ),
    RequestFigure(
        "connect_s", "connect_ms", "Connect", "ms", 1000, 3,
        "opening the request's connection (before `t_ready` when opened ahead)",
    ),
    RequestFigure(
        "prompt_tokens", "prompt_tokens", "Prompt tokens", "tokens", 1, 0,
        "`usage.prompt_tokens`, else `timings.prompt_n + cache_n`: the server's count",
    ),
    RequestFigure(
        "prefill_tok_s", "prefill_tok_s", "Prefill speed", "tok/s", 1, 1,
        "`timings.prompt_n / timings.prompt_ms`",
    ),
    RequestFigure(
        "ttft_from_intended_s", "ttft_from_intended_s", "TTFT from intended", "s", 1, 6,
        "`t_first_token - t_intended`",
    ),
    RequestFigure(
        "e2e_from_intended_s", "e2e_from_intended_s", "E2E from intended", "s", 1, 6,
        "`t_last_token - t_intended`",
    ),
    RequestFigure(
        "ttfo_s", "ttfo_s", "TTFO", "s", 1, 6,
        "time to the first answer token (AIPerf's TTFO), `t_first_answer - t_submit`: the "
        "first `content` text, after any reasoning the server streamed apart from it "
        "(`reasoning_content`, or vLLM's `reasoning`); equal to TTFT where it streamed none "
        "(reasoning inside the answer, as `<think>` tags, is answer); empty where no answer "
        "came, or in a session older than schema 7, which did not tell the two apart",
    ),
    RequestFigure(
        "reasoning_tokens", "reasoning_tokens", "Reasoning tokens", "tokens", 1, 0,
        "output tokens spent reasoning (counted in `output_tokens` too): "
        "`usage.completion_tokens_details.reasoning_tokens` (vLLM with a reasoning parser), "
        "else the reasoning chunks counted (llama-server's usage does not say); "
        "`reasoning_token_source` says which (`usage`, `chunks`); empty in a session older "
        "than schema 7",
    ),
)  # fmt: skip
