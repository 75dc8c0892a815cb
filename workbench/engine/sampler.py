"""Sampling the server while a run goes: process memory/CPU, ``/metrics`` and ``/slots``.

The sampler runs on its own thread with a blocking HTTP client, so its work never lands on
the event loop that timestamps token arrivals.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families

from workbench.engine.events import MetricsSample, ProcessSample, SlotsSample

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


def normalise_slots(data: Any) -> list[dict[str, Any]]:
    """Keep what the views need from ``/slots``: which slot is busy with which task."""
    if not isinstance(data, list):
        return []
    return [
        {
            "id": s.get("id"),
            "is_processing": bool(s.get("is_processing")),
            "id_task": s.get("id_task"),
        }
        for s in data
        if isinstance(s, dict)
    ]


class ProcessProbe:
    """RSS (including children) and CPU of a process tree."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self._known: dict[int, psutil.Process] = {pid: self.process}
        self.process.cpu_percent(None)

    def sample(self) -> tuple[int, float]:
        procs = [self.process]
        with contextlib.suppress(psutil.Error):
            for child in self.process.children(recursive=True):
                procs.append(self._known.setdefault(child.pid, child))
        rss, cpu = 0, 0.0
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                rss += proc.memory_info().rss
                cpu += proc.cpu_percent(None)
        return rss, cpu


class ServerSampler:
    """Samples a server at ``process_hz`` (psutil) and ``http_hz`` (/metrics, /slots)."""

    def __init__(
        self,
        emit: Emit,
        config_index: int,
        base_url: str,
        pid: int | None,
        process_hz: float = 10.0,
        http_hz: float = 4.0,
    ) -> None:
        self.emit = emit
        self.config_index = config_index
        self.base_url = base_url
        self.pid = pid
        self.process_interval = 1.0 / process_hz
        self.http_interval = 1.0 / http_hz
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="server-sampler", daemon=True)
        self.metrics_available = True
        self.slots_available = True

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _run(self) -> None:
        probe = None
        if self.pid is not None:
            with contextlib.suppress(psutil.Error):
                probe = ProcessProbe(self.pid)
        next_http = 0.0
        with httpx.Client(base_url=self.base_url, timeout=1.0) as client:
            while not self._stop.is_set():
                now = time.monotonic()
                if probe is not None:
                    self._sample_process(probe)
                if now >= next_http:
                    next_http = now + self.http_interval
                    self._sample_http(client)
                self._stop.wait(max(0.0, self.process_interval - (time.monotonic() - now)))

    def _sample_process(self, probe: ProcessProbe) -> None:
        try:
            rss, cpu = probe.sample()
        except psutil.Error:
            return
        if rss:
            self.emit(ProcessSample(self.config_index, time.perf_counter_ns(), rss, cpu))

    def _sample_http(self, client: httpx.Client) -> None:
        if self.metrics_available:
            try:
                response = client.get("/metrics")
                t_ns = time.perf_counter_ns()
                if response.status_code == 200:
                    self.emit(MetricsSample(self.config_index, t_ns, parse_metrics(response.text)))
                elif response.status_code in (404, 501):
                    self.metrics_available = False
            except (httpx.HTTPError, ValueError):
                pass
        if self.slots_available:
            try:
                response = client.get("/slots")
                t_ns = time.perf_counter_ns()
                if response.status_code == 200:
                    self.emit(
                        SlotsSample(self.config_index, t_ns, normalise_slots(response.json()))
                    )
                elif response.status_code in (404, 501):
                    self.slots_available = False
            except (httpx.HTTPError, ValueError):
                pass
