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
from prometheus_client.parser import text_string_to_metric_families

from workbench.engine.events import GpuSample, MetricsSample, ProcessSample, SlotsSample
from workbench.engine.measure.hardware import GpuProbe
from workbench.engine.net.bounded_http import Answer, bounded_get
from workbench.engine.net.http_stream import ConnectFailed

Emit = Callable[[Any], None]


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text to ``{name: value}`` (llama.cpp's metrics carry no labels)."""
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = sample.name
            if sample.labels:
                key += "{" + ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items())) + "}"
            values[key] = float(sample.value)
    return values


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
    if answer is None or answer.status != 200:
        return None
    try:
        return parse_metrics(answer.text)
    except ValueError:
        return None


def normalise_slots(data: Any) -> list[dict[str, Any]]:
    """Keep what the views need from ``/slots``: which slot is busy with which task, and how
    many tokens it has decoded (what lets the window tell which request a slot serves)."""
    if not isinstance(data, list):
        return []
    out = []
    for s in data:
        if not isinstance(s, dict):
            continue
        next_token = s.get("next_token")
        first = next_token[0] if isinstance(next_token, list) and next_token else next_token
        decoded = first.get("n_decoded") if isinstance(first, dict) else None
        out.append(
            {
                "id": s.get("id"),
                "is_processing": bool(s.get("is_processing")),
                "id_task": s.get("id_task"),
                "n_decoded": decoded if isinstance(decoded, int) else None,
            }
        )
    return out


class ProcessProbe:
    """RSS (including children) and CPU of a process tree.

    Listing children scans every process on the machine, so it is done once a second, not
    at every sample."""

    CHILDREN_EVERY_S = 1.0

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.process.cpu_percent(None)
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
        rss = self.process.memory_info().rss  # raises if the server is gone
        cpu = self.process.cpu_percent(None)
        for child in self._children:
            with contextlib.suppress(psutil.Error):
                rss += child.memory_info().rss
                cpu += child.cpu_percent(None)
        return rss, cpu


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
    """Samples a server at ``process_hz`` (psutil) and ``http_hz`` (/metrics, /slots), on
    two threads, so a slow HTTP answer never leaves a gap in the memory curve."""

    HTTP_DEADLINE_S = 1.0  # a whole answer, however the server drips it

    def __init__(
        self,
        emit: Emit,
        config_index: int,
        base_url: str,
        pid: int | None,
        process_hz: float = 10.0,
        http_hz: float = 4.0,
        headers: dict[str, str] | None = None,
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
        self._gpu = GpuProbe() if self._probe is not None else None
        self._threads = [_Ticker("sampler-http", 1.0 / http_hz, self._sample_http, self._stop)]
        if self._probe is not None:
            self._threads.append(
                _Ticker("sampler-process", 1.0 / process_hz, self._sample_process, self._stop)
            )

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=5.0)
        if self._gpu is not None:
            self._gpu.close()

    def _sample_process(self) -> None:
        assert self._probe is not None
        try:
            rss, cpu = self._probe.sample()
        except psutil.Error:
            return
        t_ns = time.perf_counter_ns()
        self.emit(ProcessSample(self.config_index, t_ns, rss, cpu))
        if self._gpu is not None and self._gpu.available:
            gpu = self._gpu.used_by(self._probe.pids())
            if gpu is not None:
                self.emit(GpuSample(self.config_index, t_ns, gpu))

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
