"""The agent's protocol: JSON lines over a channel (an SSH command's stdin and stdout).

One message a line, UTF-8 JSON, at most ``MAX_LINE_BYTES``. The near side (the workbench
the user runs) sends operations (``"op"``); the far side (``workbench agent``) answers with
messages (``"kind"``). Both sides say ``PROTOCOL`` first and refuse any other number, so a
mismatch is one clear line, never a misread field. No message can carry code: every value is
checked against a record's types (``wire``) before it is used.

Near to far (``op``):

- ``hello`` ``{protocol, version}``: the first line.
- ``check`` ``{model, server_bin}``: the host's facts for a run (``HostFacts``).
- ``run`` ``{experiment_toml, experiment_name, model, server_bin}``: run it; the far side
  writes its own session in its data folder.
- ``ping`` ``{seq}``: answered with ``pong``, for the clock offset and liveness.
- ``cancel``: stop the run or the load job, keeping what was measured (as closing stdin
  does).
- ``fetch`` ``{run_id}``: send that run's session file.
- ``load`` ``{job}``: prepare a client worker's requests (``run --load-from``): a
  ``client_workers.Job`` as ``wire.plain`` makes it, against the job's own base URL.
- ``go`` ``{t0_ns}``: the load job's t0, on the far clock.

Far to near (``kind``):

- ``hello`` ``{protocol, version, hostname}``.
- ``facts`` ``{facts}``: a ``HostFacts``.
- ``session`` ``{run_id, header}``: the run started; a ``SessionHeader``.
- ``events`` ``{events}``: engine events in order, each as ``wire.encode`` made it, with the
  far clock's own timestamps.
- ``ready`` ``{t_ns}``: the load job is prepared (the far clock then); its events follow
  its ``go``, and its ``done`` carries ``{load}``, its ``ClientLoad``.
- ``pong`` ``{seq, t_ns}``: the far clock (``perf_counter_ns``) when the ping was read.
- ``file`` ``{run_id, size, sha256}``, then ``chunk`` ``{data}`` (base64, in order), then
  ``file_end``: a fetched session file.
- ``error`` ``{text}``: what the far side could not do, in one line.
- ``done``: nothing more will come (of a run, or of a load job: then with its ``load``).

Protocol 2 added ``load``, ``go`` and ``ready``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import IO, Any, Protocol

from workbench.engine.base import untrusted
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.records import Hardware
from workbench.engine.remote import wire
from workbench.engine.store.checks import WRONG, typed

PROTOCOL = 2
MAX_LINE_BYTES = 8 * 1024 * 1024
MAX_EVENTS_PER_LINE = 4096
FILE_CHUNK_BYTES = 1024 * 1024  # of a fetched file, before base64
OPS = ("hello", "check", "run", "ping", "cancel", "fetch", "load", "go")
KINDS = (
    "hello",
    "facts",
    "session",
    "events",
    "ready",
    "pong",
    "file",
    "chunk",
    "file_end",
    "error",
    "done",
)


class ProtocolError(WorkbenchError):
    """The channel carried something that is no message of this protocol."""


@dataclass(frozen=True)
class HostFacts:
    """What a host has for a run, checked before it starts: one line per problem."""

    hostname: str
    workbench_version: str
    protocol: int
    os: str
    server_binary: str | None  # the llama-server that would run, and how it was found
    server_found_by: str | None
    model: str | None  # the model file that would run, as the host found it
    model_bytes: int | None
    gpus: tuple[str, ...]  # "NVIDIA H100 80GB (80 GiB)", "Apple M3 Max (Metal)"
    ram_bytes: int | None
    free_memory_bytes: int | None
    problems: tuple[str, ...]  # each a line a user can act on; none: ready to run


@dataclass(frozen=True)
class SessionHeader:
    """The far session's header, for the near copy: what ran, on what, from which clock."""

    name: str
    experiment_toml: str
    experiment_path: str | None
    mode: str
    base_url: str | None
    hardware: Hardware
    clock_origin_ns: int
    created_at: str


class HostTarget(Protocol):
    """A host a command can be started on, with the command's stdin and stdout as the
    channel (an SSH destination, or this machine's own processes)."""

    @property
    def name(self) -> str:
        """The host as the user named it (``gpubox``, ``user@host``): sessions and views
        say this."""
        ...

    def command(self, remote: list[str]) -> list[str]:
        """The argv that runs ``remote`` (words, not yet quoted) on the host."""
        ...


def dump(message: dict[str, Any]) -> bytes:
    """One message as its line; one too long for the other side to read is refused here."""
    line = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    data = line.encode("utf-8") + b"\n"
    if len(data) > MAX_LINE_BYTES:
        raise ProtocolError(f"a {message.get('op') or message.get('kind')} message is too long")
    return data


def read_line(stream: IO[bytes]) -> bytes | None:
    """The next line of ``stream`` (blocking), without reading past ``MAX_LINE_BYTES``;
    None at the end of the stream."""
    line = stream.readline(MAX_LINE_BYTES + 1)
    if not line:
        return None
    if not line.endswith(b"\n"):
        if len(line) > MAX_LINE_BYTES:
            raise ProtocolError(f"a line over {MAX_LINE_BYTES // (1024 * 1024)} MiB came")
        raise ProtocolError(f"the channel closed inside a line ({excerpt(line)})")
    return line


def parse(line: bytes, key: str) -> dict[str, Any]:
    """A line as a message whose ``key`` (``op`` or ``kind``) is one of this protocol's."""
    known = OPS if key == "op" else KINDS
    try:
        message = typed(json.loads(line), dict, "a message")
        word = typed(message.get(key), str, f"a message's {key}")
    except (*WRONG, UnicodeDecodeError):
        raise ProtocolError(f"not a message of the agent's protocol: {excerpt(line)}") from None
    if word not in known:
        raise ProtocolError(f"unknown {key} {untrusted.label(word)!r}: {excerpt(line)}")
    return message


def not_the_protocol(host: str, what: object) -> ProtocolError:
    """The one line for anything a host sent that this protocol does not allow."""
    return ProtocolError(f"{host} sent something that is not the agent's protocol: {what}")


def event_from(host: str, data: Any) -> Any:
    """An engine event ``host`` sent, checked (``wire.decode``)."""
    try:
        return wire.decode(data)
    except wire.WireError as exc:
        raise not_the_protocol(host, exc) from None


def read(cls: type, value: Any, what: str) -> Any:
    """A record of a message (``HostFacts``, ``SessionHeader``), every field checked."""
    try:
        return wire.read_record(cls, typed(value, dict, what), what)
    except (*WRONG, wire.WireError) as exc:
        raise ProtocolError(f"{what}: {exc}") from None


def excerpt(data: bytes, limit: int = 80) -> str:
    """The start of what came, as text safe for a terminal."""
    text = data[:limit].decode("utf-8", "replace").rstrip("\n")
    return repr(untrusted.printable(text)) + ("..." if len(data) > limit else "")
