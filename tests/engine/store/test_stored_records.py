"""Startup facts and the hardware fingerprint as a session keeps them: every field survives the
round trip, the JSON has the keys it always had, and a file from anyone (a value of the wrong
type, an unknown key, a GPU that is no object) reads back as what can be trusted, the rest
unknown, without stopping any view."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from dataclasses import fields
from pathlib import Path

from tests.made_sessions import Config, build_session, request
from workbench.cli.main import main
from workbench.engine.base.records import Gpu, Hardware, StartupFacts
from workbench.engine.store import open_session
from workbench.engine.store.checks import read_json

TOML = "[server]\nslots = 4\n[workload]\nrequests = 1\n"

# Every field holds a value other than its default, so a field lost on the way shows.
EVERY_FACT = StartupFacts(
    n_slots=4,
    n_ctx_slot=2048,
    kv_unified=True,
    n_ctx=8192,
    kv_buffer_mib=180.0,
    model_buffer_mib=92.1,
    compute_buffer_mib=62.9,
    backend="CUDA",
    build="6123 (abc1234)",
    devices=("CUDA0", "CUDA1"),
    layers_offloaded=31,
    layers_total=31,
    metal_working_set_bytes=11_453_250_000,
    output_buffer_mib=0.75,
    state_buffer_mib=2.67,
    n_ctx_train=8192,
)
EVERY_PART = Hardware(
    hostname="lab-host",
    os="Linux 6.1.0",
    os_version="#1 SMP",
    machine="x86_64",
    cpu_model="Lab CPU 16-Core",
    cpu_physical_cores=16,
    cpu_logical_cores=32,
    ram_bytes=64 * 2**30,
    python="3.11.9",
    gpus=(
        Gpu(name="H200", memory_bytes=141 * 2**30, driver="550.54", memory_bandwidth_gbs=4916.7),
        Gpu(name="L4", memory_bytes=24 * 2**30, driver="550.54", memory_bandwidth_gbs=300.0),
    ),
    apple_chip="Apple M4",
    llama_server="/opt/llama.cpp/llama-server",
    llama_server_build="version: 6123 (abc1234); built with cc 12.2.0",
    process_memory="physical footprint",
)

WRONG_FACTS = """{
    "n_slots": "4", "n_ctx_slot": true, "kv_unified": 1, "n_ctx": 8192.0,
    "kv_buffer_mib": "180", "model_buffer_mib": NaN, "compute_buffer_mib": 62,
    "backend": ["CPU"], "build": null, "devices": ["CPU", 3, null], "flash_attn": true
}"""
WRONG_HARDWARE = """{
    "hostname": 7, "os": "Linux", "cpu": "a key no version wrote", "cpu_model": null,
    "cpu_physical_cores": "4", "cpu_logical_cores": 8.0, "ram_bytes": true,
    "gpus": [{"name": "H200", "memory_bytes": "lots", "driver": 550}, "not a GPU", {"vendor": 1}],
    "apple_chip": {"chip": "M4"}, "llama_server_build": "b6123"
}"""


def session_with(tmp_path: Path, facts: StartupFacts, hardware: Hardware) -> Path:
    return build_session(
        tmp_path / "s.session.sqlite", TOML, [Config([request(0)], facts)], hardware=hardware
    )


def stored(path: Path, column: str, table: str) -> str:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute(f"SELECT {column} FROM {table}").fetchone()[0]


def test_every_field_survives_a_session(tmp_path):
    for record in (EVERY_FACT, EVERY_PART, *EVERY_PART.gpus):
        assert all(getattr(record, f.name) not in (None, ()) for f in fields(record))
    with open_session(session_with(tmp_path, EVERY_FACT, EVERY_PART)) as session:
        assert session.hardware == EVERY_PART
        assert session.configs[0].facts == EVERY_FACT


def test_the_stored_json_has_the_keys_it_always_had(tmp_path):
    """One key per field, in the order the dicts of earlier versions had; the server's binary
    and build only where the workbench started the server (an external session has none)."""
    path = session_with(tmp_path, EVERY_FACT, EVERY_PART)
    facts = json.loads(stored(path, "facts_json", "configs"))
    assert list(facts) == [f.name for f in fields(StartupFacts)]
    assert facts["devices"] == ["CUDA0", "CUDA1"]
    hardware = json.loads(stored(path, "hardware_json", "session"))
    assert list(hardware) == [f.name for f in fields(Hardware)]
    assert hardware["gpus"][0] == {
        "name": "H200",
        "memory_bytes": 141 * 2**30,
        "driver": "550.54",
        "memory_bandwidth_gbs": 4916.7,
    }
    external = Hardware(hostname="lab-host").to_dict()
    assert "llama_server" not in external and "llama_server_build" not in external
    assert list(external)[-1] == "apple_chip"


def startup_facts(stored: dict) -> StartupFacts:
    return read_json(StartupFacts, json.dumps(stored), "facts_json")


def fingerprint(stored: dict) -> Hardware:
    return read_json(Hardware, json.dumps(stored), "hardware_json")


def test_wrong_types_and_unknown_keys_read_back_as_unknown():
    assert startup_facts(json.loads(WRONG_FACTS)) == StartupFacts(
        compute_buffer_mib=62, devices=("CPU",)
    )
    assert fingerprint(json.loads(WRONG_HARDWARE)) == Hardware(
        os="Linux", gpus=(Gpu(name="H200"), Gpu()), llama_server_build="b6123"
    )
    assert fingerprint({"gpus": {"name": "H200"}, "os_version": ["#1"]}) == Hardware()
    assert startup_facts({"devices": "CPU"}) == StartupFacts()


def test_a_session_with_odd_facts_and_hardware_opens_and_shows(tmp_path, capsys):
    path = session_with(tmp_path, EVERY_FACT, EVERY_PART)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE configs SET facts_json = ?", (WRONG_FACTS,))
        conn.execute("UPDATE session SET hardware_json = ?", (WRONG_HARDWARE,))
    with open_session(path) as session:
        assert session.configs[0].facts == StartupFacts(compute_buffer_mib=62, devices=("CPU",))
        assert session.hardware.gpus == (Gpu(name="H200"), Gpu())
        assert session.hardware.machine_name == "?"
    assert main(["show", str(path)]) == 0
    assert main(["export", str(path), "--json", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert "Traceback" not in out and "H200, ?" in out
    document = json.loads((tmp_path / "s.json").read_text())
    assert document["hardware"]["gpus"] == [
        {"name": "H200", "memory_bytes": None, "driver": None},
        {"name": None, "memory_bytes": None, "driver": None},
    ]
    assert "cpu" not in document["hardware"]
    assert "flash_attn" not in document["configs"][0]["facts"]


def test_the_machine_is_named_by_its_apple_chip_else_its_cpu():
    assert EVERY_PART.machine_name == "Apple M4"
    assert Hardware(cpu_model="Lab CPU").machine_name == "Lab CPU"
    assert Hardware().machine_name == "?"
