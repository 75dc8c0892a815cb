"""The tasks a llama-server runs, as its ``/slots`` shows them poll by poll: each task's
slot and id, when a poll first showed it, first showed it decoding, last showed it and
showed it gone, its prompt and cached tokens and what it decoded.

The rules are the server's measured behaviour, not its fields' names (b11434,
``tests/engine/watch/test_slot_tasks_real.py``):

- A slot never used has no ``id_task``; an idle one keeps its last task's id, with
  ``is_processing`` false and ``n_decoded`` 0.
- While a prompt is processed ``n_decoded`` is 0, ``n_prompt_tokens`` counts the prompt up
  to the end of the chunk in the step under way, its cached part included (514, 1,026,
  1,500 for a 1,500-token prompt with 2 cached at ``-b 512``; 305 for 300 cached and 5
  new), ``n_prompt_tokens_cache`` its cached part, and ``n_prompt_tokens_processed`` the
  chunks done (0, 512, 1,024): a prompt's progress is known chunk by chunk, and a task
  never seen decoding has at least the prompt its last poll showed.
- A task decodes once ``n_decoded > 0``: its prompt is then ``n_prompt_tokens_processed``
  plus ``n_prompt_tokens_cache``, and ``n_prompt_tokens`` grows with each decoded token.
- Task ids do not count requests (one run read 6, then 116, then 125).
- An ended task leaves its id on its idle slot, and its prompt and answer less one token
  as ``n_prompt_tokens`` (1,519 for 1,500 and 20): what it decoded after the last poll is
  read there, and a task that started and ended between two polls is counted as missed,
  with those tokens.

Only counts and times are kept, never text.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class WatchedTask:
    """One task as the polls saw it, times in seconds on the watch's clock. ``gone_s``:
    the first poll that showed its slot idle or on another task, or the moment the server
    stopped answering where it was gone after (None: still running when the watch ended);
    ``running_at_start``: the first poll that showed it was the watch's first or the first
    after the server answered again (it began unseen); ``decoded_all``: ``decoded`` is all
    it decoded, read from its idle slot (else what the last poll showed: a slot that went
    straight to another task keeps no trace of its last tokens). A ``missed`` task ran
    between two polls: ``seen_s`` and ``gone_s`` are those polls, and ``sequence_tokens``
    its prompt and answer less one, as its slot kept them. ``prompt_tokens`` (its cached
    part included) is read at the first poll that showed it decoding; for a task never
    seen decoding it is at least that: its prompt as far as the chunk its last poll saw."""

    slot: int
    task: int
    seen_s: float
    last_s: float
    decoding_s: float | None = None
    gone_s: float | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    decoded: int = 0
    running_at_start: bool = False
    decoded_all: bool = False
    missed: bool = False
    sequence_tokens: int | None = None


KEPT = 1000
"""Ended tasks kept in memory (the most recent): a watch of hours counts every task but
keeps no more of them, so its memory stays flat."""


class SlotTasks:
    """Turns polls of ``/slots`` (each ``sampler.normalise_slots``'s list, at a time) into
    ``WatchedTask``s: the tasks running, the last ``KEPT`` ended and how many ended (and of
    those, ran between two polls) in all."""

    def __init__(self) -> None:
        self._open: dict[int, WatchedTask] = {}
        self._last_task: dict[int, int | None] = {}
        self._last_s: float | None = None
        self._gone_by: float | None = None
        self.recent: deque[WatchedTask] = deque(maxlen=KEPT)
        self.ended = 0
        self.missed = 0
        self.began_unseen = 0  # tasks already running when first seen (at the start, a gap)

    @property
    def tasks(self) -> list[WatchedTask]:
        """The tasks kept: the recent ended first, then those still running."""
        return [*self.recent, *self._open.values()]

    @property
    def running(self) -> int:
        return len(self._open)

    @property
    def began(self) -> int:
        """The tasks that took a slot while the watch looked (ended or still running, not
        those it found running): what the queue let through."""
        return self.ended + self.running - self.began_unseen

    @property
    def in_flight(self) -> list[WatchedTask]:
        """The tasks running at the last poll."""
        return list(self._open.values())

    def restore(self, task: WatchedTask, running: bool = False) -> None:
        """A task read back from a kept watch: one ended, or one running when it was saved."""
        self.began_unseen += task.running_at_start
        if running:
            self._open[task.slot] = task
        else:
            self._ended(task)

    def _ended(self, task: WatchedTask) -> WatchedTask:
        self.recent.append(task)
        self.ended += 1
        self.missed += task.missed
        return task

    def gap(self, t_s: float) -> None:
        """The server stopped answering at ``t_s``. The next poll that is answered is read as
        a first one: a restarted server's slots and task ids start again, so a task that
        poll shows is one that began unseen, and one it no longer shows ended by ``t_s``."""
        self._last_s = None
        self._gone_by = t_s

    def observe(self, t_s: float, slots: list[dict[str, Any]]) -> list[WatchedTask]:
        """One poll's slots at ``t_s``; returns the tasks this poll showed ended."""
        ended: list[WatchedTask] = []
        first = self._last_s is None
        gone_s = t_s if self._gone_by is None else self._gone_by
        for slot in slots:
            number, task = slot.get("id"), slot.get("id_task")
            if number is None:
                continue
            running = self._open.get(number)
            if slot.get("is_processing") and task is not None:
                if running is not None and running.task != task:
                    ended.append(self._close(number, gone_s))
                    running = None
                if running is None:
                    running = WatchedTask(number, task, t_s, t_s, running_at_start=first)
                    self.began_unseen += first
                self._open[number] = _seen(running, t_s, slot)
            else:
                if running is not None:
                    ended.append(self._close(number, gone_s, slot))
                known = self._last_task.get(number)
                if not first and task is not None and task != known:
                    ended.append(self._missed(number, task, t_s, slot))
            self._last_task[number] = task
        self._last_s, self._gone_by = t_s, None
        return ended

    def _close(self, slot: int, t_s: float, idle: dict[str, Any] | None = None) -> WatchedTask:
        """The task on ``slot`` ended at ``t_s``; where its slot is ``idle`` with its id,
        what it decoded is read from what the slot kept (prompt and answer less one)."""
        task = replace(self._open.pop(slot), gone_s=t_s)
        kept = idle.get("n_prompt_tokens") if idle and idle.get("id_task") == task.task else None
        if kept is not None and task.prompt_tokens is not None and task.decoding_s is not None:
            decoded = max(task.decoded, kept - task.prompt_tokens + 1)
            task = replace(task, decoded=decoded, decoded_all=True)
        return self._ended(task)

    def _missed(self, slot: int, task: int, t_s: float, entry: dict[str, Any]) -> WatchedTask:
        assert self._last_s is not None
        found = WatchedTask(
            slot,
            task,
            self._last_s,
            self._last_s,
            gone_s=t_s,
            missed=True,
            sequence_tokens=entry.get("n_prompt_tokens"),
        )
        return self._ended(found)


def _seen(task: WatchedTask, t_s: float, slot: dict[str, Any]) -> WatchedTask:
    """``task`` as one more poll showed it running: decoding from the first poll that
    showed a token decoded, its prompt read there; until then, its prompt as far as the
    chunk under way (at least what it is)."""
    decoded = slot.get("n_decoded") or 0
    task = replace(task, last_s=t_s, decoded=max(task.decoded, decoded))
    so_far = slot.get("n_prompt_tokens")
    if decoded == 0 and task.decoding_s is None and isinstance(so_far, int):
        prompt = max(so_far, task.prompt_tokens or 0)
        task = replace(task, prompt_tokens=prompt, cached_tokens=slot.get("n_prompt_tokens_cache"))
    if decoded > 0 and task.decoding_s is None:
        processed = slot.get("n_prompt_tokens_processed")
        cached = slot.get("n_prompt_tokens_cache")
        prompt = None if processed is None else processed + (cached or 0)
        task = replace(task, decoding_s=t_s, prompt_tokens=prompt, cached_tokens=cached)
    return task
