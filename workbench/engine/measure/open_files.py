"""Room for many streams: each is a socket, and the usual soft limit of 1,024 open files
cannot hold 1,024 streams with the server's and the session's files besides."""

from __future__ import annotations

import contextlib
import resource

OPEN_FILES = 65_536  # room for the thousands of streams a bench or a big run opens


def raise_open_files(wanted: int = OPEN_FILES) -> int:
    """The soft open-files limit raised to ``wanted`` where the system allows (the usual
    1,024 cannot hold 1,024 streams and a listener); the limit now. Children inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        with contextlib.suppress(ValueError, OSError):  # macOS caps below an unlimited hard
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
