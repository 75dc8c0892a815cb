"""SSH destinations as hosts, through the user's own OpenSSH client.

Every command runs through the system's ``ssh``, so the user's ``~/.ssh/config``, agent,
keys, ProxyJump and known_hosts all apply; nothing here stores a password or speaks SSH
itself. The one option added is ``BatchMode=yes``: a run cannot stop to ask for a password
or a host key. A host key ssh does not know is refused with the command that trusts it (or
trusted by ``accept_host_key`` after the window asked), and a changed key is refused
outright. ``WORKBENCH_SSH`` (shell words, like git's ``GIT_SSH_COMMAND``) names another
ssh or adds its words: ``WORKBENCH_SSH="ssh -F ~/.ssh/lab_config"``.

Host keys are OpenSSH's own business: ``ssh-keyscan`` reads a host's keys, ``ssh-keygen
-l`` gives their fingerprints and ``ssh-keygen -H`` hashes a known_hosts name; nothing here
decodes a key or hashes a name itself. What ssh, its tools or a config file gives is
untrusted: each is read within a deadline and a byte bound, and shown only as printable
text.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.escaping import printable

ENV = "WORKBENCH_SSH"
PROBE_TIMEOUT_S = 30.0  # ssh to a host and `true` there, through any ProxyJump
CONFIG_TIMEOUT_S = 10.0  # `ssh -G`, which reads the config and connects nowhere
SCAN_TIMEOUT_S = 5  # ssh-keyscan's own -T, per host
KEYGEN_TIMEOUT_S = 10.0  # ssh-keygen reading or hashing a few keys, which takes milliseconds
MAX_OUTPUT_BYTES = 256 * 1024  # of a command's stdout or stderr
MAX_CONFIG_BYTES = 1024 * 1024  # read of one ssh config file
MAX_CONFIG_FILES = 64  # a config and the files it includes
MAX_INCLUDE_DEPTH = 16  # as OpenSSH's own
MAX_LINE = 200  # of a message of ssh's in one of ours
MAX_DEST = 1024  # characters of a destination (a host name is at most 253)
DEFAULT_PORT = 22

_CHANGED = "REMOTE HOST IDENTIFICATION HAS CHANGED"
_VERIFY_FAILED = "Host key verification failed."
_SENT_KEY = re.compile(
    r"The fingerprint for the (\S+) key sent by the remote host is\s+(SHA256:\S+)"
)
_REMOVE = re.compile(r"^\s*(ssh-keygen -f .* -R .*)$", re.MULTILINE)
_DENIED = re.compile(r"(\S+): Permission denied \(([^)]*)\)")
_KEYWORD = re.compile(r"^\s*(\w+)(?:\s*=\s*|\s+)(.*)$")
# A line of ``ssh-keygen -l`` for a key whose comment is its number here: "256 SHA256:... 0
# (ED25519)".
_LISTED = re.compile(r"^\d+ (SHA256:\S+) (\d+) \(([\w-]+)\)$")


class SshError(WorkbenchError):
    """ssh could not reach a destination or run a command there: one line that starts with
    the destination and says what to do."""


class HostKeyError(SshError):
    """The destination's host key is not trusted (unknown or changed); ``key`` says which
    keys it showed, for the window's question."""

    def __init__(self, message: str, key: HostKey) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class HostKey:
    """What the user's known_hosts says of a destination's host key."""

    dest: str
    host: str  # where ssh connects, as `ssh -G` resolves the destination
    port: int
    known: bool  # ssh accepted the key (nothing to ask)
    changed: bool  # known_hosts holds another key for the host: refused, never accepted here
    fingerprints: tuple[str, ...]  # "ED25519 SHA256:...": the keys the host shows, if unknown
    accept_command: str  # what the user runs to trust it (and answers yes)
    remove_command: str | None = None  # ssh's own line that removes a changed host's old key


@dataclass(frozen=True)
class SshTarget:
    """A host reached by the user's ssh (``protocol.HostTarget``)."""

    name: str  # the destination as the user typed it: an alias, user@host, ssh://...
    words: tuple[str, ...]  # the ssh program and its words, from WORKBENCH_SSH

    def command(self, remote: list[str]) -> list[str]:
        """The argv that runs ``remote`` there: ssh passes one string to the far login
        shell, which splits it again, so the words are quoted for a POSIX shell."""
        line = " ".join(map(_far_word, remote))
        return [*self.words, "-o", "BatchMode=yes", "-T", self.name, "--", line]


def _far_word(word: str) -> str:
    """A word quoted for the far shell, but for a leading ``~/``, left for it to expand
    to the far home (``--remote-workbench "~/venv/bin/workbench"``)."""
    if word.startswith("~/"):
        return "~/" + shlex.quote(word[2:])
    return shlex.quote(word)


@dataclass(frozen=True)
class _Ran:
    """A bounded command's end: its exit status, or None and why it was stopped."""

    returncode: int | None
    stdout: str
    stderr: str
    stopped: str | None = None


@dataclass(frozen=True)
class _Resolved:
    """What `ssh -G` says of a destination."""

    host: str
    port: int
    known_hosts: Path  # the first user known_hosts file, where an accepted key goes
    key_name: str  # the name its keys are kept under there ("[host]:port", or HostKeyAlias)
    hashed: bool
    proxied: bool  # reached through ProxyJump or ProxyCommand: not scannable from here


def ssh_words() -> tuple[str, ...]:
    """The ssh program and its own words, from ``WORKBENCH_SSH`` (default ``ssh``)."""
    text = os.environ.get(ENV, "").strip() or "ssh"
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise SshError(f"{ENV}={printable(text)!r} is not shell words: {exc}") from None
    if not words:
        words = ["ssh"]
    words = [os.path.expanduser(word) if word.startswith("~") else word for word in words]
    if shutil.which(words[0]) is None:
        raise SshError(f"{ENV}: {printable(words[0])} is not a program on PATH")
    return tuple(words)


def ssh_target(dest: str) -> SshTarget:
    """The host ``dest`` names (anything the user's ssh accepts), checked first
    (``check_dest``)."""
    check_dest(dest)
    return SshTarget(dest, ssh_words())


def check_dest(dest: str) -> None:
    """An ``SshError`` for a ``dest`` that is no host to hand ssh: one that starts with
    ``-`` would be read by ssh as an option."""
    shown = printable(dest)
    if not dest:
        raise SshError("an SSH destination is empty: give an alias, user@host or ssh://...")
    if dest.startswith("-"):
        raise SshError(
            f"{shown}: an SSH destination cannot start with '-' (ssh reads it as an option)"
        )
    if any(c.isspace() or not c.isprintable() for c in dest):
        raise SshError(f"{shown}: an SSH destination has no spaces or control characters")
    if len(dest) > MAX_DEST:
        raise SshError(f"{shown[:40]}...: an SSH destination is at most {MAX_DEST} characters")


def check_reachable(dest: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Run ``true`` on ``dest`` as a run would reach it; an ``SshError`` line (a
    ``HostKeyError`` for a key not trusted) says why not and what to do."""
    target = ssh_target(dest)
    ran = _probe(target, timeout_s)
    if ran.returncode == 0:
        return
    if _VERIFY_FAILED in ran.stderr and (key := _key_of(target, ran)) is not None:
        raise HostKeyError(key_line(key), key)
    raise SshError(_failure_line(target, ran))


def host_key_status(dest: str, timeout_s: float = PROBE_TIMEOUT_S) -> HostKey:
    """Whether ssh trusts ``dest``'s host key, and the host's fingerprints if it does not;
    a destination ssh cannot connect to at all is an ``SshError``."""
    target = ssh_target(dest)
    ran = _probe(target, timeout_s)
    key = _key_of(target, ran)
    if key is None:
        raise SshError(_failure_line(target, ran))
    return key


def accept_host_key(dest: str, fingerprints: Sequence[str]) -> None:
    """Trust exactly the keys shown for ``dest`` (its ``HostKey.fingerprints``): scanned
    again, refused if they are not the ones shown, and added to the user's known_hosts
    (hashed if ssh hashes it). A changed key is refused: its old line is the user's to
    remove."""
    key = host_key_status(dest)
    if key.known:
        return
    if key.changed:
        raise HostKeyError(key_line(key), key)
    target = ssh_target(dest)
    where = _resolve(target)
    if where.proxied:
        raise SshError(
            f"{dest}: reached through a proxy, so its keys cannot be scanned from here: "
            f"accept it with {key.accept_command} (and answer yes)"
        )
    scanned = _scan(where)  # an SshError if OpenSSH's tools cannot read them
    shown = set(fingerprints)
    if not shown or set(scanned) != shown:
        now = ", ".join(scanned) or "none"
        raise SshError(
            f"{dest}: the host's keys are not the ones shown (it shows {now} now): "
            "nothing was added"
        )
    lines = "".join(f"{where.key_name} {entry}\n" for entry in scanned.values())
    _append(where.known_hosts, _hashed(lines) if where.hashed else lines)


def key_line(key: HostKey) -> str:
    """The one line that refuses an untrusted key, naming what to do."""
    where = key.host if key.port == DEFAULT_PORT else f"{key.host} port {key.port}"
    if key.changed:
        remove = key.remove_command or "ssh-keygen -R HOST"
        return (
            f"{key.dest}: the host key of {where} has CHANGED since it was trusted "
            f"({', '.join(key.fingerprints) or 'fingerprint not given'} now): refused. If the "
            f"machine was reinstalled, remove the old key with: {remove}"
        )
    shows = ", ".join(key.fingerprints) or "its fingerprint could not be read from here"
    return (
        f"{key.dest}: the host key of {where} is not known ({shows}): if that is the "
        f"machine's key, accept it with: {key.accept_command} (and answer yes if it shows "
        "the same fingerprint)"
    )


def ssh_config_hosts(path: Path | None = None) -> list[str]:
    """The ``Host`` aliases a user can pick from: those of ``~/.ssh/config`` and the files
    it includes, without patterns or negations, each once, in order. A missing or
    unreadable file gives none; a relative ``Include`` is read beside the first file, as
    OpenSSH reads one of ``~/.ssh/config`` in ``~/.ssh``."""
    start = path or Path.home() / ".ssh" / "config"
    names: list[str] = []
    _read_hosts(start, start.parent, names, [], 0)
    return names


def _read_hosts(path: Path, base: Path, names: list[str], read: list[Path], depth: int) -> None:
    if depth > MAX_INCLUDE_DEPTH or len(read) >= MAX_CONFIG_FILES or path in read:
        return
    read.append(path)
    try:
        with path.open("rb") as file:
            text = file.read(MAX_CONFIG_BYTES).decode("utf-8", "replace")
    except OSError:
        return
    for line in text.splitlines():
        match = _KEYWORD.match(line)
        if match is None or line.lstrip().startswith("#"):
            continue
        try:
            args = shlex.split(match.group(2), comments=True)
        except ValueError:
            continue
        keyword = match.group(1).lower()
        if keyword == "host":
            names += [
                name
                for name in map(printable, args)
                if name not in names and not name.startswith("!") and not set("*?") & set(name)
            ]
        elif keyword == "include":
            for pattern in args:
                full = Path(os.path.expanduser(pattern))
                for found in sorted(glob.glob(str(full if full.is_absolute() else base / full))):
                    _read_hosts(Path(found), base, names, read, depth + 1)


def _probe(target: SshTarget, timeout_s: float) -> _Ran:
    return _run(target.command(["true"]), timeout_s)


def _key_of(target: SshTarget, ran: _Ran) -> HostKey | None:
    """The host key's state when ssh got as far as checking it; None when it did not."""
    err = ran.stderr
    connected = ran.returncode is not None and (
        ran.returncode != 255 or _DENIED.search(err) is not None
    )
    if not connected and _VERIFY_FAILED not in err:
        return None
    where = _resolve(target)
    accept = shlex.join([*target.words, target.name, "true"])
    known = HostKey(target.name, where.host, where.port, True, False, (), accept)
    if connected:
        return known
    if _CHANGED in err:
        sent = _SENT_KEY.search(err)
        remove = _REMOVE.search(err)
        shown = (f"{sent.group(1)} {sent.group(2).rstrip('.')}",) if sent else ()
        return HostKey(
            target.name,
            where.host,
            where.port,
            False,
            True,
            tuple(printable(f)[:MAX_LINE] for f in shown),
            accept,
            printable(remove.group(1).strip())[:MAX_LINE] if remove else None,
        )
    shown: tuple[str, ...] = ()
    if not where.proxied:
        with contextlib.suppress(SshError):  # shown as not read; accepting says why
            shown = tuple(_scan(where))
    return HostKey(target.name, where.host, where.port, False, False, shown, accept)


def _failure_line(target: SshTarget, ran: _Ran) -> str:
    """Why ssh did not run ``true`` on the destination, in one line that says what to do."""
    dest, err = target.name, ran.stderr
    if ran.returncode is None:
        return f"{dest}: ssh {ran.stopped}"
    if denied := _DENIED.search(err):
        return (
            f"{dest}: ssh offered no key that {printable(denied.group(1))[:MAX_LINE]} accepts "
            f"(Permission denied ({printable(denied.group(2))[:MAX_LINE]})): load the key into "
            "the agent (ssh-add KEYFILE) or name it with IdentityFile in ~/.ssh/config"
        )
    last = _last_line(err)
    if "Could not resolve hostname" in err:
        return (
            f"{dest}: ssh could not resolve the host name ({last}): check the name, or its "
            "Host entry in ~/.ssh/config"
        )
    if "Connection refused" in err:
        return f"{dest}: the connection was refused ({last}): is sshd running there, on that port?"
    if "timed out" in err:
        return f"{dest}: the connection timed out ({last}): is the host up and reachable from here?"
    if ran.returncode != 255:
        return f"{dest}: ssh connected, but `true` failed there (exit {ran.returncode}): {last}"
    return f"{dest}: ssh failed (exit 255): {last}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return printable(lines[-1])[:MAX_LINE] if lines else "no message"


def _resolve(target: SshTarget) -> _Resolved:
    """The destination as the user's ssh config resolves it (`ssh -G`, which connects
    nowhere)."""
    ran = _run([*target.words, "-G", target.name], CONFIG_TIMEOUT_S)
    if ran.returncode != 0:
        why = ran.stopped or _last_line(ran.stderr)
        raise SshError(f"{target.name}: ssh -G could not read the config: {why}")
    said: dict[str, str] = {}
    for line in ran.stdout.splitlines():
        key, _, value = line.partition(" ")
        said.setdefault(key.lower(), value.strip())
    host = said.get("hostname") or target.name
    try:
        port = int(said.get("port", DEFAULT_PORT))
    except ValueError:
        port = DEFAULT_PORT
    files = said.get("userknownhostsfile", "").split()
    alias = said.get("hostkeyalias", "none")
    if alias.lower() != "none":
        key_name = alias
    else:
        key_name = host if port == DEFAULT_PORT else f"[{host}]:{port}"
    return _Resolved(
        host=host,
        port=port,
        known_hosts=Path(os.path.expanduser(files[0] if files else "~/.ssh/known_hosts")),
        key_name=key_name,
        hashed=said.get("hashknownhosts", "no").lower() == "yes",
        proxied=any(said.get(k, "none").lower() != "none" for k in ("proxyjump", "proxycommand")),
    )


def _scan(where: _Resolved) -> dict[str, str]:
    """The host's keys as ssh-keyscan reads them now: each "TYPE BASE64" by its
    fingerprint ("ED25519 SHA256:..."); none if it cannot be scanned. An ``SshError`` when
    OpenSSH's tools are missing or fail."""
    if where.host.startswith("-"):
        return {}
    argv = [_tool("ssh-keyscan"), "-T", str(SCAN_TIMEOUT_S), "-p", str(where.port), where.host]
    ran = _run(argv, SCAN_TIMEOUT_S * 3)
    entries = [
        f"{fields[1]} {fields[2]}"
        for line in ran.stdout.splitlines()
        if len(fields := line.split()) == 3 and not line.startswith("#")
    ]
    return _fingerprints(entries)


def _fingerprints(entries: Sequence[str]) -> dict[str, str]:
    """Each key ("TYPE BASE64") by its fingerprint as ``ssh-keygen -l`` gives it
    ("ED25519 SHA256:..."); a line that is no key is left out. Each key goes to ssh-keygen
    with its number as its comment, which names it in what ssh-keygen writes."""
    if not entries:
        return {}
    with tempfile.TemporaryDirectory(prefix="workbench-keys-") as folder:
        keys = Path(folder) / "keys"
        keys.write_text("".join(f"{entry} {n}\n" for n, entry in enumerate(entries)))
        ran = _run([_tool("ssh-keygen"), "-l", "-f", str(keys)], KEYGEN_TIMEOUT_S)
    listed = [m for line in ran.stdout.splitlines() if (m := _LISTED.match(line.strip()))]
    if ran.returncode != 0 and not listed:  # stopped, or not one key among them
        why = ran.stopped or f"exit {ran.returncode}: {_last_line(ran.stderr)}"
        raise SshError(f"ssh-keygen -l could not read the host's keys ({why})")
    found: dict[str, str] = {}
    for m in listed:
        if int(m.group(2)) < len(entries):
            found.setdefault(f"{m.group(3)} {m.group(1)}", entries[int(m.group(2))])
    return found


def _hashed(lines: str) -> str:
    """known_hosts lines with their names hashed, as ``HashKnownHosts yes`` keeps them
    (``ssh-keygen -H``, on a copy of their own)."""
    with tempfile.TemporaryDirectory(prefix="workbench-known-") as folder:
        known = Path(folder) / "known_hosts"
        known.write_text(lines)
        ran = _run([_tool("ssh-keygen"), "-H", "-f", str(known)], KEYGEN_TIMEOUT_S)
        hashed = known.read_text() if ran.returncode == 0 else ""
    if not hashed or not all(line.startswith("|1|") for line in hashed.splitlines()):
        why = ran.stopped or f"exit {ran.returncode}: {_last_line(ran.stderr)}"
        raise SshError(f"ssh-keygen -H could not hash the host's name ({why}): nothing was added")
    return hashed


def _tool(name: str) -> str:
    """An OpenSSH program on PATH, or an ``SshError`` saying it is missing."""
    if (path := shutil.which(name)) is None:
        raise SshError(
            f"{name} is not a program on PATH: it comes with OpenSSH's client, which reads "
            "and keeps host keys here"
        )
    return path


def _append(path: Path, lines: str) -> None:
    """Add lines to a known_hosts file, creating it (and ~/.ssh) as ssh would."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "r+b") as file:
            size = file.seek(0, os.SEEK_END)
            if size:
                file.seek(size - 1)
                if file.read(1) != b"\n":
                    lines = "\n" + lines
            file.write(lines.encode())
    except OSError as exc:
        raise SshError(f"cannot add the host key to {path}: {exc.strerror or exc}") from None


def _run(argv: list[str], timeout_s: float) -> _Ran:
    """Run a command with no stdin, stopped (with what it started) past ``timeout_s`` or
    past ``MAX_OUTPUT_BYTES`` on either stream."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
            )
        except OSError as exc:
            raise SshError(f"cannot run {printable(argv[0])}: {exc.strerror or exc}") from None
        deadline = time.monotonic() + timeout_s
        stopped = None
        while proc.poll() is None and stopped is None:
            if time.monotonic() > deadline:
                stopped = f"did not answer within {timeout_s:g} s"
            elif max(os.fstat(f.fileno()).st_size for f in (out, err)) > MAX_OUTPUT_BYTES:
                stopped = f"wrote more than {MAX_OUTPUT_BYTES // 1024} KiB"
            else:
                time.sleep(0.02)
        if stopped is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        texts = []
        for file in (out, err):
            file.seek(0)
            texts.append(file.read(MAX_OUTPUT_BYTES).decode("utf-8", "replace"))
    return _Ran(None if stopped else proc.returncode, texts[0], texts[1], stopped)
