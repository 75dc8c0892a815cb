"""One small run, written event by event through the real session writer: every event the
writer records, with every column of every table given a value, so a test can compare what
comes back, and what lands on disk, value by value."""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.engine.base.records import Gpu, Hardware, RequestRecord, StartupFacts, TokenChunk
from workbench.engine.events import (
    ClientLoadMeasured,
    ConfigFinished,
    ConfigStarted,
    EventBus,
    ExperimentFinished,
    GpuSample,
    MetricsSample,
    Notice,
    ProcessSample,
    RequestFinished,
    ServerCounters,
    ServerReady,
    ServerStateChanged,
    SlotMatched,
    SlotsSample,
)
from workbench.engine.figures.client_limits import ClientLoad
from workbench.engine.store import SessionWriter, create_session


@dataclass(frozen=True)
class Config:
    """What the writer reads of a configuration (a RunConfig has more)."""

    index: int
    label: str
    server: dict[str, Any]
    workload: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"server": self.server, "workload": self.workload}


CONFIGS = (
    Config(0, "np=2", {"slots": 2, "ctx": 2048}, {"requests": 3, "max_tokens": 4}),
    Config(1, "np=4", {"slots": 4, "ctx": 2048}, {"requests": 3, "max_tokens": 4}),
)
HARDWARE = Hardware(
    hostname="known-host",
    os="Linux 6.1.0",
    os_version="#1 SMP",
    machine="x86_64",
    cpu_model="test CPU",
    cpu_physical_cores=4,
    cpu_logical_cores=8,
    ram_bytes=16 * 2**30,
    python="3.11.9",
    gpus=(Gpu(name="test GPU", memory_bytes=8 * 2**30, driver="550.54"),),
    apple_chip="test chip",
    llama_server="/opt/llama.cpp/llama-server",
    llama_server_build="version: 6123 (abc1234)",
)
COMMAND = ["llama-server", "-np", "2", "-c", "2048"]
FACTS = StartupFacts(
    n_slots=2,
    n_ctx_slot=1024,
    kv_unified=False,
    n_ctx=2048,
    kv_buffer_mib=45.0,
    model_buffer_mib=92.5,
    compute_buffer_mib=62.9,
    backend="CPU",
    build="6123 (abc1234)",
    devices=("CPU",),
)

WARMUP = RequestRecord(
    0, 0, 0, "warm", warmup=True, t_submit_ns=5, t_done_ns=50, http_status=200, ok=True
)
FULL = RequestRecord(
    0,
    0,
    1,
    "Tell me a story",
    prompt_tokens=7,
    t_intended_ns=90,
    t_scheduled_ns=95,
    t_ready_ns=97,
    connect_ns=3,
    t_connected_ns=99,
    t_submit_ns=100,
    t_first_token_ns=200,
    t_last_token_ns=400,
    t_done_ns=410,
    http_status=200,
    ok=True,
    finish_reason="length",
    usage={"completion_tokens": 3, "prompt_tokens": 7},
    timings={"prompt_ms": 12.5, "predicted_n": 3, "cache_n": 0},
    chunks=[TokenChunk(200, "Once"), TokenChunk(300, " upon"), TokenChunk(400, " a")],
)
FAILED = RequestRecord(
    0, 0, 2, "p", t_scheduled_ns=500, t_submit_ns=510, t_done_ns=520, http_status=503,
    error="HTTP 503: busy",
)  # fmt: skip
RECORDS = (WARMUP, FULL, FAILED)
SLOT = SlotMatched(0, 0, 1, 1)
LOAD = ClientLoadMeasured(0, 0, ClientLoad(2.5, 0.25, 0.5))
COUNTERS = ServerCounters(0, 0, {"llamacpp:tokens_predicted_total": 1.0}, {"x": 4.0})

EVENTS = (
    ConfigStarted(CONFIGS[0], 2),
    ServerStateChanged(0, "starting"),
    ServerStateChanged(0, "healthy", "200 OK"),
    ServerReady(0, "http://127.0.0.1:8080/v1", 4242, COMMAND, "/tmp/server.log", FACTS, 2),
    *(RequestFinished(r) for r in RECORDS),
    SLOT,
    ProcessSample(0, 1000, 123_456_789, 12.5),
    GpuSample(0, 1000, 5_000_000),
    MetricsSample(0, 1000, {"llamacpp:requests_processing": 2.0}),
    SlotsSample(0, 1000, [{"id": 0, "is_processing": True}]),
    LOAD,
    COUNTERS,
    Notice("warning", "the first notice", 0),
    ConfigFinished(0, "ok", None, "last lines of the log"),
    ConfigStarted(CONFIGS[1], 2),
    ServerStateChanged(1, "crashed", "exit code 1"),
    ConfigFinished(1, "failed", "the server crashed", "its tail"),
    Notice("info", "a notice of no configuration"),
    ExperimentFinished("complete"),
)


def write_known_run(path: Path) -> Path:
    """The run above, written the way a real run writes it."""
    create_session(path, "known", "[server]\n", "exp.toml", "managed", None, HARDWARE, 10)
    bus = EventBus()
    writer = SessionWriter(path, bus)
    for event in EVENTS:  # published before the writer starts: one batch, one transaction
        bus.publish(event)
    writer.start()
    writer.join(10)
    assert writer.error is None
    return path


# Values taken from clocks while writing: set to fixed ones, what is left depends only on
# the events.
STEADY = (
    "UPDATE session SET app_version = 'any', created_at = 'then', finished_at = 'later', "
    "wall_origin = 1.5",
    "UPDATE notices SET t_ns = 7",
    "UPDATE server_states SET t_ns = 7",
)


def steady_dump(path: Path, tables: bool = True) -> str:
    """The file's tables and every row as SQL text (``iterdump``), its version first;
    without ``tables``, the rows only (the tables are compared column by column)."""
    copy = path.with_name("steady-" + path.name)
    with (
        contextlib.closing(sqlite3.connect(path)) as source,
        contextlib.closing(sqlite3.connect(copy)) as target,
    ):
        source.backup(target)
    with contextlib.closing(sqlite3.connect(copy)) as conn:
        with conn:
            for statement in STEADY:
                conn.execute(statement)
        version = conn.execute("PRAGMA user_version").fetchone()
        dumped = [line for line in conn.iterdump() if tables or not line.startswith("CREATE")]
        lines = [f"PRAGMA user_version = {version[0]};", *dumped]
    copy.unlink()
    return "\n".join(lines) + "\n"


def load_dump(dump: str, path: Path) -> Path:
    """A session file made from a dump (``steady_dump``'s text)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executescript(dump)
    return path
