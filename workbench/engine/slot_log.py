"""Which server slot served each request, read from llama-server's own log.

/slots sampled a few times a second misses requests shorter than a sample. The log does
not: when a slot finishes a task it prints the task's prompt and generation times, and the
same two numbers reach the client in the response's ``timings``. Token counts equal and
times equal to the log's 0.01 ms name the slot of every request, however short.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.engine.records import RequestRecord

# "slot print_timing: id  1 | task 0 | prompt eval time =     179.45 ms /    31 tokens (..."
# "slot print_timing: id  1 | task 0 |        eval time =      31.14 ms /     4 tokens (..."
TIMING_LINE = re.compile(
    r"slot print_timing: id\s+(?P<slot>\d+) \| task (?P<task>-?\d+) \|\s+"
    r"(?P<kind>prompt eval|eval) time =\s+(?P<ms>[\d.]+) ms /\s+(?P<n>\d+) tokens"
)
MS_TOLERANCE = 0.006  # the log prints two decimals


@dataclass(frozen=True)
class SlotTiming:
    """One finished task as the server logged it."""

    slot: int
    task: int
    prompt_ms: float
    prompt_n: int
    eval_ms: float
    eval_n: int

    def matches(self, timings: dict[str, Any]) -> bool:
        try:
            return (
                int(timings["prompt_n"]) == self.prompt_n
                and int(timings["predicted_n"]) == self.eval_n
                and abs(float(timings["prompt_ms"]) - self.prompt_ms) <= MS_TOLERANCE
                and abs(float(timings["predicted_ms"]) - self.eval_ms) <= MS_TOLERANCE
            )
        except (KeyError, TypeError, ValueError):
            return False


def parse_slot_timings(
    text: str, prompt: dict[tuple[int, int], tuple[float, int]] | None = None
) -> list[SlotTiming]:
    """Every finished task in a piece of log, in order (a prompt line then its eval line).
    ``prompt`` carries prompt lines whose eval line is not in ``text`` yet to the next call."""
    out: list[SlotTiming] = []
    prompt = {} if prompt is None else prompt
    for match in TIMING_LINE.finditer(text):
        key = (int(match["slot"]), int(match["task"]))
        ms, n = float(match["ms"]), int(match["n"])
        if match["kind"] == "prompt eval":
            prompt[key] = (ms, n)
        elif key in prompt:
            prompt_ms, prompt_n = prompt.pop(key)
            out.append(SlotTiming(key[0], key[1], prompt_ms, prompt_n, ms, n))
    return out


class SlotLog:
    """Follows one server's log file and names the slot of finished requests."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._unmatched: list[SlotTiming] = []
        self._prompt_lines: dict[tuple[int, int], tuple[float, int]] = {}

    def _read_new(self) -> None:
        try:
            with self.path.open("rb") as log:
                log.seek(self._offset)
                data = log.read()
        except OSError:
            return
        complete = data.rfind(b"\n") + 1  # a line still being written waits for next time
        self._offset += complete
        text = data[:complete].decode("utf-8", errors="replace")
        self._unmatched += parse_slot_timings(text, self._prompt_lines)

    def assign(self, records: list[RequestRecord]) -> list[RequestRecord]:
        """Set ``slot`` on finished records the log now explains; returns those records.
        Each logged task explains one record at most."""
        waiting = [r for r in records if r.slot is None and r.ok and r.timings]
        if not waiting:
            return []
        self._read_new()
        matched = []
        for record in waiting:
            assert record.timings is not None
            for i, timing in enumerate(self._unmatched):
                if timing.matches(record.timings):
                    record.slot = timing.slot
                    del self._unmatched[i]
                    matched.append(record)
                    break
        return matched
