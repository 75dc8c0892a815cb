"""How a configuration's summary is put in words: why its numbers may not be the server's
alone (trust notes), the short marks beside its label (flags), and the sentences behind them.

Apart from the numbers (``summaries``) so that the wording every view prints can change
without touching the maths; ``ConfigSummary``'s properties of the same names read these, and
these read only what ``Described`` names of it (so neither module imports the other back).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from workbench.engine.base.states import ConfigStatus
from workbench.engine.base.words import plural
from workbench.engine.figures.metrics import field_at, figure
from workbench.engine.figures.per_run import RunSummary


class Described(Protocol):
    """What the wording reads of a configuration's summary (``ConfigSummary``)."""

    @property
    def status(self) -> str: ...

    @property
    def cache_prompt(self) -> bool: ...

    @property
    def n_ctx_slot(self) -> int | None: ...

    @property
    def runs(self) -> Sequence[RunSummary]: ...

    def value(self, name: str) -> Any: ...


def unasked_cache_hits(summary: Described) -> str | None:
    """Requests that reused cached prompt tokens though the experiment turned the cache off
    (a server that caches anyway, or a prompt file that repeats): their TTFT is flattered.
    None when there were none, or when the cache was asked for."""
    hits = summary.value("cache_hits")
    if summary.cache_prompt or not hits:
        return None
    return f"{plural(hits, 'request')} reused cached prompt tokens though cache_prompt is off"


def checks_failed(summary: Described) -> list[str]:
    """Cross-checks with the server that disagreed, in any repeat (named by repeat when
    there are several)."""
    many = len(summary.runs) > 1
    return [
        f"repeat {i + 1}: {text}" if many else text
        for i, run in enumerate(summary.runs)
        for text in run.cross_checks.checks_failed
    ]


def not_same_task(summary: Described) -> str | None:
    """Why the configuration did not do the task the others did: requests its slots'
    context could not hold were refused or cut short, so its speed is not comparable.
    None when every request was served whole (or failed for another reason)."""
    failed = summary.value("context_failed")
    if not failed:
        return None
    per_slot = f" ({summary.n_ctx_slot} tokens per slot)" if summary.n_ctx_slot else ""
    return f"{failed} of {summary.value('requests')} requests did not fit the context{per_slot}"


def _by_repeat(summary: Described, reason: str) -> str | None:
    """A reason each repeat may give (a ``RunSummary`` field, by its dotted path), as one
    line naming the repeats when there are several, or None when none gave it."""
    if len(summary.runs) == 1:
        return field_at(summary.runs[0], reason)
    reasons = [
        f"repeat {i + 1}: {text}"
        for i, run in enumerate(summary.runs)
        if (text := field_at(run, reason))
    ]
    return "; ".join(reasons) or None


def client_limited(summary: Described) -> str | None:
    """Why any repeat's numbers were shaped by the client, or None."""
    return _by_repeat(summary, "client_limited")


def over_saturated(summary: Described) -> str | None:
    """Why any repeat's queue grew without bound (``saturation``), or None: its latencies
    tell how long the run lasted more than what the server does."""
    return _by_repeat(summary, figure("over_saturated").path)


def machine_busy(summary: Described) -> str | None:
    """Why something besides the server and the workbench used the machine in any repeat
    (``machine_load``), ``unknown: ...`` where the server's machine was not measured, or
    None (quiet, or not recorded: sessions before schema 11)."""
    if busy := _by_repeat(summary, "machine_busy"):
        return busy
    if unknown := _by_repeat(summary, "machine_unknown"):
        return f"unknown: {unknown}"
    return None


def machine_mark(summary: Described) -> str | None:
    """``busy machine``, ``machine unknown`` (the server runs elsewhere), or None."""
    if (machine := machine_busy(summary)) is None:
        return None
    return "machine unknown" if machine.startswith("unknown: ") else "busy machine"


def trust_notes(summary: Described) -> list[str]:
    """Why the configuration's numbers may not be the server's alone, or not the task the
    others did."""
    task = not_same_task(summary)
    notes = [f"not the same task: {task}"] if task else []
    if cache := unasked_cache_hits(summary):
        notes.append(f"prompt cache: {cache} (TTFT flattered)")
    if limited := client_limited(summary):
        notes.append(f"client-limited: {limited}")
    if saturated := over_saturated(summary):
        notes.append(f"over-saturated: {saturated} (latencies grow with the run's length)")
    if machine := machine_busy(summary):
        unknown = machine.startswith("unknown: ")
        notes.append(
            f"machine load {machine}"
            if unknown
            else f"busy machine: {machine} (not the server's speed alone)"
        )
    return notes + [f"cross-check: {text}" for text in checks_failed(summary)]


def flags(summary: Described) -> list[str]:
    """Short marks for a table's label cell: a status other than ok, not the same task,
    client-limited, over-saturated, a busy (or unknown) machine, a failed cross-check."""
    marks = [] if summary.status == ConfigStatus.OK else [summary.status]
    if not_same_task(summary):
        marks.append("not the same task")
    if client_limited(summary):
        marks.append("client-limited")
    if over_saturated(summary):
        marks.append("over-saturated")
    if mark := machine_mark(summary):
        marks.append(mark)
    if checks_failed(summary):
        marks.append("cross-check off")
    return marks
