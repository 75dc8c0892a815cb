"""The mock's ``/slots``: which request each slot serves, in llama-server's fields and by its
measured behaviour (b11434; ``workbench/engine/watch/slot_tasks.py`` lists the rules): a
slot never used has no task id, a busy one counts its prompt as processed once its first
token is out and ``n_prompt_tokens`` grows with each token, and an idle one keeps its last
task's id and its prompt and answer less one token. Task ids grow by more than one a
request, as the server's do. A request waiting for a slot (``--queue``) is in no slot, as a
deferred task is in none; without ``--queue`` a request beyond the slots streams without
one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class _Slot:
    task: int | None = None
    busy: bool = False
    prompt: int = 0
    decoded: int = 0


class SlotTable:
    def __init__(self, slots: int, n_ctx: int) -> None:
        self._slots = [_Slot() for _ in range(min(slots, 1024))]
        self.n_ctx = n_ctx
        self._next_task = 0

    def take(self, prompt: int) -> int | None:
        """A free slot for a request of ``prompt`` tokens (the lowest), or None."""
        for number, slot in enumerate(self._slots):
            if not slot.busy:
                self._next_task += 3  # the server's ids count its other tasks too
                slot.task, slot.busy, slot.prompt, slot.decoded = self._next_task, True, prompt, 0
                return number
        return None

    def decoded(self, number: int | None, tokens: int) -> None:
        if number is not None:
            self._slots[number].decoded = tokens

    def release(self, number: int | None) -> None:
        if number is not None:
            self._slots[number].busy = False

    def page(self) -> list[dict[str, Any]]:
        """``/slots`` now."""
        return [
            {
                "id": number,
                "id_task": slot.task,
                "is_processing": slot.busy,
                "n_ctx": self.n_ctx,
                "n_prompt_tokens": slot.prompt + max(0, slot.decoded - (0 if slot.busy else 1)),
                "n_prompt_tokens_processed": slot.prompt if slot.busy and slot.decoded else 0,
                "n_prompt_tokens_cache": 0,
                "next_token": [{"n_decoded": slot.decoded if slot.busy else 0}],
            }
            for number, slot in enumerate(self._slots)
        ]
