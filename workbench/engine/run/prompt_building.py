"""A configuration's prompts, built before its clock starts: the prompts as written, or sized
by the served model's own tokenizer (``input_tokens``, a spread of lengths, a shared prefix),
or, for an external server that cannot count, sized by an estimate.

The runner emits what this returns; the rules live here, so that the runner only sequences
a configuration.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.states import NoticeLevel
from workbench.engine.config.experiment import RunConfig
from workbench.engine.config.workloads import ConversationsWorkload, RequestsWorkload
from workbench.engine.interop.trace_file import TracePlan
from workbench.engine.measure.conversations import RecordedConversation
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.measure.sized_prompts import (
    HashedBlocks,
    ServerTokenizer,
    SizedPrompt,
    SizedPrompts,
    TokenizerUnavailable,
    approximate_prompts,
    input_lengths,
    shared_prefix,
    size_prompts,
    sized_prompt,
    template_overhead,
)
from workbench.engine.models.gguf_tokenizer import estimator_for
from workbench.engine.models.model_file import resolve_model


@dataclass(frozen=True)
class BuiltPrompts:
    source: PromptSource | SizedPrompts
    notice: tuple[NoticeLevel, str] | None = None  # (level, text) for the run to say
    system_prompt: str = ""  # a conversations run's, the same for all its conversations


async def build_prompts(
    config: RunConfig,
    prompts: PromptSource,
    first_index: int,
    base_url: str,
    headers: dict[str, str],
    external: bool,
    base_dir: Path | None,
    recorded: tuple[RecordedConversation, ...] = (),
    trace: TracePlan | None = None,
) -> BuiltPrompts:
    """The prompts of ``config``'s requests (indices from ``first_index``): each
    ``input_tokens`` long (or drawn around it), all opening with the same
    ``shared_prefix_tokens``; the prompts as written when both are 0; a conversations
    file's user messages (``recorded``, read at setup) for a replay; a trace's rows'."""
    workload = config.workload
    if isinstance(workload, ConversationsWorkload) and workload.conversations_file:
        return _replayed_prompts(config, prompts, first_index, recorded)
    if isinstance(workload, ConversationsWorkload):
        return await _conversation_prompts(config, prompts, first_index, base_url, headers)
    if trace is not None:
        return await _trace_prompts(config, prompts, first_index, base_url, headers, trace)
    assert isinstance(workload, RequestsWorkload), "a trace's prompts come from its rows"
    target, shared = workload.input_tokens, workload.shared_prefix_tokens
    if not target and not shared:
        return BuiltPrompts(prompts)
    if target and shared >= target:
        raise WorkbenchError(
            f"shared_prefix_tokens = {shared} leaves no room for a question in "
            f"input_tokens = {target}"
        )
    count = workload.warmup + workload.per_repeat * workload.repeats
    tokenizer = ServerTokenizer(base_url, workload.endpoint, headers)
    targets = {first_index + k: n for k, n in enumerate(input_lengths(workload, count))}
    started = time.monotonic()
    try:
        overhead = await template_overhead(tokenizer)
        prefix = await shared_prefix(tokenizer, shared, workload.seed) if shared else ""
        sized = await size_prompts(tokenizer, prompts, targets, workload.seed, prefix)
    except TokenizerUnavailable as exc:
        if external and not shared:
            estimate, how = model_estimate(config, base_dir)
            return BuiltPrompts(
                approximate_prompts(prompts, targets, workload.seed, estimate),
                (
                    NoticeLevel.WARNING,
                    f"[{config.label}] the server has no tokenizer to count with ({exc}): "
                    f"prompts of about {target} tokens, {how}, the chat template not counted; "
                    "their true length is the server's own count (prompt tokens in the "
                    "results)",
                ),
            )
        asked = " and ".join(
            f"{name} = {value}"
            for name, value in (("input_tokens", target), ("shared_prefix_tokens", shared))
            if value
        )
        raise WorkbenchError(
            f"{asked} needs the server's tokenizer, and {exc}; set it to 0 to send the "
            "prompts as written"
        ) from None
    made = sorted(p.tokens or 0 for p in sized.built.values())
    what = f"of {made[0]} tokens" if len(set(made)) == 1 else f"of {made[0]} to {made[-1]} tokens"
    missed = sum(sized.built[i].tokens != n for i, n in targets.items() if n)
    return BuiltPrompts(
        sized,
        (
            NoticeLevel.INFO,
            f"[{config.label}] {count} prompts {what} built with the server's tokenizer in "
            f"{time.monotonic() - started:.1f} s (the chat template and special tokens take "
            f"{overhead} of them"
            + (f"; all open with the same {shared} tokens" if shared else "")
            + ")"
            + (f"; {missed} missed their length by a token or more" if missed else ""),
        ),
    )


async def _conversation_prompts(
    config: RunConfig,
    prompts: PromptSource,
    first_index: int,
    base_url: str,
    headers: dict[str, str],
) -> BuiltPrompts:
    """Every new user message of a conversations run (and its warm-ups' prompts), each of
    ``user_tokens`` by the server's own tokenizer, its text alone, opening with its own
    request's prompt (so no two conversations share more than the system prompt), and the
    system prompt of ``system_prompt_tokens``. Exact counts need the tokenizer: a server
    without one cannot run conversations."""
    workload = config.workload
    count = workload.warmup + workload.per_repeat * workload.repeats
    tokenizer = ServerTokenizer(base_url, workload.endpoint, headers)
    targets = dict.fromkeys(range(first_index, first_index + count), workload.user_tokens)
    started = time.monotonic()
    system_tokens = workload.system_prompt_tokens
    try:
        system = (
            await shared_prefix(tokenizer, system_tokens, workload.seed) if system_tokens else ""
        )
        sized = await size_prompts(tokenizer, prompts, targets, workload.seed, alone=True)
    except TokenizerUnavailable as exc:
        raise WorkbenchError(
            f"kind = 'conversations' sizes its messages with the server's tokenizer, and {exc}"
        ) from None
    missed = sum(p.tokens != workload.user_tokens for p in sized.built.values())
    # A message's count is not its request's prompt length (the conversation so far and
    # the template come with it): the server's own count is in each answer's usage.
    messages = {i: SizedPrompt(p.text, None) for i, p in sized.built.items()}
    return BuiltPrompts(
        SizedPrompts(prompts, messages),
        (
            NoticeLevel.INFO,
            f"[{config.label}] {count} user messages of {workload.user_tokens} tokens built "
            f"with the server's tokenizer in {time.monotonic() - started:.1f} s"
            + (f", and a system prompt of {system_tokens} tokens" if system_tokens else "")
            + (f"; {missed} missed their length by a token or more" if missed else ""),
        ),
        system,
    )


def _replayed_prompts(
    config: RunConfig,
    prompts: PromptSource,
    first_index: int,
    recorded: tuple[RecordedConversation, ...],
) -> BuiltPrompts:
    """A replay's user messages as written, in file order for each repeat (``plan_replay``
    splits them into the file's conversations), and its warm-ups the file's first ones;
    nothing is counted, so a server without a tokenizer can replay a file too."""
    workload = config.workload
    questions = [q for c in recorded for q in c.questions]
    if workload.per_repeat != len(questions):
        raise ValueError("a replay's requests are the file's user messages, counted at setup")
    texts = [questions[k % len(questions)] for k in range(workload.warmup)]
    texts += questions * workload.repeats
    built = {first_index + k: SizedPrompt(text, None) for k, text in enumerate(texts)}
    return BuiltPrompts(
        SizedPrompts(prompts, built),
        (
            NoticeLevel.INFO,
            f"[{config.label}] replays the {len(recorded)} conversations of "
            f"{Path(workload.conversations_file).name} ({len(questions)} user messages), "
            f"{workload.users} at once",
        ),
    )


async def _trace_prompts(
    config: RunConfig,
    prompts: PromptSource,
    first_index: int,
    base_url: str,
    headers: dict[str, str],
    trace: TracePlan,
) -> BuiltPrompts:
    """Every repeat's prompt of each trace row, its scaled ``input_length`` exactly by the
    server's tokenizer, the chat template's tokens counted (a length under the template is
    raised to the template and a token of text), opening with its hash ids' blocks (one
    without, with its prompt as written). The warm-ups keep the prompts as written. Exact
    lengths need the tokenizer: a server without one cannot replay a trace."""
    workload = config.workload
    tokenizer = ServerTokenizer(base_url, workload.endpoint, headers)
    blocks = HashedBlocks(tokenizer, trace.block_tokens, workload.seed)
    rows = len(trace.rows)
    started = time.monotonic()
    built: dict[int, SizedPrompt] = {}
    try:
        least = await template_overhead(tokenizer) + 1
        targets = [max(least, n) for n in trace.input_tokens]
        for repeat in range(workload.repeats):
            for k, row in enumerate(trace.rows):
                i = first_index + workload.warmup + repeat * rows + k
                # A row without blocks opens as a prompt as written does (text, not the
                # padding's blank line, which a template may strip).
                opening = await blocks.opening(row.hash_ids, targets[k], repeat) or prompts.get(i)
                built[i] = await sized_prompt(tokenizer, opening, targets[k], workload.seed + i)
    except TokenizerUnavailable as exc:
        raise WorkbenchError(
            f"arrival = 'trace' sizes its prompts with the server's tokenizer, and {exc}"
        ) from None
    raised = sum(n < least for n in trace.input_tokens)
    missed = sum(
        p.tokens != targets[(i - first_index - workload.warmup) % rows] for i, p in built.items()
    )
    made = sorted(p.tokens or 0 for p in built.values())
    return BuiltPrompts(
        SizedPrompts(prompts, built),
        (
            NoticeLevel.WARNING if raised or missed else NoticeLevel.INFO,
            f"[{config.label}] {len(built)} prompts of {made[0]} to {made[-1]} tokens from "
            f"{trace.name} built with the server's tokenizer in "
            f"{time.monotonic() - started:.1f} s ({trace.block_tokens} tokens a hash id; "
            f"the chat template and special tokens take {least - 1} of each)"
            + (
                f"; {raised} of its {rows} rows are shorter than that: raised to {least}"
                if raised
                else ""
            )
            + (f"; {missed} missed their length by a token or more" if missed else ""),
        ),
    )


def model_estimate(
    config: RunConfig, base_dir: Path | None
) -> tuple[Callable[[str], int] | None, str]:
    """For an external server that cannot count: the model file's own vocabulary, when the
    experiment names the file (``--model``), else nothing; and how prompts were sized."""
    if config.server.model == "default":
        return None, "padded a word per token (give --model FILE.gguf to count better)"
    try:
        model = resolve_model(config.server.model, base_dir)
        return estimator_for(model), f"counted with {model.name}'s vocabulary"
    except WorkbenchError as exc:
        return None, f"padded a word per token ({exc})"
