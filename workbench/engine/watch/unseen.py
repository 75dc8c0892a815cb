"""The tasks no poll saw, estimated from llama-server's token counters.

A task that starts and ends between two polls on a slot idle at the next leaves its id
there (``slot_tasks`` counts it as missed); two such tasks on one slot, or one between two
tasks a slot ran back to back, leave nothing in ``/slots``. They are in the counters: the
prompt counters (processed and cached) grow by a task's whole prompt when it is done, the
answer counters by its whole answer and decoding time when it ends
(``tests/engine/watch/test_unseen_real.py``). So, interval by interval, the counters'
growth less what the polls saw happen is the answers' ends a slot went on from unseen plus
the tasks nobody saw.

An unseen end is taken as half the interval, less the time the next task on its slot had
run, at the server's own decoding rate, and no longer than the mean answer seen whole (a
slot may have gone through several short tasks in the interval). What is left, over the
mean size of the tasks that ran between two polls (the short ones, like those never seen),
is the estimate. An interval an endpoint did not answer at either end, or a restart, is
left out on both sides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from workbench.engine.watch.slot_tasks import WatchedTask

TOKENS = ("prompt_tokens", "cached_tokens", "output_tokens")
"""A ``Load``'s counters that add up to the tokens of the prompts done and answers ended."""
COUNTERS = (*TOKENS, "prompt_seconds", "output_seconds")
"""And those of the seconds the prompts and answers took: the server's own rates."""
Counters = dict[str, float | None]
SAMPLE = 3  # tasks that ran between two polls, at least, to size the unseen ones by
BETWEEN_POLLS, SEEN_END = "between two polls", "seen end"  # what the unseen are sized by


@dataclass(frozen=True)
class Unseen:
    """The estimate: ``tasks`` ended with no poll seeing them, from ``tokens`` the counters
    counted that no task seen accounts for, at ``size`` tokens a task: the mean of the
    ``sample`` tasks that ran between two polls, or where too few did, of every task seen
    end (``sized_by`` says which)."""

    tasks: float
    tokens: float
    size: float
    sample: int
    sized_by: str


@dataclass
class TokenLedger:
    """The counters' growth and what the polls saw of it, summed over the intervals both
    endpoints answered at both ends of. Sums only: it does not grow with the watch."""

    intervals: int = 0
    counted: float = 0.0  # tokens the counters grew by
    seen: float = 0.0  # of those, what the tasks the polls saw account for
    ends: float = 0.0  # answers' ends a slot went on from unseen (estimated)
    tasks: int = 0  # the tasks seen end (missed ones included)
    missed_tokens: float = 0.0  # sizes of the tasks that ran between two polls
    missed: int = 0
    answers: float = 0.0  # the answers of the tasks seen from their first token to
    answered: int = 0  # their end
    rated: dict[str, float] = field(default_factory=dict)  # tokens and seconds the server
    # counted prompts and answers in: the rates a task's prompt and answer go at
    _last: Counters | None = None

    def poll(
        self,
        t_s: float,
        counters: Counters | None,
        ended: Iterable[WatchedTask],
        running: Iterable[WatchedTask],
    ) -> None:
        """One poll at ``t_s``: its ``COUNTERS`` (None where ``/slots`` or ``/metrics``
        gave none, or not all of ``TOKENS``), the tasks it showed ended and those it
        showed running."""
        last, self._last = self._last, counters
        if counters is None or last is None:
            return
        grown = {name: _grown(last, counters, name) for name in COUNTERS}
        tokens = [n for name in TOKENS if (n := grown[name]) is not None and n >= 0]
        if len(tokens) < len(TOKENS):
            return  # a restarted server's counters
        for phase in ("prompt", "output"):
            took, done = grown[f"{phase}_seconds"], grown[f"{phase}_tokens"]
            if took and done and took > 0:
                self.rated[phase] = self.rated.get(phase, 0.0) + done
                self.rated[f"{phase}_s"] = self.rated.get(f"{phase}_s", 0.0) + took
        running = list(running)
        seen = sum(t.prompt_tokens or 0 for t in running if t.decoding_s == t_s)
        after = {t.slot: t for t in running if t.seen_s == t_s}
        for task in ended:
            seen += self._ended(task, after.get(task.slot))
        self.intervals += 1
        self.counted += sum(tokens)
        self.seen += seen

    def _ended(self, task: WatchedTask, after: WatchedTask | None) -> float:
        """The tokens ``task`` is seen to account for; its unseen end added to ``ends``.
        ``after``: the task its slot went straight on to, whose time so far is time
        ``task`` was not decoding."""
        self.tasks += 1
        if task.missed:
            if task.sequence_tokens is None:
                return 0.0
            size = task.sequence_tokens + 1  # its slot keeps it less one token
            self.missed_tokens += size
            self.missed += 1
            return size
        if task.decoding_s is None:  # its prompt done unseen, and its whole answer
            self.ends += self.mean_answer()
            return task.prompt_tokens or 0
        if task.decoded_all:
            self.answers += task.decoded
            self.answered += 1
        elif task.gone_s is not None:
            rate = self.rate("output")
            gap = task.gone_s - task.last_s - (self._took(after, rate) if after else 0.0)
            end = rate * max(0.0, gap) / 2
            self.ends += min(end, self.mean_answer()) if self.answered else end
        return task.decoded

    def rate(self, phase: str) -> float:
        """Tokens a second a task's ``phase`` ("prompt" or "output") goes at, as the server
        counted them so far (0 where it counted no seconds)."""
        took = self.rated.get(f"{phase}_s")
        return self.rated[phase] / took if took else 0.0

    def _took(self, task: WatchedTask, output_rate: float) -> float:
        """The seconds ``task`` has been on its slot at the poll that first showed it: its
        prompt's processed part and its answer so far, at the server's rates."""
        prompt_rate = self.rate("prompt")
        processed = (task.prompt_tokens or 0) - (task.cached_tokens or 0)
        took = processed / prompt_rate if prompt_rate else 0.0
        return took + (task.decoded / output_rate if output_rate else 0.0)

    def mean_answer(self) -> float:
        """A task's answer, or what is left of it, where the polls did not see it: the mean
        of those seen whole (none yet: 0, so that the estimate errs towards more unseen
        tasks, not fewer)."""
        return self.answers / self.answered if self.answered else 0.0

    def estimate(self) -> Unseen | None:
        """The tasks no poll saw, or None where the counters were never read over an
        interval, or no task was seen end."""
        if not self.intervals or not self.tasks:
            return None
        unaccounted = max(0.0, self.counted - self.seen - self.ends)
        if self.missed >= SAMPLE and self.missed_tokens > 0:
            size = self.missed_tokens / self.missed
            return Unseen(unaccounted / size, unaccounted, size, self.missed, BETWEEN_POLLS)
        # the mean of the tasks seen end: longer than the unseen, so a low estimate
        size = (self.seen + self.ends) / self.tasks
        if size <= 0:
            return None
        return Unseen(unaccounted / size, unaccounted, size, self.tasks, SEEN_END)

    def kept(self) -> dict[str, Any]:
        """What a watch file keeps of it."""
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}

    @classmethod
    def restored(cls, kept: Any, number: Callable[..., Any]) -> TokenLedger:
        """A ledger read back, each value checked (``number``: finite and bounded) and
        none negative; none kept, an empty one. A ValueError says what is wrong."""
        if kept is None:
            return cls()
        if not isinstance(kept, dict):
            raise ValueError("its ledger is not a table")

        def counted(value: Any, whole: bool = False) -> Any:
            found = number(value, whole)
            if found < 0:
                raise ValueError(f"its ledger counts {found!r}")
            return found

        values: dict[str, Any] = {}
        for f in fields(cls):
            value = kept.get(f.name)
            if f.name.startswith("_") or value is None:
                continue
            if f.name == "rated":
                if not isinstance(value, dict):
                    raise ValueError("its ledger's rates are not a table")
                names = {f"{p}{s}" for p in ("prompt", "output") for s in ("", "_s")}
                values[f.name] = {n: counted(v) for n, v in value.items() if n in names}
            else:
                values[f.name] = counted(value, f.type == "int")
        return cls(**values)


def _grown(last: Counters, now: Counters, name: str) -> float | None:
    before, after = last.get(name), now.get(name)
    return None if before is None or after is None else after - before
