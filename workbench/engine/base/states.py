"""Every state a run, a configuration, a server, a request or a notice can be in, once.

Each is a ``StrEnum``: its value is the text a session file, ``requests.csv`` and the JSON
export already hold, so the code speaks in members while what is stored and read keeps its
words. A member's ``label`` is how every view names it.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """How a whole run (a session) stands. ``RUNNING`` in a file whose writer never reached
    the end reads as ``INCOMPLETE``."""

    RUNNING = "running"
    COMPLETE = "complete"
    CANCELLED = "cancelled"
    FAILED = "failed"
    INCOMPLETE = "incomplete"


class ConfigStatus(StrEnum):
    """How one configuration of a sweep ended (``RUNNING`` while it runs)."""

    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    CANCELLED = "cancelled"


class ServerState(StrEnum):
    """A configuration's server, as its lifecycle and the runner report it."""

    IDLE = "idle"
    STARTING = "starting"
    HEALTHY = "healthy"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    CRASHED = "crashed"


class RequestState(StrEnum):
    """Where one request is, as the live views infer it from its events."""

    QUEUED = "queued"
    PREFILL = "prefill"
    DECODING = "decoding"
    DONE = "done"
    FAILED = "failed"

    @property
    def label(self) -> str:
        return _REQUEST_LABELS[self]

    @property
    def meaning(self) -> str:
        """What the state means, where a legend has room to say it."""
        return "waiting for a slot" if self is RequestState.QUEUED else ""

    @property
    def finished(self) -> bool:
        return self in (RequestState.DONE, RequestState.FAILED)


_REQUEST_LABELS = {
    RequestState.QUEUED: "queued",
    RequestState.PREFILL: "prefill",
    RequestState.DECODING: "decode",
    RequestState.DONE: "done",
    RequestState.FAILED: "failed",
}


class NoticeLevel(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
