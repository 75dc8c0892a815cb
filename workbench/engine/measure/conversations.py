"""Conversations: ``users`` chats going on at once, each asking its ``turns`` in order.

A chat client sends the whole conversation with every question, and the server's prompt
cache can serve what a slot already holds of it: how much it reuses depends on whether the
conversation comes back to the slot that served its last turn. So each turn carries the
system prompt (if any), every earlier question with the server's real answer to it, and the
new question; it goes a think time after the previous answer ended (``think_time_s``, or
drawn around it). Each request is streamed by the same path as any other
(``client.stream_request``), so every timestamp means what it means in
``workload.run_requests``: a turn is due (``t_intended``) when its conversation's think time
is over, and ready at once (no client-side limit but the conversation itself).

A conversations file is replayed the same way (``plan_replay``): each conversation's
recorded user messages in order, the server's real answers between them, ``users`` of them
at once and the next one of the file starting when one ends. With ``id_slot =
"conversation"`` each turn asks for its user's own slot (llama-server's ``id_slot``,
which the server honours: measured on it, ``tests/engine/measure/test_conversation_file_real.py``).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from dataclasses import dataclass

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.records import RequestRecord
from workbench.engine.config.experiment import WorkloadSettings
from workbench.engine.events import BatchedEmit, RequestFinished
from workbench.engine.measure.client import (
    Message,
    PreparedRequest,
    prepare_request,
    stream_request,
)
from workbench.engine.measure.workload import Emit, name_unfinished, open_ahead
from workbench.engine.net.http_stream import StreamClient


@dataclass(frozen=True)
class RecordedConversation:
    """A conversation of a file, as a replay sends it: its system message (empty: none) and
    its user messages in order (the recorded answers are not sent: the server's own are)."""

    system: str
    questions: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    """One conversation's requests, turn 1 first, its number (from 1) and system prompt."""

    id: str
    number: int
    turns: list[RequestRecord]
    system_prompt: str = ""


def _numbered(number: int, turns: list[RequestRecord], system_prompt: str) -> Conversation:
    """Each record marked with its conversation (``r1u2``: the repeat's second, as its
    configuration's repeats number from 1) and turn (from 1)."""
    cid = f"r{turns[0].repeat + 1}u{number}"
    for turn, record in enumerate(turns, 1):
        record.conversation_id, record.turn = cid, turn
    return Conversation(cid, number, turns, system_prompt)


def plan_conversations(
    records: list[RequestRecord], users: int, system_prompt: str = ""
) -> list[Conversation]:
    """A repeat's planned records as ``users`` conversations: numbered turn by turn (turn 1
    of every conversation, then turn 2 of every one, ...), the order they are sent in, so
    each record's index numbers its prompt as an independent request's would."""
    return [_numbered(user + 1, records[user::users], system_prompt) for user in range(users)]


def plan_replay(
    records: list[RequestRecord], recorded: tuple[RecordedConversation, ...]
) -> list[Conversation]:
    """A repeat's planned records as a file's conversations, in file order: the records
    follow the file's user messages (conversation 1's turns, then conversation 2's, ...),
    as their prompts were built, and conversation *n* is the file's *n*-th."""
    if len(records) != sum(len(c.questions) for c in recorded):
        raise ValueError("a replay plans one record per user message of the file")
    taken = iter(records)
    return [
        _numbered(number, list(itertools.islice(taken, len(c.questions))), c.system)
        for number, c in enumerate(recorded, 1)
    ]


def pinned_slot(workload: WorkloadSettings, user: int, slots: int | None) -> int | None:
    """The slot a user's turns ask for: none (``id_slot = "auto"``), or user *n*'s slot
    (*n* - 1) mod the server's slots. By user, not by conversation: a file's conversation 5
    starts when one of the users is free, and pinned by its own number it could share a slot
    with conversation 1 still running there."""
    if workload.id_slot != "conversation":
        return None
    if not slots or slots < 1:
        raise WorkbenchError(
            "id_slot = 'conversation' pins each conversation to a slot, and the server did "
            "not say how many slots it has"
        )
    return (user - 1) % slots


def think_time_ns(workload: WorkloadSettings, record: RequestRecord) -> int:
    """The pause before the turn after ``record``: ``think_time_s``, or drawn around it
    (exponential, seeded by the record's index, as every seed of a run is)."""
    mean = workload.think_time_s
    if workload.think_time_spread == "exponential" and mean > 0:
        return round(random.Random(workload.seed + record.index).expovariate(1 / mean) * 1e9)
    return round(mean * 1e9)


def answer_text(record: RequestRecord) -> str:
    """What the assistant said, as the next turn sends it back: the answer, without the
    reasoning (chat clients do not send reasoning back)."""
    return "".join(c.text for c in record.chunks if not c.reasoning)


def turn_messages(system_prompt: str, earlier: list[RequestRecord], question: str) -> list[Message]:
    """A turn's messages: the system prompt, each earlier question and its real answer,
    then the new question."""
    messages: list[Message] = (
        [{"role": "system", "content": system_prompt}] if system_prompt else []
    )
    for record in earlier:
        messages.append({"role": "user", "content": record.prompt})
        messages.append({"role": "assistant", "content": answer_text(record)})
    messages.append({"role": "user", "content": question})
    return messages


async def run_conversations(
    client: StreamClient,
    workload: WorkloadSettings,
    conversations: list[Conversation],
    emit: Emit,
    slots: int | None = None,
) -> None:
    """``users`` conversations at once (the next one starting when one ends), each turn
    after the previous one's answer and the think time, pinned to its user's slot if the
    workload says so (``slots``: the server's). A turn that fails ends its
    conversation: the turns after it are recorded as not sent (their question would have
    carried an answer that never came)."""
    batched = BatchedEmit(emit)
    finished: set[int] = set()  # ids of the records whose RequestFinished went out

    def finish(record: RequestRecord) -> None:
        name_unfinished(record)
        finished.add(id(record))
        batched(RequestFinished(record))

    waiting = iter(conversations)
    starting = list(itertools.islice(waiting, workload.users))
    tasks: list[asyncio.Task[None]] = []
    flusher: asyncio.Task[None] | None = None

    def prepared_turn(conversation: Conversation, k: int, pin: int | None) -> PreparedRequest:
        record = conversation.turns[k]
        return prepare_request(
            client,
            workload,
            record.prompt,
            workload.seed + record.index,
            turn_messages(conversation.system_prompt, conversation.turns[:k], record.prompt),
            pin,
        )

    try:
        pins = [pinned_slot(workload, user, slots) for user in range(1, len(starting) + 1)]
        firsts = [(c, pin) for c, pin in zip(starting, pins, strict=True) if c.turns]
        encoded = [prepared_turn(c, 0, pin) for c, pin in firsts]
        opened = await open_ahead(client, encoded, list(range(len(firsts))))
        ahead = {id(c.turns[0]): p for (c, _), p in zip(firsts, opened, strict=True)}
        flusher = asyncio.create_task(batched.run())
        t0_ns = time.perf_counter_ns()

        async def converse(conversation: Conversation, due: int, pin: int | None) -> None:
            for k, record in enumerate(conversation.turns):
                record.t_intended_ns = due
                if (delay := (due - time.perf_counter_ns()) / 1e9) > 0:
                    await asyncio.sleep(delay)
                record.t_scheduled_ns = time.perf_counter_ns()
                record.t_ready_ns = due  # nothing holds a turn back once it is due
                seed = workload.seed + record.index
                prepared = ahead.get(id(record)) or prepared_turn(conversation, k, pin)
                try:
                    await stream_request(client, record, workload, seed, batched, prepared)
                finally:
                    finish(record)
                if not record.ok:
                    for unsent in conversation.turns[k + 1 :]:
                        unsent.error = f"not sent: turn {record.turn} of its conversation failed"
                        finish(unsent)
                    return
                assert record.t_done_ns is not None
                due = record.t_done_ns + think_time_ns(workload, record)

        async def user(conversation: Conversation, pin: int | None) -> None:
            """One user's conversations, on its pinned slot if any: the next waiting one is
            due when one ends."""
            due = t0_ns
            while True:
                await converse(conversation, due, pin)
                following = next(waiting, None)
                if following is None:
                    return
                conversation, due = following, time.perf_counter_ns()

        tasks = [asyncio.create_task(user(c, pin)) for c, pin in zip(starting, pins, strict=True)]
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for conversation in conversations:  # cancelled before they were sent: still recorded
            for record in conversation.turns:
                if id(record) not in finished:
                    finish(record)
        batched.flush()
        if flusher is not None:
            flusher.cancel()
            await asyncio.gather(flusher, return_exceptions=True)
