"""The raw record of one request: every timestamp, every chunk, what the server said.

Derived numbers (TTFT, TPOT, ...) are computed from these records by ``analysis``; records keep
only what was observed, so a session can be re-analysed later with better rules.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class TokenChunk:
    """One SSE chunk that carried generated text, and when its bytes arrived."""

    t_ns: int
    text: str


@dataclass
class RequestRecord:
    config_index: int
    repeat: int
    index: int
    prompt: str
    warmup: bool = False
    t_intended_ns: int | None = None  # due by the arrival schedule
    t_scheduled_ns: int | None = None  # woke up for its arrival (before any client-side limit)
    t_ready_ns: int | None = None  # free to go: due, and a client-side concurrency slot free
    connect_ns: int | None = None  # how long opening its connection took
    t_connected_ns: int | None = None  # when it was open (before t_ready when opened ahead)
    t_submit_ns: int | None = None
    t_first_token_ns: int | None = None
    t_last_token_ns: int | None = None
    t_done_ns: int | None = None
    http_status: int | None = None
    ok: bool = False
    error: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    chunks: list[TokenChunk] = field(default_factory=list)
    slot: int | None = None  # the server slot that served it, from the server's log

    @property
    def text(self) -> str:
        return "".join(c.text for c in self.chunks)

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
