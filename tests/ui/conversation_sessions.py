"""A conversations session made without a server: two users, two turns each, the second
user's second turn having lost its history from the server's cache."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.made_sessions import Config, build_session, request, startup_facts
from workbench.engine.base.records import RequestRecord

TOML = """[server]
slots = 1
[workload]
kind = "conversations"
users = 2
turns = 2
max_tokens = 12
"""
FIRST_PROMPT = 100  # each first turn's prompt, by the server's count
KEPT, LOST = 100, 10  # what each second turn found cached of it: u1 kept it, u2 lost it


def turn(index: int, user: int, n: int, submit_s: float, cached: int) -> RequestRecord:
    """Turn ``n`` of user ``user`` (1-based), as ``plan_conversations`` numbers it."""
    made = request(index, submit_s=submit_s, tokens=12, slot=0)
    prompt = FIRST_PROMPT if n == 1 else FIRST_PROMPT + 40
    timings = {**(made.timings or {}), "prompt_n": prompt - cached, "cache_n": cached}
    usage = {**(made.usage or {}), "prompt_tokens": prompt}
    return replace(made, conversation_id=f"r1u{user}", turn=n, usage=usage, timings=timings)


def conversation_records() -> list[RequestRecord]:
    return [
        turn(0, 1, 1, 0.0, 0),
        turn(1, 2, 1, 0.0, 0),
        turn(2, 1, 2, 2.0, KEPT),
        turn(3, 2, 2, 2.5, LOST),
    ]


def write_conversations(path: Path) -> Path:
    return build_session(path, TOML, [Config(conversation_records(), startup_facts(1, 8192))])
