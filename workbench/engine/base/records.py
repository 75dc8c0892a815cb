"""The records every layer carries: the raw record of one request (every timestamp, every
chunk, what the server said), what a server states about itself at start, and the machine a
session was recorded on.

Derived numbers (TTFT, TPOT, ...) are computed from these records by ``analysis``; records keep
only what was observed, so a session can be re-analysed later with better rules. They live at
the bottom of the engine because the events, the store, the figures and both front ends all
pass them on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from workbench.engine.base.columns import column, not_stored

CONTEXT_FULL = "did not fit the slot's context"
"""How a request's error starts when the server could not hold it: refused for a prompt longer
than a slot's context, or stopped short of ``max_tokens`` when the context filled up."""

CANCELLED = "cancelled"
"""How a request's error starts when the run was stopped (Ctrl-C, Stop) before it ended: the
user's doing, not a failure of the server."""


class RequestKey(NamedTuple):
    """One request of a session: its configuration, its repeat and its prompt's index. Every
    event about a request carries these three; a view finds the request by them."""

    config_index: int
    repeat: int
    index: int


@dataclass(frozen=True)
class TokenChunk:
    """One SSE chunk that carried generated text, and when its bytes arrived. ``reasoning``:
    the text came as the server's reasoning (``reasoning_content`` or ``reasoning``), not
    as the answer (``content``), so the pane can dim it and TTFO can skip it."""

    t_ns: int
    text: str
    reasoning: bool = False


@dataclass
class RequestRecord:
    """One request, every raw time and what the server said: the declaration of the session
    file's ``requests`` table too (each field its column, ``base/columns.py``)."""

    config_index: int = column("config_idx")
    repeat: int
    index: int = column("idx")
    prompt: str
    warmup: bool = False
    prompt_tokens: int | None = column(since=5, default=None)  # by the server's tokenizer
    # False: the answer came whole, its text visible only at the end
    streamed: bool = column(since=5, default=True)
    t_intended_ns: int | None = column(since=4, default=None)  # due by the arrival schedule
    t_scheduled_ns: int | None = None  # woke up for its arrival (before any client-side limit)
    # free to go: due, and a client-side concurrency slot free
    t_ready_ns: int | None = column(since=4, default=None)
    connect_ns: int | None = column(since=4, default=None)  # how long opening its connection took
    # when it was open (before t_ready when opened ahead)
    t_connected_ns: int | None = column(since=4, default=None)
    t_submit_ns: int | None = None
    t_first_token_ns: int | None = None  # the first visible text, reasoning or answer
    # the first answer text (``content``); None: none came, or a file older than schema 7
    t_first_answer_ns: int | None = column(since=7, default=None)
    t_last_token_ns: int | None = None
    t_done_ns: int | None = None
    http_status: int | None = None
    ok: bool = False
    error: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = column("usage_json", json=True, default=None)
    timings: dict[str, Any] | None = column("timings_json", json=True, default=None)
    # a conversations run's: which conversation the request belongs to, and its turn (from
    # 1); None for an independent request, or a file older than schema 8
    conversation_id: str | None = column(since=8, default=None)
    turn: int | None = column(since=8, default=None)
    # which client worker process sent it (``[workload] workers``), from 0; None: the run
    # had one client process, or a file older than schema 10
    worker: int | None = column(since=10, default=None)
    # a trace replay's: the line of the trace file this request replays (requests due at
    # one moment are sent, and numbered, in whatever order they went); None: not a trace
    # run, or a file older than schema 11
    trace_line: int | None = column(since=11, default=None)
    chunks: list[TokenChunk] = not_stored(default_factory=list)  # the chunks table
    # the server slot that served it, from the server's log (the request_slots table)
    slot: int | None = not_stored(default=None)

    @property
    def key(self) -> RequestKey:
        return RequestKey(self.config_index, self.repeat, self.index)

    @property
    def text(self) -> str:
        return "".join(c.text for c in self.chunks)

    @property
    def context_full(self) -> bool:
        """Whether the server could not hold this request in a slot's context: it did not do
        the task the experiment asked for."""
        return self.error is not None and self.error.startswith(CONTEXT_FULL)

    @property
    def cancelled(self) -> bool:
        """Whether the run was stopped before this request ended (it did not fail)."""
        return not self.ok and self.error is not None and self.error.startswith(CANCELLED)

    @property
    def output_tokens(self) -> tuple[int | None, str]:
        """The server's own count when it gave one; counting chunks is the last resort."""
        for figures, key, source in (
            (self.usage, "completion_tokens", "usage"),
            (self.timings, "predicted_n", "timings"),
        ):
            count = (figures or {}).get(key)
            if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
                return count, source
        if self.chunks:
            return len(self.chunks), "chunks"
        return (0, "none") if self.ok else (None, "none")

    @property
    def reasoning_tokens(self) -> tuple[int | None, str]:
        """Of the output, the tokens spent reasoning: the server's own count
        (``usage.completion_tokens_details.reasoning_tokens``, as vLLM gives it), else the
        reasoning chunks counted (llama-server's usage does not say). A count above the
        server's own count of the whole output is no count (counted chunks bound nothing: a
        chunk may hold several tokens). Counting needs a record that told reasoning from
        answer: a file older than schema 7 joined them, and its chunks, all read as answer,
        have no count to give ("none")."""
        details = (self.usage or {}).get("completion_tokens_details")
        count = details.get("reasoning_tokens") if isinstance(details, dict) else None
        if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            output, source = self.output_tokens
            if source not in ("usage", "timings") or count <= (output or 0):
                return count, "usage"
        reasoned = sum(1 for c in self.chunks if c.reasoning)
        if reasoned or self.t_first_answer_ns is not None:
            return reasoned, "chunks"
        return None, "none"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def request_numbers(records: Iterable[RequestRecord]) -> dict[RequestKey, int]:
    """Each measured request's number, the one every view shows (its stream pane, its Gantt
    row, ``requests.csv``, ``show --requests``): its place, from 1, among the session's
    measured requests in the order they were sent, across the whole sweep. A record's
    ``index`` is not it: that numbers prompts, warm-ups included. Warm-ups and requests never
    sent have no number."""
    sent = sorted(
        (r for r in records if not r.warmup and r.t_submit_ns is not None),
        key=lambda r: (r.config_index, r.t_submit_ns, r.index),
    )
    return {r.key: n for n, r in enumerate(sent, 1)}


@dataclass(frozen=True)
class StartupFacts:
    """What llama-server states about itself in its startup log (``server.startup_log``), or
    an external server in ``/props``; None where it said nothing.

    The slot layout (``n_slots``, ``n_ctx_slot``, ``kv_unified``) decides how much context
    each request really gets, and the buffer sizes are the measured side of the memory
    estimate."""

    n_slots: int | None = None
    n_ctx_slot: int | None = None
    kv_unified: bool | None = None
    n_ctx: int | None = None
    kv_buffer_mib: float | None = None
    model_buffer_mib: float | None = None
    compute_buffer_mib: float | None = None
    backend: str | None = None
    build: str | None = None
    devices: tuple[str, ...] = ()
    layers_offloaded: int | None = None  # "offloaded 31/31 layers to GPU": 31
    layers_total: int | None = None  # and 31 (the model's layers and its output layer)
    metal_working_set_bytes: int | None = None  # what Metal lets the GPU hold (Apple)
    output_buffer_mib: float | None = None  # the logits of one token a sequence
    state_buffer_mib: float | None = None  # a recurrent or hybrid model's fixed state
    n_ctx_train: int | None = None  # the model's training context: the server caps a slot there

    def to_dict(self) -> dict[str, Any]:
        """As a session stores it and the JSON export shows it: every field by name, but a
        field added after the session format settled only where the log stated it, so a
        server that states none of them is stored byte for byte as before."""
        stored = {**asdict(self), "devices": list(self.devices)}
        for key in STATED_ONLY:
            if stored[key] is None:
                del stored[key]
        return stored


STATED_ONLY = (
    "layers_offloaded",
    "layers_total",
    "metal_working_set_bytes",
    "output_buffer_mib",
    "state_buffer_mib",
    "n_ctx_train",
)
"""Startup facts a session stores only when the server stated them."""


@dataclass(frozen=True)
class ImportSource:
    """Where an imported session's numbers came from: another tool's result file. Such a
    session is read-only: nothing can be run again into it."""

    tool: str  # e.g. "vllm bench serve"
    version: str | None  # None: the file does not say
    file_name: str  # the file's name only: a session never names a path to act on

    def describe(self) -> str:
        version = self.version or "(version not recorded in the file)"
        return f"imported from {self.tool} {version}, {self.file_name}"


@dataclass(frozen=True)
class Gpu:
    """One GPU of the machine, as NVML or nvidia-smi names it."""

    name: str | None = None
    memory_bytes: int | None = None
    driver: str | None = None
    memory_bandwidth_gbs: float | None = None  # NVML: max memory clock x bus width x 2


@dataclass(frozen=True)
class Hardware:
    """The machine a session was recorded on (``measure.hardware.fingerprint``), so sessions
    from different machines can be told apart and compared; None where it is not known."""

    hostname: str | None = None
    os: str | None = None
    os_version: str | None = None
    machine: str | None = None
    cpu_model: str | None = None
    cpu_physical_cores: int | None = None
    cpu_logical_cores: int | None = None
    ram_bytes: int | None = None
    python: str | None = None
    gpus: tuple[Gpu, ...] = ()
    apple_chip: str | None = None
    llama_server: str | None = None  # the binary, when the workbench started the server
    llama_server_build: str | None = None
    process_memory: str | None = None  # the memory curve's figure where it is not the RSS

    @property
    def machine_name(self) -> str:
        """The machine as every view names it: the Apple chip, else the CPU model."""
        return self.apple_chip or self.cpu_model or "?"

    def to_dict(self) -> dict[str, Any]:
        """As a session stores it and the JSON export shows it. The server's binary and
        build are known only where the workbench started the server: an external session's
        fingerprint has no such keys; nor has one whose memory curve is the RSS a
        ``process_memory`` key."""
        stored = {**asdict(self), "gpus": [_gpu_dict(g) for g in self.gpus]}
        for key in ("llama_server", "llama_server_build", "process_memory"):
            if stored[key] is None:
                del stored[key]
        return stored


def _gpu_dict(gpu: Gpu) -> dict[str, Any]:
    """A GPU as stored: its bandwidth only where NVML gave one (nvidia-smi gives none), so a
    GPU without it is stored as before the field existed."""
    stored = asdict(gpu)
    if stored["memory_bandwidth_gbs"] is None:
        del stored["memory_bandwidth_gbs"]
    return stored
