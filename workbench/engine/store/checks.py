"""A session file can come from anyone: every value read from one is checked before use.

A value of the wrong type raises ``TypeError``, a JSON text that does not parse
``ValueError``; the reader turns either into one ``SessionError`` naming the file. Inside
the startup facts and the hardware fingerprint, which views show and summaries fall back
from, a wrong value reads as unknown instead, so one odd entry costs only itself.
"""

from __future__ import annotations

import json
import math
from typing import Any

from workbench.engine.base.records import Gpu, Hardware, StartupFacts

INT_OR_NONE = (int, type(None))
TEXT_OR_NONE = (str, type(None))


def typed(value: Any, kinds: type | tuple[type, ...], what: str) -> Any:
    """``value`` if it has one of ``kinds`` (None passes where ``kinds`` has NoneType; a
    bool is no int here)."""
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise TypeError(f"{what} is a {type(value).__name__}")
    return value


def json_dict(text: Any, what: str, optional: bool = True) -> dict[str, Any] | None:
    """A JSON object stored as text (None stays None where ``optional``)."""
    if text is None and optional:
        return None
    value = json.loads(typed(text, str, what))
    return typed(value, dict, what)


def json_strings(text: Any, what: str) -> list[str] | None:
    """A list of strings stored as JSON text (none when empty)."""
    value = json.loads(text) if text else None
    if value is not None and not (
        isinstance(value, list) and all(isinstance(a, str) for a in value)
    ):
        raise TypeError(f"{what} is not a list of strings")
    return value


def counters(text: Any) -> dict[str, float] | None:
    """Stored /metrics, kept only if it is what was written: names to numbers (anything
    else reads as not recorded, never as an error)."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return {
        str(k): float(v)
        for k, v in value.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


def _kind(value: Any, kind: type) -> Any:
    """``value`` if it is a ``kind``, else None (a bool is no int here)."""
    if isinstance(value, bool) and kind is not bool:
        return None
    return value if isinstance(value, kind) else None


def _mib(value: Any) -> float | None:
    """A buffer size: a finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return value


def startup_facts(stored: dict[str, Any]) -> StartupFacts:
    """Stored startup facts: a value of the wrong type reads as not stated (None), an
    unknown key is dropped."""
    devices = stored.get("devices")
    return StartupFacts(
        n_slots=_kind(stored.get("n_slots"), int),
        n_ctx_slot=_kind(stored.get("n_ctx_slot"), int),
        kv_unified=_kind(stored.get("kv_unified"), bool),
        n_ctx=_kind(stored.get("n_ctx"), int),
        kv_buffer_mib=_mib(stored.get("kv_buffer_mib")),
        model_buffer_mib=_mib(stored.get("model_buffer_mib")),
        compute_buffer_mib=_mib(stored.get("compute_buffer_mib")),
        backend=_kind(stored.get("backend"), str),
        build=_kind(stored.get("build"), str),
        devices=tuple(d for d in devices if isinstance(d, str))
        if isinstance(devices, list)
        else (),
    )


def fingerprint(stored: dict[str, Any]) -> Hardware:
    """A stored fingerprint: a value of the wrong type reads as not known (None), a GPU
    entry that is not an object is dropped, and so is an unknown key."""
    gpus = stored.get("gpus")
    return Hardware(
        hostname=_kind(stored.get("hostname"), str),
        os=_kind(stored.get("os"), str),
        os_version=_kind(stored.get("os_version"), str),
        machine=_kind(stored.get("machine"), str),
        cpu_model=_kind(stored.get("cpu_model"), str),
        cpu_physical_cores=_kind(stored.get("cpu_physical_cores"), int),
        cpu_logical_cores=_kind(stored.get("cpu_logical_cores"), int),
        ram_bytes=_kind(stored.get("ram_bytes"), int),
        python=_kind(stored.get("python"), str),
        gpus=tuple(
            Gpu(
                name=_kind(g.get("name"), str),
                memory_bytes=_kind(g.get("memory_bytes"), int),
                driver=_kind(g.get("driver"), str),
            )
            for g in gpus
            if isinstance(g, dict)
        )
        if isinstance(gpus, list)
        else (),
        apple_chip=_kind(stored.get("apple_chip"), str),
        llama_server=_kind(stored.get("llama_server"), str),
        llama_server_build=_kind(stored.get("llama_server_build"), str),
    )
