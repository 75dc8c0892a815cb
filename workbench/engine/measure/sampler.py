"""Sampling the server while a run goes: process memory/CPU, ``/metrics`` and ``/slots``.

The sampler runs on its own thread with a blocking HTTP client, so its work never lands on
the event loop that timestamps token arrivals.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from workbench.engine.base.server_kinds import parse_metrics
from workbench.engine.base.states import NoticeLevel
from workbench.engine.events import GpuSample, MetricsSample, Notice, ProcessSample, SlotsSample
from workbench.engine.figures.machine_load import MachineLoad
from workbench.engine.measure.gpu_memory import GpuProbe
from workbench.engine.measure.machine_load import MachineMeter
from workbench.engine.measure.process_memory import process_measure
from workbench.engine.net.bounded_http import Answer, bounded_get
from workbench.engine.net.http_stream import ConnectFailed

Emit = Callable[[Any], None]

COUNTERS_TIMEOUT_S = 2.0
MAX_METRICS_BYTES = 4 * 1024 * 1024


def fetch_counters(base_url: str, headers: dict[str, str] | None = None) -> dict[str, float] | None:
    """The server's /metrics now, or None when it exposes none. Blocking: call it off the
    measuring loop (``asyncio.to_thread``). The cross-checks take one just before and one
    just after each repeat, so their difference is exactly that repeat's work."""
    try:
        answer = bounded_get(base_url, "/metrics", headers, MAX_METRICS_BYTES, COUNTERS_TIMEOUT_S)
    except ConnectFailed:
        return None
    return metrics_of(answer)


def metrics_of(answer: Answer | None) -> dict[str, float] | None:
    """A ``/metrics`` answer's values, or None where it is no page of them."""
    if answer is None or answer.status != 200:
        return None
    try:
        return parse_metrics(answer.text)
    except ValueError:
        return None


MAX_SLOTS = 1024  # the most slots the workbench starts a server with (-np)
MAX_COUNT = 2**31 - 1  # llama.cpp counts slots and tokens in int32
SLOT_COUNTS = ("n_ctx", "n_prompt_tokens", "n_prompt_tokens_processed", "n_prompt_tokens_cache")


def _count(value: Any) -> int | None:
    """A slot id or token count from the server: a whole number in llama.cpp's range, or
    None (the answer is untrusted: a string, a float, a negative or a boolean is no count)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        return None
    return value


def normalise_slots(data: Any) -> list[dict[str, Any]]:
    """Keep what the views need from ``/slots``: which slot is busy with which task, how many
    tokens it has decoded (what lets the window tell which request a slot serves), and the
    counts that say how much of its context the task holds (``slot_context_share``).

    Every kept value is checked, as the answer may come from any server: ids and counts are
    whole numbers in llama.cpp's range or None, and at most ``MAX_SLOTS`` slots are kept."""
    if not isinstance(data, list):
        return []
    out = []
    for s in data[:MAX_SLOTS]:
        if not isinstance(s, dict):
            continue
        next_token = s.get("next_token")
        first = next_token[0] if isinstance(next_token, list) and next_token else next_token
        slot_id = _count(s.get("id"))
        out.append(
            {
                "id": slot_id if slot_id is not None and slot_id < MAX_SLOTS else None,
                "is_processing": s.get("is_processing") is True,
                "id_task": _count(s.get("id_task")),
                "n_decoded": _count(first.get("n_decoded")) if isinstance(first, dict) else None,
                **{name: _count(s.get(name)) for name in SLOT_COUNTS},
            }
        )
    return out


def slot_context_share(slot: dict[str, Any]) -> float | None:
    """How much of a slot's context (0 to 1) its current task holds, from one ``/slots``
    entry; None when the server does not say (no ``n_ctx``, or no prompt counts: builds
    before llama.cpp added them, and sessions recorded before the workbench kept them).

    Tokens held = the larger of ``n_prompt_tokens`` and cached + processed prompt tokens +
    decoded tokens, over the slot's ``n_ctx`` (at most 1). What the real server reports
    (SmolLM2-135M, -np 2 -c 4096, a 1,450-token prompt, 200 tokens out, sampled at 4 Hz):

    - Decoding: exact. ``n_prompt_tokens`` is the slot's whole sequence, prompt and tokens
      out so far (1,451 with 1 decoded, 1,648 with 198), and it equals cached + processed +
      decoded (0 + 1,450 + 1; 649 + 1 + 1 for a prompt found in the cache): the tokens
      whose K and V the slot's cells hold, give or take the one token in flight.
    - Prefill: an upper bound. From the first sample the slot holds the task,
      ``n_prompt_tokens`` is the whole prompt (1,450) while ``n_prompt_tokens_processed``
      stays 0 until the prefill ends (all 28 s of it on a busy two-core machine), so the
      share is the whole prompt's from the start, though the cells fill batch by batch:
      ``/slots`` does not say how far a prefill is.
    - Idle: 0. A finished slot keeps its last sequence as a prompt cache (1,649 tokens,
      ``is_processing`` false) that the next task reuses or overwrites; no request holds it.

    With ``--kv-unified`` every slot's ``n_ctx`` is the whole pool the slots share (4,096 for
    -np 2 -c 4096, measured): each share is then of that pool, and they add up to at most 1."""
    n_ctx = _count(slot.get("n_ctx"))
    if not n_ctx:
        return None
    if slot.get("is_processing") is not True:
        return 0.0
    sequence = _count(slot.get("n_prompt_tokens"))
    processed = _count(slot.get("n_prompt_tokens_processed"))
    if sequence is None and processed is None:
        return None
    parts = (
        processed,
        _count(slot.get("n_prompt_tokens_cache")),
        _count(slot.get("n_decoded")),
    )
    held = max(sequence or 0, sum(p for p in parts if p is not None))
    return min(held, n_ctx) / n_ctx


class ProcessProbe:
    """Memory (including children) and CPU of a process tree. The memory is what the
    platform's own monitor shows (``process_memory``): the physical footprint on macOS, the
    RSS elsewhere.

    Listing children scans every process on the machine, so it is done once a second, not
    at every sample."""

    CHILDREN_EVERY_S = 1.0

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.process.cpu_percent(None)
        self.memory = process_measure()
        self._children: list[psutil.Process] = []
        self._children_at = 0.0

    def pids(self) -> set[int]:
        return {self.process.pid, *(c.pid for c in self._children)}

    def sample(self) -> tuple[int, float]:
        now = time.monotonic()
        if now - self._children_at >= self.CHILDREN_EVERY_S:
            self._children_at = now
            with contextlib.suppress(psutil.Error):
                known = {c.pid: c for c in self._children}
                self._children = [
                    known.get(c.pid, c) for c in self.process.children(recursive=True)
                ]
        memory = self.memory.read(self.process)  # raises if the server is gone
        cpu = self.process.cpu_percent(None)
        for child in self._children:
            with contextlib.suppress(psutil.Error):
                memory += self.memory.read(child)
                cpu += child.cpu_percent(None)
        return memory, cpu


_told: set[str] = set()
_told_lock = threading.Lock()


def tell_once(emit: Emit, level: NoticeLevel, text: str, config_index: int | None) -> None:
    """A notice about the machine (how memory is counted, why GPU memory is missing) is the
    same for every repeat and configuration: it is emitted once per process."""
    with _told_lock:
        if text in _told:
            return
        _told.add(text)
    emit(Notice(level, text, config_index))


class _Ticker(threading.Thread):
    """Calls ``work`` on absolute ticks (no drift) until stopped."""

    def __init__(
        self, name: str, interval: float, work: Callable[[], None], stop: threading.Event
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.interval, self.work, self.stop_event = interval, work, stop

    def run(self) -> None:
        next_tick = time.monotonic()
        while not self.stop_event.is_set():
            # A sample the server broke is no sample, never a traceback.
            with contextlib.suppress(Exception):
                self.work()
            next_tick += self.interval
            delay = next_tick - time.monotonic()
            if delay < 0:  # fell behind (a slow answer): skip the missed ticks
                next_tick = time.monotonic()
                delay = 0
            self.stop_event.wait(delay)


class ServerSampler:
    """Samples a server at ``process_hz`` (psutil), ``gpu_hz`` (NVML) and ``http_hz``
    (/metrics, /slots), each on its own thread, so a slow HTTP answer or a slow NVML query
    never leaves a gap in the memory curve."""

    HTTP_DEADLINE_S = 1.0  # a whole answer, however the server drips it
    GPU_JOIN_S = 1.5  # an NVML call cannot be interrupted: stop waits this long for it

    def __init__(
        self,
        emit: Emit,
        config_index: int,
        base_url: str,
        pid: int | None,
        process_hz: float = 10.0,
        http_hz: float = 4.0,
        headers: dict[str, str] | None = None,
        gpu_hz: float = 4.0,
    ) -> None:
        self.emit = emit
        self.config_index = config_index
        self.base_url = base_url
        self.metrics_available = True
        self.slots_available = True
        self._stop = threading.Event()
        self._probe: ProcessProbe | None = None
        if pid is not None:
            with contextlib.suppress(psutil.Error):
                self._probe = ProcessProbe(pid)
        self._headers = headers
        self._pid = pid
        self._machine: MachineMeter | None = None
        self._gpu: GpuProbe | None = None
        self._gpu_thread: _Ticker | None = None
        self._threads = [_Ticker("sampler-http", 1.0 / http_hz, self._sample_http, self._stop)]
        if self._probe is not None:
            self._threads.append(
                _Ticker("sampler-process", 1.0 / process_hz, self._sample_process, self._stop)
            )
            self._gpu = GpuProbe()  # NVML starts on the GPU thread, never on the caller's
            self._gpu_thread = _Ticker("sampler-gpu", 1.0 / gpu_hz, self._sample_gpu, self._stop)
            self._threads.append(self._gpu_thread)
            if (notice := self._probe.memory.notice) is not None:
                level = (
                    NoticeLevel.WARNING if self._probe.memory.fallback_reason else NoticeLevel.INFO
                )
                tell_once(emit, level, notice, None)

    MACHINE_HZ = 1.0  # CPU frequency is a state the OS updates about this often

    def start(self) -> None:
        # What else used the machine, from now to ``machine_load``: the server's machine is
        # this one only when the workbench started it (a pid); else its load is unknown.
        self._machine = MachineMeter(self._pid, judged=self._pid is not None)
        self._threads.append(
            _Ticker("sampler-machine", 1.0 / self.MACHINE_HZ, self._machine.sample, self._stop)
        )
        for thread in self._threads:
            thread.start()

    def machine_load(self) -> MachineLoad | None:
        """What else used the machine between ``start`` and now (after ``stop``: the run)."""
        if self._machine is None:
            return None
        gpu = self._gpu.other_processes if self._gpu is not None else None
        return self._machine.read(gpu)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=self.GPU_JOIN_S if thread is self._gpu_thread else 5.0)
        if self._gpu is not None:
            self._gpu.finish()
            for level, text in self._gpu.notices:
                tell_once(self.emit, level, text, self.config_index)

    def _sample_process(self) -> None:
        assert self._probe is not None
        try:
            memory, cpu = self._probe.sample()
        except psutil.Error:
            return
        self.emit(ProcessSample(self.config_index, time.perf_counter_ns(), memory, cpu))

    def _sample_gpu(self) -> None:
        assert self._probe is not None and self._gpu is not None
        if self._gpu.stopped:
            return
        used = self._gpu.sample(self._probe.pids())
        # A query that returned after stop() gave up waiting for it belongs to no run now.
        if used is not None and not self._stop.is_set():
            self.emit(GpuSample(self.config_index, time.perf_counter_ns(), used))

    def _get(self, path: str) -> Answer | None:
        try:
            return bounded_get(
                self.base_url, path, self._headers, MAX_METRICS_BYTES, self.HTTP_DEADLINE_S
            )
        except ConnectFailed:
            return None

    def _sample_http(self) -> None:
        if self.metrics_available and (response := self._get("/metrics")) is not None:
            t_ns = time.perf_counter_ns()
            if response.status == 200:
                with contextlib.suppress(ValueError):
                    self.emit(MetricsSample(self.config_index, t_ns, parse_metrics(response.text)))
            elif response.status in (404, 501):
                self.metrics_available = False
        if self.slots_available and (response := self._get("/slots")) is not None:
            t_ns = time.perf_counter_ns()
            if response.status == 200:
                with contextlib.suppress(ValueError):
                    slots = normalise_slots(json.loads(response.body))
                    self.emit(SlotsSample(self.config_index, t_ns, slots))
            elif response.status in (404, 501):
                self.slots_available = False
