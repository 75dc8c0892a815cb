"""A real OpenSSH server for the tests: Debian's ``/usr/sbin/sshd`` as a child on 127.0.0.1.

Its host key and the client's key are made for the test by ssh-keygen; a client config
names it ``wbtest`` with a known_hosts that trusts it. The client reaches it as a user
would, through ``ssh -F CONFIG`` (``WORKBENCH_SSH``): ssh reads ``~/.ssh`` from the passwd
home, so nothing else would point it there. Tests that use it are marked ``ssh`` and skipped
where sshd is not installed (``.ci/run`` installs Debian's ``openssh-server``).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

SSHD = Path("/usr/sbin/sshd")
PRIVSEP_DIR = Path("/run/sshd")  # Debian's sshd refuses to start without it
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
ALIAS = "wbtest"


def keygen(path: Path) -> Path:
    """A new ed25519 key without a passphrase at ``path`` (and ``path.pub``)."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)],
        check=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    return path


def public(key: Path) -> Path:
    """A key's public half, beside it."""
    return key.parent / f"{key.name}.pub"


def fingerprint(public_key: Path) -> str:
    """``ssh-keygen -lf``'s fingerprint of a key, as "ED25519 SHA256:..."."""
    out = subprocess.run(
        ["ssh-keygen", "-lf", str(public_key)], capture_output=True, text=True, timeout=30
    ).stdout.split()
    return f"{out[-1].strip('()')} {out[1]}"


@dataclass
class SshServer:
    """The running server and the client config that reaches it."""

    folder: Path
    port: int
    user: str
    host_key: Path  # the server's private key; its public half beside it (.pub)
    client_key: Path
    config: Path  # the client's ssh config
    process: subprocess.Popen[bytes]
    aliases: list[str] = field(default_factory=list)

    @property
    def alias(self) -> str:
        return ALIAS

    @property
    def ssh_command(self) -> str:
        """``WORKBENCH_SSH`` for this server's client config."""
        return f"ssh -F {shlex.quote(str(self.config))}"

    @property
    def host_line(self) -> str:
        """The server's key as a known_hosts line."""
        kind, blob = public(self.host_key).read_text().split()[:2]
        return f"[127.0.0.1]:{self.port} {kind} {blob}\n"

    def add_alias(
        self, name: str, known_hosts: str, identity: Path | None = None, extra: str = ""
    ) -> str:
        """Another name for this server in the client config, with its own known_hosts
        (of text ``known_hosts``), key and ``extra`` config lines; the name is returned."""
        assert name not in self.aliases, name
        known = self.folder / f"known_hosts.{name}"
        known.write_text(known_hosts)
        key = identity or self.client_key
        with self.config.open("a") as config:
            config.write(
                f"Host {name}\n  HostName 127.0.0.1\n  Port {self.port}\n  User {self.user}\n"
                f"  IdentityFile {key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n"
                f"{extra}\n"
            )
        self.aliases.append(name)
        return name

    def known_hosts_of(self, name: str) -> Path:
        return self.folder / f"known_hosts.{name}"

    def unknown_alias(self, name: str, extra: str = "") -> str:
        """A name whose known_hosts is empty: the host key is unknown."""
        return self.add_alias(name, "", extra=extra)

    def mismatch_alias(self, name: str) -> str:
        """A name whose known_hosts holds another key for the server: a changed key."""
        other = keygen(self.folder / f"other_host_key.{name}")
        kind, blob = public(other).read_text().split()[:2]
        return self.add_alias(name, f"[127.0.0.1]:{self.port} {kind} {blob}\n")

    def denied_alias(self, name: str) -> str:
        """A name whose client key is not in the server's authorized_keys."""
        return self.add_alias(name, self.host_line, keygen(self.folder / f"stranger_key.{name}"))

    def log(self) -> str:
        return (self.folder / "sshd.log").read_text(errors="replace")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(port: int) -> bool:
    """The port speaks SSH (its banner's first bytes), within a second."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1.0) as s:
        s.settimeout(1.0)
        return s.recv(8).startswith(b"SSH-2.0")
    return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    """The server and the session processes it forked: terminated, then killed."""
    try:
        children = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        children = []
    process.terminate()
    for proc in children:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(children, timeout=STOP_TIMEOUT_S)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def ssh_server(folder: Path) -> Iterator[SshServer]:
    """Start sshd in ``folder`` (keys, configs, log) and stop it on the way out."""
    if not SSHD.exists() or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.skip(f"OpenSSH is not installed ({SSHD} and ssh): apt-get install openssh-server")
    with contextlib.suppress(OSError):
        PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
    user = pwd.getpwuid(os.getuid()).pw_name
    host_key = keygen(folder / "host_key")
    client_key = keygen(folder / "client_key")
    authorized = folder / "authorized_keys"
    authorized.write_text(public(client_key).read_text())
    port = _free_port()
    server_config = folder / "sshd_config"
    server_config.write_text(
        f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {host_key}\n"
        f"AuthorizedKeysFile {authorized}\nPidFile {folder / 'sshd.pid'}\n"
        "PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "AcceptEnv WORKBENCH_TEST_RUN\nPrintMotd no\nMaxStartups 64\n"
    )
    log = (folder / "sshd.log").open("wb")
    process = subprocess.Popen(
        [str(SSHD), "-D", "-e", "-f", str(server_config)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        config = folder / "ssh_config"
        config.write_text("SendEnv WORKBENCH_TEST_RUN\n")  # its servers, found if left
        server = SshServer(folder, port, user, host_key, client_key, config, process)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"sshd did not start on port {port}: {server.log()[-2000:]}")
            time.sleep(0.05)
        server.add_alias(ALIAS, server.host_line)
        yield server
    finally:
        _stop(process)
        log.close()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory) -> Iterator[SshServer]:
    """One real sshd for the session (each xdist worker its own)."""
    with ssh_server(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture
def ssh_env(sshd: SshServer, monkeypatch) -> SshServer:
    """The real sshd, with ``WORKBENCH_SSH`` pointing this test's ssh at its config."""
    monkeypatch.setenv("WORKBENCH_SSH", sshd.ssh_command)
    return sshd
