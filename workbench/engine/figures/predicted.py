"""What a prediction says about a run before it starts, in the terms a measured run has: each
configuration's predicted summary (every figure of the catalogue, under its own name), the
requests as the scheduler model placed them (for a ghost of the Gantt), and the calibration
it came from. A prediction is never a measurement: whoever shows one says it is predicted.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.engine.figures.summaries import ConfigSummary


@dataclass(frozen=True)
class PredictedRequest:
    """One request as the model placed it, its times in seconds after its repeat's start
    (its first request's due time): ``repeat`` -1 is a warm-up; ``first_token_s`` is None
    for a request the server would refuse."""

    index: int
    repeat: int
    slot: int | None
    sent_s: float
    first_token_s: float | None
    end_s: float


@dataclass(frozen=True)
class ConfigPrediction:
    """One configuration predicted: ``summary`` has every figure a measured configuration's
    has (``summary.value(key)``); ``requests_s`` is how long its requests take, warm-ups
    and repeats together, its server's start not counted; ``calibration`` names the
    calibration in one line (its source, machine and when it was made)."""

    config_index: int
    label: str
    summary: ConfigSummary
    requests: tuple[PredictedRequest, ...]
    requests_s: float
    calibration: str


@dataclass(frozen=True)
class RunPrediction:
    """A run's prediction: the configurations predicted, and each one left out with why
    (``"np=8: no calibration for batch_size=512"``)."""

    configs: tuple[ConfigPrediction, ...]
    left_out: tuple[str, ...] = ()

    def headline(self, shown: int = 3) -> str:
        """The prediction in one line, as the window says it when Run is pressed: the time
        its requests take and each configuration's TTFT p50 (the first and last ones past
        ``shown``): ``about 2 min; np=1 TTFT p50 about 5.1 s, np=4 about 1.6 s``."""
        if not self.configs:
            return "no prediction: " + ("; ".join(self.left_out) or "nothing to predict")
        picked = list(self.configs)
        if len(picked) > shown:
            picked = [picked[0], picked[-1]]
        parts = []
        for k, config in enumerate(picked):
            ttft = config.summary.value("ttft_p50_s")
            said = "n/a" if ttft is None else f"about {_seconds(ttft)}"
            parts.append(f"{config.label} TTFT p50 {said}" if k == 0 else f"{config.label} {said}")
        total = sum(c.requests_s for c in self.configs)
        line = f"about {_duration(total)}; " + ", ".join(parts)
        if self.left_out:
            line += f" ({len(self.left_out)} not predicted)"
        return line


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
