"""A tune in words, once: its progress as it goes and its answer when it is done. The CLI
(``workbench tune``) and the window's Tune tab print these same lines, so the two front ends
cannot say one answer two ways; each only adds what is its own (the CLI its colours, the
command line and the files it wrote; the tab its table, command box and buttons)."""

from __future__ import annotations

from typing import Any

from workbench.engine.base.words import plural
from workbench.engine.tune.records import Recommendation, TuneProgress
from workbench.engine.tune.slo_targets import value_ms

PHASES = {  # TuneProgress.phase, as the progress line says it
    "plan": "Planning",
    "calibrate": "Calibrating",
    "rank": "Predicting",
    "verify": "Verifying on the real server",
    "rate": "Finding the load it holds",
    "done": "Done",
}


def clock(seconds: float) -> str:
    """``45 s``, ``3 min 20 s``: an elapsed time, a budget or an ETA, the one way a tune
    says a time."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


def time_spent(progress: TuneProgress) -> str:
    """``1 min 30 s of a 10 min budget, about 30 s left``: where the tune is in its budget."""
    left = "" if progress.eta_s is None else f", about {clock(progress.eta_s)} left"
    return f"{clock(progress.elapsed_s)} of a {clock(progress.budget_s)} budget{left}"


def progress_words(progress: TuneProgress) -> str:
    """The progress in one line: the phase, what it does, the time spent and left."""
    phase = PHASES.get(progress.phase, progress.phase)
    return f"{phase}: {progress.text}. {time_spent(progress)}."


def settings_words(settings: dict[str, Any]) -> str:
    """A candidate's settings as ``slots=4, cache_type_k=f16``."""
    return ", ".join(f"{name}={value}" for name, value in settings.items())


def verdict_words(recommendation: Recommendation) -> list[str]:
    """The answer in a few lines: what is recommended and whether it was measured, its
    figures against the SLOs, the rate it holds, a trace window's load (its requests at once
    said measured or estimated, and from what), and how the search went. A predicted figure
    is said to be predicted. The first line is the headline: ``Recommended: ...``,
    ``Best found: ...`` (predicted only) or ``No recommendation: ...``."""
    r = recommendation
    winner = r.winner
    lines = []
    if winner is None:
        lines.append(f"No recommendation: {r.reason or 'nothing met every SLO'}.")
    elif r.verified:
        lines.append(f"Recommended: {winner.label} ({settings_words(winner.settings)}).")
        measured = ", ".join(
            f"{s.metric.upper()} p{s.percentile} {value:.0f} ms (<= {s.limit_ms:g})"
            for s in r.slos
            if (value := value_ms(s, r.measured)) is not None
        )
        if r.load is not None:
            load = " on the trace window"
        else:
            load = "" if r.users is None else f" at {plural(r.users, 'user')} at once"
        lines.append(f"Verified on the real server{load}: {measured}.")
        lines.append(r.rate_said())
    else:
        lines.append(f"Best found: {winner.label} ({settings_words(winner.settings)}).")
        lines.append("Not verified: its figures are predicted, not measured.")
        if r.reason:
            lines.append(r.reason)
    if r.load is not None:
        lines += [r.load.window_said(), r.load.peak_said()]
    ran = sum(1 for t in r.tried if t.source == "measured")
    lines.append(
        f"Tried {plural(len(r.tried), 'configuration')} ({ran} measured) in {clock(r.elapsed_s)}."
    )
    if r.session_path is not None:
        lines.append(f"Verifying runs: {r.session_path}")
    return lines
