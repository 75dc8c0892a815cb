"""Which server slot served each request, read from llama-server's own log.

/slots sampled a few times a second misses requests shorter than a sample. The log does
not: when a slot finishes a task it prints the task's prompt and generation times, and the
same two numbers reach the client in the response's ``timings``. Token counts equal and
times equal to the log's 0.01 ms name the slot of every request, however short.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from workbench.engine.base.records import RequestKey, RequestRecord

# Recent builds (11434 here) write one line per figure:
#   "slot print_timing: id  1 | task 0 | prompt eval time =     179.45 ms /    31 tokens (..."
#   "slot print_timing: id  1 | task 0 |        eval time =      31.14 ms /     4 tokens (..."
# older ones one header, then the figures on lines of their own:
#   "slot print_timing: id  0 | task 0 | "
#   "prompt eval time =     179.45 ms /    31 tokens (..."
#   "       eval time =      31.14 ms /     4 tokens (..."
HEADER = re.compile(r"slot print_timing: id\s+(?P<slot>\d+) \| task (?P<task>-?\d+) \|")
FIGURE = re.compile(r"(?P<kind>prompt eval|eval) time =\s+(?P<ms>[\d.]+) ms /\s+(?P<n>\d+) tokens")
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


class SlotTimingParser:
    """Reads log text piece by piece; a task's figures may arrive in a later piece."""

    def __init__(self) -> None:
        self._task: tuple[int, int] | None = None  # the last print_timing header's
        self._prompt: dict[tuple[int, int], tuple[float, int]] = {}

    def feed(self, text: str) -> list[SlotTiming]:
        """The tasks whose prompt and eval figures are both known now, in log order."""
        out: list[SlotTiming] = []
        for line in text.splitlines():
            header = HEADER.search(line)
            if header:
                self._task = (int(header["slot"]), int(header["task"]))
            figure = FIGURE.search(line, header.end() if header else 0)
            if figure is None or self._task is None:
                continue
            if header is None and line[: figure.start()].strip():
                continue  # another print's figure (llama_perf_context_print: ...), not a slot's
            ms, n = float(figure["ms"]), int(figure["n"])
            if figure["kind"] == "prompt eval":
                self._prompt[self._task] = (ms, n)
            elif self._task in self._prompt:
                prompt_ms, prompt_n = self._prompt.pop(self._task)
                out.append(SlotTiming(*self._task, prompt_ms, prompt_n, ms, n))
        return out


def parse_slot_timings(text: str) -> list[SlotTiming]:
    """Every finished task in a whole log, in order."""
    return SlotTimingParser().feed(text)


@dataclass(frozen=True)
class SlotMatch:
    """A finished request and the slot the server's log says served it."""

    record: RequestRecord
    slot: int


class SlotLog:
    """Follows one server's log file and names the slot of finished requests.

    It never changes a record: a finished record has already been published (and written);
    the slot travels as an event of its own."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._unmatched: list[SlotTiming] = []
        self._named: dict[RequestKey, int] = {}
        self._parser = SlotTimingParser()

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
        self._unmatched += self._parser.feed(text)

    def assign(self, records: list[RequestRecord]) -> list[SlotMatch]:
        """The slots the log now explains, for finished records not named before. Each
        logged task explains one record at most, and a record that two logged tasks fit
        equally (same token counts, times within 0.01 ms) gets no slot."""
        waiting = [
            r for r in records if r.slot is None and r.ok and r.timings and r.key not in self._named
        ]
        if not waiting:
            return []
        self._read_new()
        matched = []
        for record in waiting:
            assert record.timings is not None
            fits = [t for t in self._unmatched if t.matches(record.timings)]
            if len(fits) == 1:
                self._named[record.key] = fits[0].slot
                self._unmatched.remove(fits[0])
                matched.append(SlotMatch(record, fits[0].slot))
        return matched

    def named(self, records: list[RequestRecord]) -> list[RequestRecord]:
        """``records`` with the slots named so far, as copies (for the summary's cross-check
        against the log); the published records stay as they were."""
        return [replace(r, slot=self._named[r.key]) if r.key in self._named else r for r in records]
