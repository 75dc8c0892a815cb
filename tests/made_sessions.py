"""Session files written without a server: chosen requests go through the real session writer,
so tests of what the views show get exact numbers (and repeats) in seconds."""

from __future__ import annotations

from pathlib import Path

from workbench.engine.base.records import RequestRecord, TokenChunk
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import (
    ConfigFinished,
    ConfigStarted,
    EventBus,
    ExperimentFinished,
    RequestFinished,
)
from workbench.engine.store.session import SessionWriter, create_session

NS = 1_000_000_000

# Two repeats of three requests whose TTFTs make the two ways of combining repeats differ:
# the per-repeat medians are 0.2 s and 2.0 s (mean 1.1 s), the pooled median is 0.65 s.
TWO_REPEATS = {0: (0.1, 0.2, 0.3), 1: (1.0, 2.0, 3.0)}


def record(repeat: int, index: int, ttft_s: float, tokens: int = 11) -> RequestRecord:
    """A successful request submitted at 0 s: first token after ``ttft_s``, then one token
    every 0.1 s."""
    last = ttft_s + 0.1 * (tokens - 1)
    return RequestRecord(
        0,
        repeat,
        index,
        "p",
        t_submit_ns=0,
        t_first_token_ns=int(ttft_s * NS),
        t_last_token_ns=int(last * NS),
        t_done_ns=int(last * NS),
        ok=True,
        usage={"completion_tokens": tokens},
        timings={"prompt_ms": 50.0, "cache_n": 0},
        chunks=[TokenChunk(int((ttft_s + 0.1 * i) * NS), "x") for i in range(tokens)],
    )


def write_session(path: Path, ttfts: dict[int, tuple[float, ...]] = TWO_REPEATS) -> Path:
    """One configuration (one slot), one repeat per key of ``ttfts``."""
    count = len(next(iter(ttfts.values())))
    toml = f"[server]\nslots = 1\n[workload]\nrequests = {count}\nrepeats = {len(ttfts)}\n"
    config = parse_experiment(toml).configs()[0]
    create_session(path, "made", toml, None, "managed", None, {}, 0)
    bus = EventBus()
    writer = SessionWriter(path, bus)
    writer.start()
    bus.publish(ConfigStarted(config, count * len(ttfts)))
    for repeat, values in ttfts.items():
        for index, ttft in enumerate(values):
            bus.publish(RequestFinished(record(repeat, repeat * count + index, ttft)))
    bus.publish(ConfigFinished(0, "ok"))
    bus.publish(ExperimentFinished("complete"))
    writer.join(10)
    assert writer.error is None
    return path
