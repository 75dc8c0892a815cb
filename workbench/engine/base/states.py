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
    CANCELLED = "cancelled"
    """Cut short or left unsent by a stop (Ctrl-C, Stop): the user's doing, not a failure."""

    @property
    def label(self) -> str:
        return _REQUEST_LABELS[self]

    @property
    def meaning(self) -> str:
        """What the state means, where a legend has room to say it."""
        return _REQUEST_MEANINGS.get(self, "")

    @property
    def finished(self) -> bool:
        return self in (RequestState.DONE, RequestState.FAILED, RequestState.CANCELLED)

    @property
    def cut(self) -> bool:
        """Ended without its answer (failed or cancelled): its bar ends where it was cut."""
        return self in (RequestState.FAILED, RequestState.CANCELLED)


_REQUEST_LABELS = {
    RequestState.QUEUED: "queued",
    RequestState.PREFILL: "prefill",
    RequestState.DECODING: "decode",
    RequestState.DONE: "done",
    RequestState.FAILED: "failed",
    RequestState.CANCELLED: "cancelled",
}
_REQUEST_MEANINGS = {
    RequestState.QUEUED: "waiting for a slot",
    RequestState.CANCELLED: "stopped by the user",
}


class NoticeLevel(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
