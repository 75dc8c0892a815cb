"""A machine's calibration measured: the real llama-server started with the settings to
calibrate, a short fixed set of requests sent (prompts of a few lengths alone, 1 to 8
requests generating together, a long context, a prompt arriving while others generate, a
long prompt alone), their server ``timings`` fitted with ``calibration.fit_costs``; then two
prompts alone at this ``-ub`` and, the server restarted, at another
(``calibration.micro_batch_cost``), so that one calibration prices every ``-ub``.

The measuring is bounded (``limit_s``, 60 s at most): what has not finished by then is left
out, the fit made of what was measured and the calibration's note says so. Every way out
stops the server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.records import RequestRecord
from workbench.engine.config.experiment import RequestsWorkload
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.measure.client import stream_request
from workbench.engine.measure.hardware import fingerprint
from workbench.engine.measure.sized_prompts import (
    ServerTokenizer,
    sized_prompt,
    template_overhead,
)
from workbench.engine.measure.workload import make_client
from workbench.engine.models.sliding_window import DEFAULT_BATCH, micro_batch
from workbench.engine.predict.calibration import (
    PROBE,
    Calibration,
    ChatTokens,
    fit_costs,
    held_settings,
    machine_identity,
    micro_batch_cost,
    model_identity,
    now,
    small_chunk_cost,
)
from workbench.engine.server.llama_server import LlamaServer

LIMIT_S = 60.0
SLOTS = 8
SLOT_CONTEXT = 2048
PROMPT_LENGTHS = (16, 64, 256)  # alone: a prompt's cost per token, and its growth with length
SEQUENCES = (1, 2, 4, 8)  # generating together: a step's cost per sequence
SHORT, LONG = 16, 1024  # prompt tokens of a decode group: a step's cost per context token
ANSWER = 16  # tokens each group generating together generates
INTERLEAVED = 256  # the prompt that arrives while two others generate
LONG_PROMPT = 1536  # alone, last (the dearest): attention over a long prompt's own tokens
SMALL_CHUNK = 48  # then that prompt again, this much longer: a small chunk over a cache
SMALL_CHUNKS = 3  # how many times, each on the cache the one before left
UBATCH_PROMPTS = (256, 1024)  # alone at two -ub values: what a micro-batch costs besides
SMALL_CHUNK_MAX = 63
"""The largest chunk that pays the small chunk's cost a token pair: on the CPU build,
chunks of 32 to 63 tokens cost about twice a 512-token chunk's, 64 and over 1 to 1.3 times
(``bench/chunk_attention.py``)."""


@dataclass(frozen=True)
class Phase:
    """One group of requests sent together: their prompt tokens and what they generate;
    ``interleaved``: the last goes once the others generate, so its prompt is processed in
    the steps that generate theirs."""

    name: str
    prompts: tuple[int, ...]
    max_tokens: int
    interleaved: bool = False
    extended: int = 0  # then its prompt again, this much longer each time (``extend``)


def phases(slots: int) -> list[Phase]:
    """What the probe sends after its warm-up, in order: each kind of cost early and the
    dearest last, so a slow machine that runs out of time has measured what it could of
    each. A prompt alone asks for one token: it times its prompt and no step."""
    prompts = [Phase(f"prompt of {n}", (n,), 1) for n in PROMPT_LENGTHS]
    together = [Phase(f"{k} generating", (SHORT,) * k, ANSWER) for k in SEQUENCES if k <= slots]
    out = [prompts[0], *together[:2], prompts[1], *together[2:3]]
    out.append(Phase("long context", (LONG,) * min(2, slots), ANSWER))
    out += [*prompts[2:], *together[3:]]
    if slots >= 3:
        out.append(Phase("interleaved prompt", (SHORT, SHORT, INTERLEAVED), ANSWER, True))
    out.append(Phase(f"prompt of {LONG_PROMPT}", (LONG_PROMPT,), 1, extended=SMALL_CHUNK))
    return out


async def chat_tokens(tokenizer: ServerTokenizer) -> ChatTokens:
    """What the chat template adds around a conversation's messages, by the server's own
    ``/apply-template`` and ``/tokenize``: prompts of one message, of a system message and
    one, and of an exchange before one, each less its messages' own tokens; the opening,
    what two prompts that differ only in their user message share."""
    ask, other, say = "Request 0.", "Another question here.", "An answer."
    sizes = {text: len(await tokenizer.tokens(text)) for text in (ask, other, say)}

    def user(text: str) -> dict[str, str]:
        return {"role": "user", "content": text}

    system = {"role": "system", "content": say}
    one = await tokenizer.chat_ids([user(ask)])
    apart = await tokenizer.chat_ids([user(other)])
    with_system = await tokenizer.chat_ids([system, user(ask)])
    system_apart = await tokenizer.chat_ids([system, user(other)])
    exchange = await tokenizer.chat_ids(
        [user(ask), {"role": "assistant", "content": say}, user(ask)]
    )
    return ChatTokens(
        prompt=max(0, len(one) - sizes[ask]),
        system_prompt=max(0, len(with_system) - sizes[ask] - sizes[say]),
        exchange=max(0, len(exchange) - len(one) - sizes[ask] - sizes[say]),
        opening=_common(one, apart),
        system_opening=max(0, _common(with_system, system_apart) - sizes[say]),
    )


def _common(a: list[int], b: list[int]) -> int:
    """The length of the prefix two token sequences share."""
    return next(
        (k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


WARM_UP = Phase("warm-up", (SHORT,), 4)
"""The server's first request pays for what it sets up once (its buffers, the model's pages
read in): sent first, not fitted."""


@dataclass(frozen=True)
class Probed:
    calibration: Calibration
    measured_s: float
    finished: list[str]  # the phases measured in time
    records: list[RequestRecord] = field(default_factory=list)  # a tune refits with them


def other_ubatch(ubatch: int) -> int:
    """The second ``-ub`` the probe measures at: an eighth of a large one (the server's 512:
    64), eight times a small one, so both differ by several micro-batches a prompt."""
    return ubatch // 8 if ubatch >= 256 else ubatch * 8


async def micro_batches(
    server: LlamaServer, tokenizer: ServerTokenizer, log_path: Path, deadline: float
) -> tuple[list[RequestRecord], list[RequestRecord], int]:
    """``UBATCH_PROMPTS``, each alone and fresh, at ``server``'s ``-ub``, then the same
    prompts at ``other_ubatch`` of it on a server started for them (``server`` stopped
    first: a model's weights twice may not fit), in the same minute: the records at each
    and the other ``-ub``."""
    settings = server.settings
    own = micro_batch(settings.batch_size, settings.ubatch_size)
    at = other_ubatch(own)
    texts = [
        (await sized_prompt(tokenizer, f"Micro-batch {k}.", n, 950 + k)).text
        for k, n in enumerate(UBATCH_PROMPTS)
    ]
    alone = [Phase(f"prompt of {n}", (n,), 1) for n in UBATCH_PROMPTS]
    first = [
        r
        for p, t in zip(alone, texts, strict=True)
        for r in await send(server, p, [t], 950, deadline)
    ]
    await asyncio.to_thread(server.stop)
    other = LlamaServer(
        server.binary,
        server.model,
        replace(settings, ubatch_size=at),
        log_path.with_name(f"{log_path.stem}-ub{at}{log_path.suffix}"),
    )
    try:
        await other.start()
        second = [
            r
            for p, t in zip(alone, texts, strict=True)
            for r in await send(other, p, [t], 960, deadline)
        ]
    finally:
        await asyncio.to_thread(other.stop)
    return first, second, at


def probe_batch(settings: ServerSettings) -> int:
    """The ``-b`` a probe runs at: it holds each of the probe's prompts whole and never cuts
    ``-ub`` down (a calibration holds for every ``-b``, at its ``-ub``)."""
    return max(DEFAULT_BATCH, settings.ubatch_size or 0)


def probe_settings(settings: ServerSettings) -> ServerSettings:
    """The settings to calibrate, at enough slots (and context for each) for the probe: no
    per-slot limit (``kv_unified_per_slot`` bounds a request's context, not a step's cost),
    at ``probe_batch``."""
    slots = max(SLOTS, settings.slots)
    return replace(
        settings,
        slots=slots,
        ctx=slots * SLOT_CONTEXT,
        kv_unified_per_slot=None,
        batch_size=probe_batch(settings),
    )


async def send(
    server: LlamaServer,
    phase: Phase,
    texts: list[str],
    base: int,
    deadline: float,
    cache_prompt: bool = False,
) -> list[RequestRecord]:
    """One phase's requests, streamed together (an interleaved one's last once the others
    have their first token),
    each its own prompt so none reuses another's cache; each request's timeout is what is
    left to ``deadline`` (``time.monotonic``'s)."""
    workload = replace(
        RequestsWorkload(),
        endpoint="completions",
        max_tokens=phase.max_tokens,
        ignore_eos=True,
        cache_prompt=cache_prompt,
        request_timeout_s=max(0.1, deadline - time.monotonic()),
    )
    client = make_client(server.base_url, workload)

    records = [RequestRecord(0, 0, base + k, text) for k, text in enumerate(texts)]

    async def one(record: RequestRecord) -> RequestRecord:
        if phase.interleaved and record is records[-1]:
            while any(r.t_first_token_ns is None and r.error is None for r in records[:-1]):
                await asyncio.sleep(0.002)
        return await stream_request(client, record, workload, record.index, lambda event: None)

    return list(await asyncio.gather(*(one(r) for r in records)))


async def extend(
    server: LlamaServer,
    tokenizer: ServerTokenizer,
    text: str,
    number: int,
    deadline: float,
    tokens: int = SMALL_CHUNK,
) -> list[RequestRecord]:
    """``text`` (in the server's cache) sent again ``SMALL_CHUNKS`` times, each time
    ``tokens`` longer, each on the cache the one before left, and before each a fresh
    prompt of ``tokens``: a small chunk's cost over a long cache against the same chunk's
    alone, measured in turn (``calibration.small_chunk_cost``; one lone prompt that met a
    busy moment read half the cost a pair)."""
    phase = Phase("small chunks", (tokens,), 1)
    found = []
    for k in range(SMALL_CHUNKS):
        fresh = await sized_prompt(tokenizer, f"Alone {number}.{k}.", tokens, 890 + k)
        found += await send(server, phase, [fresh.text], 890 + k, deadline)
        more = await sized_prompt(tokenizer, f" More {number}.{k}.", tokens, 900 + k)
        text += more.text
        found += await send(server, phase, [text], 900 + k, deadline, cache_prompt=True)
    return found


async def probe(
    binary: str,
    model: Path,
    settings: ServerSettings,
    log_path: Path,
    limit_s: float = LIMIT_S,
    say: Callable[[str], None] = lambda line: None,
) -> Probed:
    """Start the server, send the probe's phases for at most ``limit_s`` seconds of
    measuring (after the server is healthy), stop it, fit."""
    limit_s = min(limit_s, LIMIT_S)
    settings = probe_settings(settings)
    server = LlamaServer(binary, model, settings, log_path)
    records: list[RequestRecord] = []
    chunked: list[RequestRecord] = []
    ubatched: tuple[list[RequestRecord], list[RequestRecord], int] = ([], [], 0)
    own_ubatch = micro_batch(settings.batch_size, settings.ubatch_size)
    other_failed = ""
    finished: list[str] = []
    try:
        await server.start()
        started = time.monotonic()
        deadline = started + limit_s
        tokenizer = ServerTokenizer(server.base_url, "completions")
        template = await template_overhead(ServerTokenizer(server.base_url, "chat"))
        chat = await chat_tokens(ServerTokenizer(server.base_url, "chat"))
        for number, phase in enumerate([WARM_UP, *phases(settings.slots)]):
            try:
                async with asyncio.timeout(deadline - time.monotonic()):
                    texts = [
                        (
                            await sized_prompt(
                                tokenizer, f"Probe {number}.{k}.", n, number * 10 + k
                            )
                        ).text
                        for k, n in enumerate(phase.prompts)
                    ]
                    sent = await send(
                        server, phase, texts, number * 10, deadline, phase.extended > 0
                    )
            except TimeoutError:
                break
            if phase is WARM_UP:
                continue
            records += sent
            if all(r.ok for r in sent):
                finished.append(phase.name)
                say(f"  {phase.name}: measured")
            if phase.extended and all(r.ok for r in sent):
                try:
                    async with asyncio.timeout(deadline - time.monotonic()):
                        chunked = await extend(
                            server, tokenizer, texts[0], number, deadline, phase.extended
                        )
                except TimeoutError:
                    break
                say("  small chunks: measured")
        if len(finished) == len(phases(settings.slots)):
            try:
                async with asyncio.timeout(deadline - time.monotonic()):
                    ubatched = await micro_batches(server, tokenizer, log_path, deadline)
            except TimeoutError:
                pass
            except WorkbenchError as exc:  # the second server: the rest still stands
                other_failed = f" (its server failed: {exc})"
        measured_s = time.monotonic() - started
    finally:
        await asyncio.to_thread(server.stop)
    left = [p.name for p in phases(settings.slots) if p.name not in finished]
    if not any(r.ok for r in chunked):
        left.append("small chunks")
    micro = micro_batch_cost(ubatched[0], own_ubatch, ubatched[1], ubatched[2])
    if micro is None:
        left.append("another -ub" + other_failed)
    else:
        say(f"  another -ub ({micro.measured_at}): measured")
    note = f"not measured within the {limit_s:g} s bound: {', '.join(left)}" if left else ""
    hardware = fingerprint(binary)
    fit = fit_costs(records, settings.batch_size, own_ubatch)
    small = small_chunk_cost(fit.costs.prefill, chunked, SMALL_CHUNK_MAX)
    costs = replace(fit.costs, prefill=small, micro_batch=micro)
    calibration = Calibration(
        costs,
        fit.quality,
        machine_identity(hardware),
        model_identity(model),
        hardware.llama_server_build,
        held_settings(settings),
        now(),
        PROBE,
        note,
        template,
        chat,
        fit.coverage,
    )
    return Probed(calibration, measured_s, finished, records)
