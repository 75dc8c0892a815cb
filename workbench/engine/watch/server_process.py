"""The watched server's own process, where it runs on this machine: found by the port it
listens on, and taken only if that process is a llama-server (a container's proxy, or a
proxy in front, listens on the port too: its memory is not the server's)."""

from __future__ import annotations

import contextlib
from urllib.parse import urlsplit

import psutil

from workbench.engine.measure.sampler import ProcessProbe

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "0.0.0.0")
SERVER_NAMES = ("llama-server",)


def listening_pid(port: int) -> int | None:
    """The process listening on ``port`` on this machine, None where none is or the system
    does not say (macOS asks for more rights than a user has to list every socket)."""
    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                return conn.pid
    return None


def server_probe(base_url: str) -> tuple[ProcessProbe | None, str]:
    """A probe of the server's memory where it is a llama-server process on this machine,
    and what to say where it is not (empty where it is)."""
    parts = urlsplit(base_url)
    if parts.hostname not in LOCAL_HOSTS:
        return None, "the server is on another machine: its memory is not watched"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    pid = listening_pid(port)
    if pid is None:
        return None, f"no process of this machine's that this user may see listens on {port}"
    with contextlib.suppress(psutil.Error):
        name = psutil.Process(pid).name()
        if any(server in name for server in SERVER_NAMES):
            return ProcessProbe(pid), ""
        return None, f"{name} (pid {pid}) listens on {port}, not a llama-server: no memory"
    return None, f"the process listening on {port} could not be read"
