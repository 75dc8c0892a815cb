"""What a run says as it goes, worded in one place.

Each is a ``Notice`` the terminal, the window and the session show alike (or, for what a
run says when it starts, the text of one), so a wording is changed here and nowhere else.
"""

from __future__ import annotations

from workbench.engine.base.states import NoticeLevel
from workbench.engine.base.words import plural
from workbench.engine.config.experiment import RunConfig
from workbench.engine.events import Notice
from workbench.engine.figures.predicted import RunPrediction
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.measure.prompts import PromptSource

CHUNKY = 1.05  # tokens per chunk above which ITL is said to be a gap between chunks


def resumed(n_done: int, to_run: list[RunConfig]) -> str:
    return (
        f"resumed: {plural(n_done, 'finished configuration')} kept, "
        f"{len(to_run)} to run ({', '.join(c.label for c in to_run)})"
    )


def resumed_elsewhere(hostname: str, began_on: str) -> str:
    return (
        f"resumed on {hostname}, the session began on {began_on}: "
        "its configurations were measured on two machines"
    )


def prompts_origin(prompts: PromptSource) -> Notice | None:
    """Where the prompts come from, unless built in: a path in someone else's experiment
    file could point at any file, and its lines would be sent to the server."""
    if prompts.origin == "builtin":
        return None
    return Notice(
        NoticeLevel.INFO,
        f"prompts: {prompts.size} from {prompts.origin} (not the built-in set)",
    )


def predicted(prediction: RunPrediction, lacking_calibration: bool) -> Notice:
    """What the run is predicted to measure, before its first configuration; where
    nothing is, why, and how to calibrate where that is why."""
    line = prediction.headline()
    if prediction.configs:
        return Notice(NoticeLevel.INFO, f"predicted: {line}")
    if lacking_calibration:
        line += " (`workbench calibrate` with these settings makes one)"
    return Notice(NoticeLevel.INFO, line)


def not_predicted(exc: Exception) -> Notice:
    """A prediction that failed: the run goes on without one."""
    return Notice(NoticeLevel.INFO, f"no prediction: {type(exc).__name__}: {exc}")


def prompts_reused(size: int, needed: int, config_index: int) -> Notice:
    return Notice(
        NoticeLevel.WARNING,
        f"the prompt file has {size} prompts for {needed} "
        "requests: prompts are reused, so the prefix cache may flatter "
        "TTFT (watch the cache hits column)",
        config_index,
    )


def about_config(config: RunConfig, text: str, level: NoticeLevel = NoticeLevel.WARNING) -> Notice:
    """A notice about one configuration, named by its label."""
    return Notice(level, f"[{config.label}] {text}", config.index)


def slot_lanes_lost(exc: Exception) -> Notice:
    return Notice(NoticeLevel.WARNING, f"slot lanes: cannot follow the server log ({exc})")


def run_failed(error: str) -> Notice:
    return Notice(NoticeLevel.ERROR, error)


def stopped_when_saturated(config: RunConfig, repeat: int, unsent: int) -> Notice:
    """A repeat that stopped sending once its queue grew without bound, as asked."""
    return about_config(
        config,
        f"repeat {repeat + 1} stopped when over-saturated (stop_when_saturated): "
        f"{plural(unsent, 'request')} not sent, left out of its figures",
    )


def about_summary(config: RunConfig, summary: ConfigSummary) -> list[Notice]:
    """What a configuration's figures call for: the client shaped them, other processes on
    the machine did, its queue grew without bound, a cross-check failed, or chunks carried
    several tokens each (so ITL is between chunks)."""
    said = []
    if summary.client_limited:
        said.append(
            about_config(
                config,
                f"client-limited ({summary.client_limited}): the "
                "client, not the server, shaped these numbers",
            )
        )
    if summary.over_saturated:
        said.append(
            about_config(
                config,
                f"over-saturated ({summary.over_saturated}): its latencies grow with the "
                "run's length, so they compare only with a run as long",
            )
        )
    if (machine := summary.machine_busy) and not machine.startswith("unknown: "):
        said.append(
            about_config(
                config,
                f"busy machine ({machine}): other processes, not only the server, shaped "
                "these numbers; measure again on a quiet machine",
            )
        )
    said += [about_config(config, f"cross-check: {text}") for text in summary.checks_failed]
    per_chunk = [r.tokens_per_chunk for r in summary.runs if r.tokens_per_chunk]
    if per_chunk and max(per_chunk) > CHUNKY:
        said.append(
            about_config(
                config,
                f"chunks carried {max(per_chunk):.1f} tokens on "
                "average: TPOT and decode speed use the server's token counts, and "
                "ITL is the gap between chunks, not between tokens",
                NoticeLevel.INFO,
            )
        )
    return said
