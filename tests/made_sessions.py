"""Session files written without a server: chosen requests, startup facts and samples go as
events through the real session writer, so a test of an analysis or a view reads exactly what
a run writes, with numbers known in advance, in milliseconds.

Times are seconds after the session's clock origin. Server states are not written: the writer
stamps them with its own clock, which a made session cannot choose.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from workbench.engine.base.records import Hardware, RequestRecord, StartupFacts, TokenChunk
from workbench.engine.config.experiment import RunConfig, WorkloadSettings, parse_experiment
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.events import (
    ClientLoadMeasured,
    ConfigFinished,
    ConfigStarted,
    EventBus,
    ExperimentFinished,
    MachineLoadMeasured,
    ProcessSample,
    RequestFinished,
    ServerCounters,
    ServerReady,
    SlotMatched,
)
from workbench.engine.figures.client_limits import ClientLoad
from workbench.engine.figures.machine_load import MachineLoad
from workbench.engine.models.model_file import DEFAULT_MODEL_FILE
from workbench.engine.server.llama_server import server_arguments
from workbench.engine.store import SessionWriter, create_session

NS = 1_000_000_000
MIB = 2**20

# A machine as measure.hardware.fingerprint describes one.
HARDWARE = Hardware(
    hostname="made-host",
    os="Linux 6.1.0",
    os_version="#1 SMP",
    machine="x86_64",
    cpu_model="Made CPU 8-Core",
    cpu_physical_cores=4,
    cpu_logical_cores=8,
    ram_bytes=16 * 2**30,
    python="3.11.9",
    llama_server="/opt/llama.cpp/llama-server",
    llama_server_build="version: 6123 (abc1234); built with cc 12.2.0",
)

# What llama-server logs for the default model (SmolLM2-135M, Q4_1) on a CPU.
MODEL_MIB = 92.1
KV_BYTES_PER_TOKEN = 30 * 3 * 64 * 2 * 2  # layers x KV heads x head size x (K, V) x f16
COMPUTE_MIB = 62.9
PROMPT_TOKENS = 20


def startup_facts(slots: int, ctx: int) -> StartupFacts:
    """The facts a CPU llama-server logs at start for the default model, each slot with its
    share of ``ctx``: with ``ctx`` 2048 its buffers are 92.1 + 45 + 62.9 = 200 MiB."""
    return StartupFacts(
        n_slots=slots,
        n_ctx_slot=ctx // slots,
        kv_unified=False,
        n_ctx=ctx,
        kv_buffer_mib=ctx * KV_BYTES_PER_TOKEN / MIB,
        model_buffer_mib=MODEL_MIB,
        compute_buffer_mib=COMPUTE_MIB,
        backend="CPU",
        build="6123 (abc1234)",
    )


def request(
    index: int,
    *,
    submit_s: float = 0.0,
    ttft_s: float = 0.1,
    tokens: int = 12,
    itl_s: float = 0.1,
    per_chunk: int = 1,
    prefill_s: float = 0.05,
    repeat: int = 0,
    warmup: bool = False,
    slot: int | None = 0,
    reasoning: int | None = None,
) -> RequestRecord:
    """A successful request with a prompt of ``PROMPT_TOKENS``: sent at ``submit_s``, first
    chunk ``ttft_s`` later, then the server makes a token every ``itl_s`` and sends them
    ``per_chunk`` at a time. Its ``timings`` say what the server measured: ``prefill_s``
    for the prompt, ``itl_s`` per token generated. ``reasoning``: its first chunks streamed
    as reasoning, and its first answer's time recorded (None: neither, as a session older
    than schema 7 reads)."""
    first = submit_s + ttft_s
    gap = itl_s * per_chunk
    chunks = [
        TokenChunk(round((first + k * gap) * NS), " tok" * per_chunk, k < (reasoning or 0))
        for k in range(math.ceil(tokens / per_chunk))
    ]
    answer = [c.t_ns for c in chunks if not c.reasoning][:1] if reasoning is not None else []
    return RequestRecord(
        0,
        repeat,
        index,
        f"prompt {index}",
        warmup=warmup,
        t_submit_ns=round(submit_s * NS),
        t_first_token_ns=chunks[0].t_ns,
        t_first_answer_ns=answer[0] if answer else None,
        t_last_token_ns=chunks[-1].t_ns,
        t_done_ns=chunks[-1].t_ns,
        http_status=200,
        ok=True,
        finish_reason="length",
        usage={"completion_tokens": tokens, "prompt_tokens": PROMPT_TOKENS},
        timings={
            "prompt_n": PROMPT_TOKENS,
            "prompt_ms": prefill_s * 1000,
            "predicted_n": tokens,
            "predicted_ms": (tokens - 1) * itl_s * 1000,
            "cache_n": 0,
        },
        chunks=chunks,
        slot=slot,
    )


def failed(index: int, *, submit_s: float, done_s: float, error: str) -> RequestRecord:
    """A request that got no token: the server answered ``error`` at ``done_s``."""
    return RequestRecord(
        0,
        0,
        index,
        f"prompt {index}",
        t_submit_ns=round(submit_s * NS),
        t_done_ns=round(done_s * NS),
        http_status=500,
        error=error,
    )


def burst(
    first_index: int,
    count: int,
    *,
    slots: int,
    at_s: float,
    tokens: int = 12,
    prefill_s: float = 0.1,
    itl_s: float = 0.1,
) -> list[RequestRecord]:
    """``count`` requests sent together at ``at_s`` to ``slots`` slots. Request i goes to
    slot i % slots and waits for the i // slots before it there; each takes ``prefill_s``
    to its first token, then a token every ``itl_s``."""
    turn = prefill_s + (tokens - 1) * itl_s
    return [
        request(
            first_index + i,
            submit_s=at_s,
            ttft_s=(i // slots) * turn + prefill_s,
            tokens=tokens,
            itl_s=itl_s,
            prefill_s=prefill_s,
            slot=i % slots,
        )
        for i in range(count)
    ]


def rss_samples(at_s: float, mib: Sequence[float]) -> list[ProcessSample]:
    """The server's resident memory, one sample a second from ``at_s``."""
    return [
        ProcessSample(0, round((at_s + k) * NS), round(m * MIB), 100.0) for k, m in enumerate(mib)
    ]


@dataclass(frozen=True)
class Config:
    """One configuration of a made session. ``facts``: what its server logged when it got
    ready (None: it never did). ``samples``: sampler events (their config index is set
    here). A request's ``slot`` is written as the server log's match (managed mode only).
    Each repeat also records how busy the measuring loop was (``loop_busy`` of its wall
    time) and the server's token counters before and after it, which agree with the
    requests' own counts."""

    requests: Sequence[RequestRecord] = ()
    facts: StartupFacts | None = None
    samples: Sequence[Any] = ()
    status: str = "ok"
    error: str | None = None
    loop_busy: float = 0.1
    machine: MachineLoad | None = None  # recorded for each repeat (None: not recorded)


def build_session(
    path: Path,
    toml: str,
    configs: Sequence[Config],
    *,
    hardware: Hardware = HARDWARE,
    base_url: str | None = None,
) -> Path:
    """Write a complete session of the experiment ``toml``, one ``Config`` per configuration
    of its sweep. With ``base_url`` it is an external server's session."""
    external = base_url is not None
    experiment = parse_experiment(toml, name_hint="made")
    runs = experiment.configs(external=external)
    mode = "external" if external else "managed"
    create_session(path, experiment.name, toml, None, mode, base_url, hardware, 0)
    bus = EventBus()
    writer = SessionWriter(path, bus)
    writer.start()
    for run, made in zip(runs, configs, strict=True):
        for event in _config_events(run, made, path.parent, base_url):
            bus.publish(event)
    bus.publish(ExperimentFinished("complete"))
    writer.join(10)
    assert writer.error is None
    return path


def _config_events(run: RunConfig, made: Config, folder: Path, base_url: str | None):
    """The events a run publishes for one configuration that the writer records."""
    i = run.index
    yield ConfigStarted(run, run.workload.requests * run.workload.repeats)
    if made.facts is not None:
        slots = made.facts.n_slots or run.server.slots
        if base_url is not None:
            yield ServerReady(i, base_url, None, [], None, made.facts, slots)
        else:
            port = 8080 + i
            command = [
                "llama-server",
                *server_arguments(run.server, Path(DEFAULT_MODEL_FILE), port),
            ]
            log = str(folder / f"config-{i}.log")
            yield ServerReady(
                i, f"http://127.0.0.1:{port}", 4000 + i, command, log, made.facts, slots
            )
    for event in made.samples:
        yield replace(event, config_index=i)
    for record in made.requests:
        yield RequestFinished(replace(record, config_index=i))
        if record.slot is not None and base_url is None:
            yield SlotMatched(i, record.repeat, record.index, record.slot)
    yield from _repeat_events(i, made)
    yield ConfigFinished(i, made.status, made.error)


def _repeat_events(i: int, made: Config):
    """Per repeat: the client's load over the repeat's wall time, and the server's
    /metrics counters, which count every request since the server started (its prompt
    tokens those it processed, ``timings.prompt_n``: a cached token is not counted)."""
    counted = {"llamacpp:tokens_predicted_total": 0.0, "llamacpp:prompt_tokens_total": 0.0}

    def count(records: list[RequestRecord]) -> dict[str, float]:
        for r in records:
            usage = r.usage or {}
            counted["llamacpp:tokens_predicted_total"] += usage.get("completion_tokens", 0)
            processed = (r.timings or {}).get("prompt_n", usage.get("prompt_tokens", 0))
            counted["llamacpp:prompt_tokens_total"] += processed
        return dict(counted)

    count([r for r in made.requests if r.warmup])
    for repeat in sorted({r.repeat for r in made.requests if not r.warmup}):
        mine = [r for r in made.requests if r.repeat == repeat and not r.warmup]
        wall = (max(r.t_done_ns or 0 for r in mine) - min(r.t_submit_ns or 0 for r in mine)) / NS
        yield ClientLoadMeasured(i, repeat, ClientLoad(wall, made.loop_busy * wall, 0.2 * wall))
        if made.machine is not None:
            yield MachineLoadMeasured(i, repeat, made.machine)
        before = dict(counted)
        yield ServerCounters(i, repeat, before, count(mine))


# Two repeats of three requests whose TTFTs make the two ways of combining repeats differ:
# the per-repeat medians are 0.2 s and 2.0 s (mean 1.1 s), the pooled median is 0.65 s.
TWO_REPEATS = {0: (0.1, 0.2, 0.3), 1: (1.0, 2.0, 3.0)}


def write_session(path: Path) -> Path:
    """One configuration (one slot, 8192 context) with the ``TWO_REPEATS`` 10 s apart: each
    request of repeat k sent at 10k s, with 11 tokens 0.1 s apart after its TTFT."""
    toml = "[server]\nslots = 1\n[workload]\nrequests = 3\nrepeats = 2\n"
    requests = [
        request(3 * repeat + k, submit_s=10.0 * repeat, ttft_s=ttft, tokens=11, repeat=repeat)
        for repeat, ttfts in TWO_REPEATS.items()
        for k, ttft in enumerate(ttfts)
    ]
    return build_session(path, toml, [Config(requests, startup_facts(1, 8192))])


SWEEP = """name = "sweep"
[server]
slots = [1, 2]
ctx = 2048
[workload]
requests = 3
max_tokens = 12
warmup = 1
"""


def write_sweep(path: Path) -> Path:
    """The made twin of a small real sweep (conftest's ``recorded_session``): slots 1 and 2,
    2048 context, one warm-up then 3 requests of 12 tokens sent together.

    np=1: warm-up at 0 s; the 3 requests at 2 s are served one after another (0.1 s
    prefill, a token every 0.1 s): TTFT 0.1, 1.3 and 2.5 s, makespan 3.6 s. RSS peaks at
    250 MiB.
    np=2: warm-up at 6 s; of the 3 requests at 8 s two are served together (a token every
    0.125 s), the third after them: TTFT 0.1, 0.1 and 1.575 s, makespan 2.95 s. RSS peaks
    at 260 MiB.
    """
    warm = {"repeat": -1, "warmup": True, "slot": None}  # the slot log matches measured ones
    return build_session(
        path,
        SWEEP,
        [
            Config(
                [request(0, submit_s=0.0, **warm), *burst(1, 3, slots=1, at_s=2.0)],
                startup_facts(1, 2048),
                rss_samples(2.0, (180, 250, 240, 230)),
            ),
            Config(
                [request(4, submit_s=6.0, **warm), *burst(5, 3, slots=2, at_s=8.0, itl_s=0.125)],
                startup_facts(2, 2048),
                rss_samples(8.0, (190, 260, 255)),
            ),
        ],
    )


CONVERSATIONS = """name = "chats"
[server]
slots = [1, 2]
ctx = 4096
[workload]
kind = "conversations"
users = 2
turns = 3
max_tokens = 8
warmup = 0
"""
TURN_PROMPTS = (100, 180, 260)  # each turn's prompt by the server's count: history + 80


def turn(
    index: int, user: int, n: int, *, cache_n: int, submit_s: float, ttft_s: float, slot: int
) -> RequestRecord:
    """Turn ``n`` of conversation ``r1u{user}``: its prompt ``TURN_PROMPTS[n - 1]``, of which
    the server took ``cache_n`` from its cache."""
    prompt = TURN_PROMPTS[n - 1]
    made = request(index, submit_s=submit_s, ttft_s=ttft_s, tokens=8, slot=slot)
    return replace(
        made,
        conversation_id=f"r1u{user}",
        turn=n,
        usage={"completion_tokens": 8, "prompt_tokens": prompt},
        timings={**(made.timings or {}), "prompt_n": prompt - cache_n, "cache_n": cache_n},
    )


def write_conversations(path: Path) -> Path:
    """Two conversations of three turns at 1 slot and at 2, each turn 2 s after the last.

    np=1: the slot always holds the other conversation, so every later turn finds only the
    chat template's 26 tokens: 74 and 154 tokens re-prefilled per conversation (456 in all),
    4 of 4 later turns lost, cache reuse 104 / 560; TTFT 0.2 s on turn 1, 0.4 s later.
    np=2: each conversation keeps its slot and the server takes its whole history (and the
    answer's start) from the cache: nothing re-prefilled; TTFT 0.2 s on turn 1, 0.05 s later.
    """
    configs = []
    for slots, later_ttft in ((1, 0.4), (2, 0.05)):
        requests = [
            turn(
                2 * (n - 1) + user - 1,
                user,
                n,
                cache_n=0 if n == 1 else 26 if slots == 1 else TURN_PROMPTS[n - 2] + 7,
                submit_s=2.0 * (n - 1),
                ttft_s=0.2 if n == 1 else later_ttft,
                slot=(user - 1) % slots,
            )
            for n in (1, 2, 3)
            for user in (1, 2)
        ]
        configs.append(Config(requests, startup_facts(slots, 4096)))
    return build_session(path, CONVERSATIONS, configs)


def server_of(values: dict[str, Any]) -> ServerSettings:
    """A configuration's server settings, written as a file's ``[server]`` table."""
    return ServerSettings(**values)


def workload_of(values: dict[str, Any]) -> WorkloadSettings:
    """A configuration's workload, of the kind its ``[workload]`` table says."""
    return WorkloadSettings.kind_for(values)(**values)
