"""The traffic of a recorded trace or of conversations, as the scheduler model's requests: the
times a run would send them, their prompts' lengths in tokens and what of each prompt a
slot's cache can hold from another's.

A trace row is sent at its (scaled) time, or a session's later turn its delay after the turn
before it ended; its prompt is its (scaled) ``input_length``, raised to the chat template and
a token as the run raises it, and opens with its hash ids' blocks, which rows sharing ids
share. A conversation's turn carries the whole conversation so far: the template's opening
and the system prompt (the same for every conversation), then each earlier question and the
server's answer, then the new question; it goes when the answer before it ended (and the
think time), so the slot that served the turn before holds all but its new message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from workbench.engine.base.errors import ExperimentError
from workbench.engine.base.records import RequestRecord
from workbench.engine.config.experiment import RunConfig, WorkloadSettings, workload_file
from workbench.engine.config.workloads import ConversationsWorkload, TraceWorkload
from workbench.engine.interop.conversation_file import read_conversations
from workbench.engine.interop.trace_file import TracePlan, trace_plans
from workbench.engine.measure.conversations import RecordedConversation, think_time_ns
from workbench.engine.predict.calibration import ChatTokens
from workbench.engine.predict.scheduler_model import Part, Request

OPENING = "chat template opening"


@dataclass(frozen=True)
class Traffic:
    """One repeat's requests as the model takes them, what the client sends them under
    (``concurrency`` requests in flight, ``users`` conversations at once; 0: no limit),
    and each request's conversation and turn as a run marks them (None: not a turn)."""

    requests: list[Request]
    concurrency: int
    users: int = 0
    turns: tuple[tuple[str, int] | None, ...] = ()

    def mark(self, records: Sequence[RequestRecord]) -> None:
        """Give the predicted records their conversation and turn, as a run's have."""
        for record, turn in zip(records, self.turns, strict=False):
            if turn is not None:
                record.conversation_id, record.turn = turn


def trace_traffic(plan: TracePlan, workload: WorkloadSettings, template_tokens: int) -> Traffic:
    """One repeat of a trace (``plan``), ``template_tokens`` the chat template's tokens
    around each prompt: rows that share leading hash ids share those blocks' tokens (a
    repeat's blocks its own, as the run builds them, so each repeat is predicted alone)."""
    least = template_tokens + 1
    requests = []
    for k, row in enumerate(plan.rows):
        length = max(least, plan.input_tokens[k])
        follows = plan.follows[k]
        requests.append(
            Request(
                due_s=plan.offsets[k],
                prompt_tokens=length,
                max_tokens=plan.output_tokens[k],
                cache_prompt=workload.cache_prompt,
                parts=_blocks(row.hash_ids, plan.block_tokens, length - template_tokens),
                after=None if follows is None else follows[0],
                pause_s=0.0 if follows is None else follows[1],
            )
        )
    return Traffic(requests, workload.effective_concurrency)


def _blocks(hash_ids: Sequence[int], block_tokens: int, text_tokens: int) -> tuple[Part, ...]:
    """A prompt's blocks as far as its text reaches, the last cut to fit."""
    parts, left = [], text_tokens
    for hash_id in hash_ids:
        if left <= 0:
            break
        parts.append((f"hash id {hash_id}", min(block_tokens, left)))
        left -= block_tokens
    return tuple(parts)


@dataclass(frozen=True)
class Dialogue:
    """A conversation as the model sizes it: its system prompt (its text, or a name for
    it: conversations with the same one share it) and that prompt's tokens (0: none), and
    each new user message's tokens in turn."""

    system: str
    system_tokens: int
    messages: list[int]


def conversation_traffic(
    workload: WorkloadSettings,
    dialogues: Sequence[Dialogue],
    chat: ChatTokens,
    first_index: int,
    repeat: int,
) -> Traffic:
    """One repeat of conversations; ``first_index`` numbers the repeat's first request as
    the run does, for the think times drawn from it. Turn *k* + 1's prompt is turn *k*'s,
    its answer (``max_tokens``: an ``ignore_eos`` run's), the template's tokens around an
    earlier exchange and the new message. Conversation *n* is ``r{repeat + 1}u{n}``, as the
    run names it."""
    placed = {turn: k for k, turn in enumerate(_sending_order(workload, dialogues))}
    requests: list[Request | None] = [None] * len(placed)
    turns: list[tuple[str, int] | None] = [None] * len(placed)
    for number, dialogue in enumerate(dialogues, 1):
        cid = f"r{repeat + 1}u{number}"
        shared = chat.shared(dialogue.system_tokens)
        opening = (f"{OPENING}: {dialogue.system}", shared)
        prompt = chat.first_prompt(dialogue.system_tokens)
        for turn, message in enumerate(dialogue.messages, 1):
            prompt += message if turn == 1 else workload.max_tokens + chat.exchange + message
            position, before = placed[number, turn], placed.get((number, turn - 1))
            requests[position] = Request(
                due_s=0.0,
                prompt_tokens=prompt,
                max_tokens=workload.max_tokens,
                cache_prompt=workload.cache_prompt,
                parts=(opening, (cid, prompt - shared)),
                after=before,
                pause_s=_pause(workload, first_index, before),
                pinned=workload.id_slot == "conversation",
            )
            turns[position] = (cid, turn)
    return Traffic([r for r in requests if r is not None], 0, workload.users, tuple(turns))


def _sending_order(
    workload: WorkloadSettings, dialogues: Sequence[Dialogue]
) -> list[tuple[int, int]]:
    """Each (conversation, turn) in the order a run numbers their records: made-up
    conversations turn by turn (``plan_conversations``), a file's conversation by
    conversation (``plan_replay``)."""
    numbered = [(n, len(d.messages)) for n, d in enumerate(dialogues, 1)]
    if workload.conversations_file:
        return [(n, t) for n, turns in numbered for t in range(1, turns + 1)]
    most = max((turns for _, turns in numbered), default=0)
    return [(n, t) for t in range(1, most + 1) for n, turns in numbered if t <= turns]


def _pause(workload: WorkloadSettings, first_index: int, before: int | None) -> float:
    """The think time after the turn at ``before``, drawn as the run draws it."""
    if before is None:
        return 0.0
    return think_time_ns(workload, RequestRecord(0, 0, first_index + before, "")) / 1e9


def made_up_dialogues(workload: WorkloadSettings) -> list[Dialogue]:
    """A conversations workload's own: ``users`` of ``turns`` messages of ``user_tokens``,
    each with the same system prompt of ``system_prompt_tokens``."""
    system = workload.system_prompt_tokens
    return [
        Dialogue(
            "the workload's" if system else "", system, [workload.user_tokens] * workload.turns
        )
        for _ in range(workload.users)
    ]


def file_dialogues(
    recorded: Sequence[RecordedConversation], count: Callable[[str], int]
) -> list[Dialogue]:
    """A conversations file's, its messages counted with ``count`` (the model's vocabulary:
    an estimate of the server's count)."""
    return [
        Dialogue(c.system, count(c.system) if c.system else 0, [count(q) for q in c.questions])
        for c in recorded
    ]


@dataclass(frozen=True)
class ConfigTraffic:
    """A trace or conversations configuration as the model predicts it: the configuration
    with ``requests`` what one repeat sends (as the run's setup counts it), its warm-ups'
    prompt lengths where they are not its prompts as written (None: they are), and each
    repeat's traffic."""

    config: RunConfig
    warmup_lengths: list[int] | None
    repeats: list[Traffic]


def config_traffic(
    config: RunConfig,
    first_index: int,
    template_tokens: int,
    chat: ChatTokens | None,
    count: Callable[[str], int] | None,
    base_dir: Path | None,
) -> ConfigTraffic | None:
    """``config``'s traffic when it replays a trace or holds conversations (None: it sends
    independent requests), its requests numbered from ``first_index`` as a run numbers
    them; ``count`` counts a conversations file's messages."""
    workload = config.workload
    if isinstance(workload, TraceWorkload):
        plan = trace_plans([config], base_dir)[config.index]
        workload = replace(workload, requests=len(plan.rows))
        template = template_tokens if workload.endpoint == "chat" else 0
        traffic = trace_traffic(plan, workload, template)
        config = replace(config, workload=workload)
        return ConfigTraffic(config, None, [traffic] * workload.repeats)
    if not isinstance(workload, ConversationsWorkload):
        return None
    if chat is None:
        raise ExperimentError(
            f"[{config.label}] the scheduler model does not predict conversations without the "
            "chat template's tokens per message, which this calibration did not measure (made "
            "from a session or by an older workbench): calibrate again with the probe"
        )
    if workload.conversations_file:
        assert count is not None, "a file's messages are counted with a vocabulary"
        path = workload_file("conversations_file", workload.conversations_file, base_dir)
        dialogues = file_dialogues(read_conversations(path), count)
        config = replace(
            config,
            workload=replace(workload, requests=sum(len(d.messages) for d in dialogues)),
        )
        questions = [m for d in dialogues for m in d.messages]
        warm = [questions[k % len(questions)] for k in range(workload.warmup)]
    else:
        dialogues = made_up_dialogues(workload)
        warm = [workload.user_tokens] * workload.warmup
    per_repeat = config.workload.per_repeat
    repeats = [
        conversation_traffic(
            workload, dialogues, chat, first_index + workload.warmup + r * per_repeat, r
        )
        for r in range(workload.repeats)
    ]
    return ConfigTraffic(config, [chat.prompt + m for m in warm], repeats)
