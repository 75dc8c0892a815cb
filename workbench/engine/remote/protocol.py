"""The agent's protocol: JSON lines over a channel (an SSH command's stdin and stdout).

One message a line, UTF-8 JSON, at most ``MAX_LINE_BYTES``. The near side (the workbench
the user runs) sends operations (``"op"``); the far side (``workbench agent``) answers with
messages (``"kind"``). Both sides say ``PROTOCOL`` first and refuse any other number, so a
mismatch is one clear line, never a misread field. No message can carry code: each is a
model below, one of a union tagged by its ``op`` or ``kind``, and ``parse`` reads a line into
it through pydantic (``wire.Wire``), every field checked against its type and bounds before
anyone uses it. A field a model does not know is ignored, as protocol 2 always has.

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

import base64
import binascii
import json
from dataclasses import dataclass
from typing import IO, Annotated, Any, Literal, Protocol, Union, get_args

from pydantic import AfterValidator, Field, create_model

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.escaping import printable
from workbench.engine.base.records import Hardware
from workbench.engine.base.validation import as_text, validated
from workbench.engine.figures.client_limits import ClientLoad
from workbench.engine.measure.client_workers import Job
from workbench.engine.remote.wire import Bounded, Event, Wire

PROTOCOL = 2
MAX_LINE_BYTES = 8 * 1024 * 1024
MAX_EVENTS_PER_LINE = 4096
FILE_CHUNK_BYTES = 1024 * 1024  # of a fetched file, before base64
MAX_FETCH_BYTES = 16 * 2**30  # a session of many long runs is a few GiB at the most
CLOCK_BOUND = 2**62  # no perf_counter_ns reading is larger; an offset made of one fits 64 bits


class ProtocolError(WorkbenchError):
    """The channel carried something that is no message of this protocol."""


class Refused(ProtocolError):
    """A message of this protocol (its ``op`` or ``kind`` is known) whose fields are not
    the protocol's: the agent answers it with an error and goes on."""

    def __init__(self, word: str, text: str) -> None:
        super().__init__(text)
        self.word = word


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


def _base64(text: bytes) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("is not base64") from None


# A protocol's number: whatever it is, a short one.
ProtocolNumber = Annotated[int, Field(ge=0, lt=2**31)]
# A ``perf_counter_ns`` reading (of either clock).
ClockReading = Annotated[int, Field(ge=0, lt=CLOCK_BOUND)]
RunId = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]  # a run's folder on the far side

# -- near to far: operations --------------------------------------------------------------


class HelloOp(Wire):
    op: Literal["hello"]
    protocol: ProtocolNumber
    version: str


class CheckOp(Wire):
    op: Literal["check"]
    model: str | None = None
    server_bin: str | None = None


class RunOp(Wire):
    op: Literal["run"]
    experiment_toml: str
    experiment_name: str | None = None
    model: str | None = None
    server_bin: str | None = None


class PingOp(Wire):
    op: Literal["ping"]
    seq: int


class CancelOp(Wire):
    op: Literal["cancel"]


class FetchOp(Wire):
    op: Literal["fetch"]
    run_id: RunId


class LoadOp(Wire):
    op: Literal["load"]
    job: Annotated[Job, Bounded]  # its bounds across fields: ``load_worker.checked_job``


class GoOp(Wire):
    op: Literal["go"]
    t0_ns: ClockReading


OP_MODELS = (HelloOp, CheckOp, RunOp, PingOp, CancelOp, FetchOp, LoadOp, GoOp)
Op = Annotated[Union[OP_MODELS], Field(discriminator="op")]  # noqa: UP007 (a tuple's union)

# -- far to near: messages ----------------------------------------------------------------


class HelloMessage(Wire):
    kind: Literal["hello"]
    protocol: ProtocolNumber
    version: str
    hostname: str | None = None  # protocol 1 did not say it


class FactsMessage(Wire):
    kind: Literal["facts"]
    facts: Annotated[HostFacts, Bounded]


class SessionMessage(Wire):
    kind: Literal["session"]
    run_id: RunId
    header: Annotated[SessionHeader, Bounded]


class EventsMessage(Wire):
    kind: Literal["events"]
    events: Annotated[list[Event], Field(max_length=MAX_EVENTS_PER_LINE)]


class ReadyMessage(Wire):
    kind: Literal["ready"]
    t_ns: ClockReading


class PongMessage(Wire):
    kind: Literal["pong"]
    seq: int
    t_ns: ClockReading


class FileMessage(Wire):
    kind: Literal["file"]
    run_id: RunId
    size: Annotated[int, Field(gt=0, le=MAX_FETCH_BYTES)]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class ChunkMessage(Wire):
    kind: Literal["chunk"]
    data: Annotated[bytes, AfterValidator(_base64)]  # base64 text on the wire, its bytes here


class FileEndMessage(Wire):
    kind: Literal["file_end"]


class ErrorMessage(Wire):
    kind: Literal["error"]
    text: str  # untrusted: shown through ``link.error_text``


class DoneMessage(Wire):
    kind: Literal["done"]
    load: Annotated[ClientLoad, Bounded] | None = None  # of a load job; a run's has none


MESSAGE_MODELS = (
    HelloMessage,
    FactsMessage,
    SessionMessage,
    EventsMessage,
    ReadyMessage,
    PongMessage,
    FileMessage,
    ChunkMessage,
    FileEndMessage,
    ErrorMessage,
    DoneMessage,
)
Message = Annotated[Union[MESSAGE_MODELS], Field(discriminator="kind")]  # noqa: UP007


def _tags(models: tuple[type[Wire], ...], key: str) -> tuple[str, ...]:
    return tuple(get_args(m.model_fields[key].annotation)[0] for m in models)


OPS = _tags(OP_MODELS, "op")
KINDS = _tags(MESSAGE_MODELS, "kind")


_MESSAGES: dict[str, Any] = {"op": Op, "kind": Message}
# A message's word alone: whether a line that is no message is at least one of some kind.
_WORDS = {key: create_model(f"{key}_word", __base__=Wire, **{key: (str, ...)}) for key in _MESSAGES}


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


def parse(line: bytes, key: str) -> Any:
    """A line as a message whose ``key`` (``op``: an ``Op``, or ``kind``: a ``Message``) is
    one of this protocol's, every field checked. A line that is none is a ``ProtocolError``;
    one of a known ``op`` or ``kind`` whose fields are wrong is ``Refused``, naming the
    field."""
    try:
        return validated(_MESSAGES[key], line, "a message", ProtocolError, json=True)
    except ProtocolError as exc:
        refused = printable(str(exc))
    try:  # what went wrong: the message itself, or a field of one
        word = getattr(validated(_WORDS[key], line, "a message", ProtocolError, json=True), key)
    except ProtocolError:
        raise ProtocolError(f"not a message of the agent's protocol: {excerpt(line)}") from None
    if word not in (OPS if key == "op" else KINDS):
        raise ProtocolError(f"unknown {key} {printable(as_text(word, 64))!r}: {excerpt(line)}")
    raise Refused(word, refused)


def not_the_protocol(host: str, what: object) -> ProtocolError:
    """The one line for anything a host sent that this protocol does not allow."""
    return ProtocolError(f"{host} sent something that is not the agent's protocol: {what}")


def excerpt(data: bytes, limit: int = 80) -> str:
    """The start of what came, as text safe for a terminal."""
    text = data[:limit].decode("utf-8", "replace").rstrip("\n")
    return repr(printable(text)) + ("..." if len(data) > limit else "")
