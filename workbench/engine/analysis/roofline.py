"""Decode against the memory-bandwidth bound.

At small batch a decode step reads every weight once (shared by the batch) plus each
sequence's KV cache, so a request can decode at most ``bandwidth / (weights + batch x KV in
use)`` tokens per second. The machine's bandwidth is measured once (a large array copy) and
cached per machine; each configuration's measured per-request decode rate is shown as a
share of that bound.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

from workbench.engine.base.records import StartupFacts
from workbench.engine.measure.hardware import cpu_model
from workbench.engine.store import Session, open_session, summarize_config_records

MIB = 2**20
COPY_MIB = 256


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "concurrency-workbench" / "bandwidth.json"


def machine_key() -> str:
    return f"{platform.node()}|{cpu_model()}|{platform.machine()}"


def measure_bandwidth(copy_mib: int = COPY_MIB, repeats: int = 5) -> float:
    """Bytes per second of a large memory copy (read + write counted), best of ``repeats``."""
    import numpy as np

    source = np.ones(copy_mib * MIB // 8, dtype=np.float64)
    target = np.empty_like(source)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - start)
    return 2 * source.nbytes / best


def machine_bandwidth(refresh: bool = False) -> tuple[float, bool]:
    """(bytes/s, measured now?) from the per-machine cache, measuring when missing."""
    path = cache_file()
    key = machine_key()
    cached: dict[str, float] = {}
    with contextlib.suppress(OSError, ValueError):
        cached = json.loads(path.read_text())
    if not refresh and isinstance(cached.get(key), int | float):
        return float(cached[key]), False
    value = measure_bandwidth()
    cached[key] = value
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cached, indent=1))
    except OSError:
        pass  # a read-only home: measure again next time
    return value, True


@dataclass(frozen=True)
class RooflineRow:
    label: str
    slots: int
    batch: int
    weights_mib: float
    kv_in_use_mib: float
    bound_tok_s: float
    decode_tok_s: float | None

    @property
    def share(self) -> float | None:
        return None if self.decode_tok_s is None else self.decode_tok_s / self.bound_tok_s


def kv_bytes_per_token(facts: StartupFacts) -> float | None:
    """From what the server logged: its KV buffer over the cells it holds."""
    kv, per_slot = facts.kv_buffer_mib, facts.n_ctx_slot
    if kv is None or per_slot is None:
        return None
    slots = facts.n_slots if facts.n_slots is not None else 1
    cells = per_slot if facts.kv_unified else per_slot * slots
    return kv * MIB / cells if cells else None


def roofline(session: Session, bandwidth: float) -> list[RooflineRow]:
    rows = []
    for config in session.configs:
        facts = config.facts or StartupFacts()
        weights, per_token = facts.model_buffer_mib, kv_bytes_per_token(facts)
        if weights is None or per_token is None:
            continue  # external servers and failed starts log no buffers
        records = [r for r in session.records(config.index) if r.ok and not r.warmup]
        summary = summarize_config_records(config, records)
        # KV read per step for one sequence: its cached tokens, on average the prompt plus
        # half the output.
        lengths = [
            (r.timings or {}).get("prompt_n", 0) + (r.output_tokens[0] or 0) / 2 for r in records
        ]
        kv_in_use = (sum(lengths) / len(lengths) if lengths else 0.0) * per_token
        batch = max(1, min(summary.slots, summary.concurrency))
        step_bytes = weights * MIB + batch * kv_in_use
        rows.append(
            RooflineRow(
                config.label,
                summary.slots,
                batch,
                float(weights),
                kv_in_use / MIB,
                bandwidth / step_bytes,
                summary.mean.get("decode_tok_s"),
            )
        )
    return rows


@dataclass(frozen=True)
class RooflineReport:
    """A session's roofline with where its bandwidth came from."""

    rows: list[RooflineRow]
    bandwidth: float  # bytes per second
    how: str  # given / measured now / measured earlier on this machine
    recorded_on: str | None  # the session's machine, when it is not this one (bound unfair)


def session_roofline(
    path: str | Path, bandwidth_gbs: float | None = None, refresh: bool = False
) -> RooflineReport:
    """The roofline of a session file, against a given bandwidth or this machine's
    (measured after the file opened: a wrong path fails at once)."""
    with open_session(path) as session:
        if bandwidth_gbs:
            bandwidth, how = bandwidth_gbs * 1e9, "given"
        else:
            bandwidth, fresh = machine_bandwidth(refresh=refresh)
            how = "measured now" if fresh else "measured earlier on this machine"
        rows = roofline(session, bandwidth)
        host = session.hardware.hostname
    elsewhere = host if host and host != platform.node() and not bandwidth_gbs else None
    return RooflineReport(rows, bandwidth, how, elsewhere)
