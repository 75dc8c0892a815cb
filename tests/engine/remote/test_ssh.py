"""SSH destinations: the argv the user's ssh gets, host keys and failures against a real
sshd (tests/sshd.py), and the Host aliases of a config."""

from __future__ import annotations

import contextlib
import pwd
import shlex
import shutil
import socket
import subprocess
from pathlib import Path

import psutil
import pytest

from tests.engine.waiting import ended, until
from tests.sshd import SshServer, fingerprint, public
from workbench.engine.remote import ssh
from workbench.engine.remote.protocol import HostTarget
from workbench.engine.remote.ssh import (
    HostKeyError,
    SshError,
    accept_host_key,
    check_reachable,
    host_key_status,
    ssh_config_hosts,
    ssh_target,
)

pytestmark = pytest.mark.timeout(60)


def fake_ssh(monkeypatch, script: str) -> None:
    """An "ssh" that is a shell script: what a real one says, without a network."""
    monkeypatch.setenv("WORKBENCH_SSH", f"sh -c {shlex.quote(script)} --")


# The argv.


@pytest.mark.parametrize("dest", ["gpubox", "me@gpu-box.lan", "ssh://me@gpubox:2222"])
def test_a_destination_is_passed_to_ssh_as_typed_with_batch_mode_alone(monkeypatch, dest):
    monkeypatch.delenv("WORKBENCH_SSH", raising=False)
    target: HostTarget = ssh_target(dest)
    assert target.name == dest
    assert target.command(["workbench", "agent", "--data", "a b"]) == [
        "ssh", "-o", "BatchMode=yes", "-T", dest, "--", "workbench agent --data 'a b'"
    ]  # fmt: skip


def test_workbench_ssh_gives_the_program_and_its_words(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("WORKBENCH_SSH", "ssh -F '/etc/lab config' -i ~/.ssh/lab")
    assert ssh_target("gpubox").command(["true"]) == [
        "ssh", "-F", "/etc/lab config", "-i", f"{tmp_path}/.ssh/lab",
        "-o", "BatchMode=yes", "-T", "gpubox", "--", "true",
    ]  # fmt: skip
    monkeypatch.setenv("WORKBENCH_SSH", "  ")
    assert ssh_target("gpubox").words == ("ssh",)


@pytest.mark.parametrize(
    ("value", "said"),
    [("ssh -F 'open", "WORKBENCH_SSH=\"ssh -F 'open\" is not shell words"),
     ("no-such-ssh-program -v", "WORKBENCH_SSH: no-such-ssh-program is not a program on PATH")],
)  # fmt: skip
def test_a_bad_workbench_ssh_is_one_line(monkeypatch, value, said):
    monkeypatch.setenv("WORKBENCH_SSH", value)
    with pytest.raises(SshError) as caught:
        ssh_target("gpubox")
    assert str(caught.value).startswith(said)


@pytest.mark.parametrize(
    ("dest", "said"),
    [("-oProxyCommand=touch /tmp/x", "cannot start with '-'"),
     ("-x", "cannot start with '-'"),
     ("gpu box", "no spaces or control characters"),
     ("gpu\x1b[2Jbox", "no spaces or control characters"),
     ("", "an SSH destination is empty"),
     ("a" * 1025, "a" * 40 + "...: an SSH destination is at most 1024 characters")],
)  # fmt: skip
def test_a_destination_ssh_would_misread_is_refused(dest, said):
    with pytest.raises(SshError) as caught:
        ssh_target(dest)
    assert said in str(caught.value)
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value)


def test_a_destination_ssh_would_misread_is_one_line_from_the_cli(tmp_path, capsys):
    from tests.made_sessions import write_session
    from workbench.cli.main import main
    from workbench.engine.store.rows import RemoteOrigin
    from workbench.engine.store.writer import write_remote_origin

    refused = "-x: an SSH destination cannot start with '-' (ssh reads it as an option)"
    experiment = tmp_path / "x.toml"
    experiment.write_text('name = "x"\n')
    assert main(["run", str(experiment), "--host=-x", "--out", str(tmp_path)]) == 1
    said = capsys.readouterr()
    assert (said.out, said.err) == (f"{refused}\n", "error: nothing was started: 1 problem above\n")
    session = write_session(tmp_path / "far.session.sqlite")
    write_remote_origin(
        session,
        RemoteOrigin(
            host="gpubox",
            run_id="0" * 32,
            agent_version="0.1.0",
            protocol=1,
            clock_offset_ns=0,
            rtt_ns=0,
            received_all=False,
        ),
    )
    assert main(["fetch", "--", "-x", str(session)]) == 1
    assert capsys.readouterr().err == f"error: {refused}\n"


# Failures classified from what ssh says, by an "ssh" that only says it.


@pytest.mark.parametrize(
    ("says", "line"),
    [("ssh: Could not resolve hostname gpubox: Name or service not known",
      "gpubox: ssh could not resolve the host name (ssh: Could not resolve hostname gpubox: "
      "Name or service not known): check the name, or its Host entry in ~/.ssh/config"),
     ("ssh: connect to host 10.0.0.7 port 22: Connection timed out",
      "gpubox: the connection timed out (ssh: connect to host 10.0.0.7 port 22: Connection "
      "timed out): is the host up and reachable from here?"),
     ("kex_exchange_identification: Connection closed by remote host",
      "gpubox: ssh failed (exit 255): kex_exchange_identification: Connection closed by "
      "remote host")],
)  # fmt: skip
def test_what_ssh_says_of_a_failure_is_one_line(monkeypatch, says, line):
    fake_ssh(monkeypatch, f"echo {shlex.quote(says)} >&2; exit 255")
    with pytest.raises(SshError) as caught:
        check_reachable("gpubox")
    assert str(caught.value) == line


def test_a_login_shell_that_fails_is_said_apart_from_ssh(monkeypatch):
    fake_ssh(monkeypatch, "echo 'This account is currently not available.' >&2; exit 1")
    with pytest.raises(SshError) as caught:
        check_reachable("gpubox")
    assert str(caught.value) == (
        "gpubox: ssh connected, but `true` failed there (exit 1): This account is currently "
        "not available."
    )


def test_an_ssh_that_hangs_is_stopped_at_its_deadline_with_what_it_started(monkeypatch, tmp_path):
    pid_file = tmp_path / "pid"
    fake_ssh(monkeypatch, f"sleep 60 & echo $! > {pid_file}; wait")
    with pytest.raises(SshError) as caught:
        check_reachable("gpubox", timeout_s=0.5)
    assert str(caught.value) == "gpubox: ssh did not answer within 0.5 s"
    with contextlib.suppress(psutil.NoSuchProcess):  # gone already
        sleeper = psutil.Process(int(pid_file.read_text()))
        until(lambda: ended(sleeper), what="the stopped ssh's child ending")


def test_an_ssh_that_floods_is_stopped_at_the_byte_bound(monkeypatch):
    fake_ssh(monkeypatch, "yes 'a line of noise' >&2")
    with pytest.raises(SshError) as caught:
        check_reachable("gpubox")
    assert str(caught.value) == "gpubox: ssh wrote more than 256 KiB"


# Against the real sshd.


@pytest.mark.ssh
def test_the_far_shell_gets_the_words_exactly(ssh_env: SshServer):
    words = ["printf", "%s\\n", "a b", "it's", "$HOME", "-x", ";", "*", 'say "hi"', ""]
    argv = ssh_target(ssh_env.alias).command(words)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout
    assert out.split("\n")[:-1] == words[2:]


@pytest.mark.ssh
def test_a_leading_tilde_is_the_far_home_and_nothing_else_is_expanded(ssh_env: SshServer):
    argv = ssh_target(ssh_env.alias).command(["printf", "%s\\n", "~/a b", "~x", "a~/b", "~"])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout
    home = pwd.getpwnam(ssh_env.user).pw_dir
    assert out.split("\n")[:-1] == [f"{home}/a b", "~x", "a~/b", "~"]


@pytest.mark.ssh
def test_a_trusted_host_is_reachable_and_known(ssh_env: SshServer):
    check_reachable(ssh_env.alias)
    key = host_key_status(ssh_env.alias)
    assert (key.known, key.changed, key.host, key.port) == (True, False, "127.0.0.1", ssh_env.port)


@pytest.mark.ssh
def test_an_unknown_host_key_is_refused_with_its_fingerprint_and_the_command_that_accepts_it(
    ssh_env: SshServer,
):
    dest = ssh_env.unknown_alias("unknown-refused")
    expected = fingerprint(public(ssh_env.host_key))
    key = host_key_status(dest)
    assert (key.known, key.changed, key.fingerprints) == (False, False, (expected,))
    assert key.accept_command == f"{ssh_env.ssh_command} {dest} true"
    with pytest.raises(HostKeyError) as caught:
        check_reachable(dest)
    assert caught.value.key == key
    assert str(caught.value) == (
        f"{dest}: the host key of 127.0.0.1 port {ssh_env.port} is not known ({expected}): if "
        f"that is the machine's key, accept it with: {ssh_env.ssh_command} {dest} true (and "
        "answer yes if it shows the same fingerprint)"
    )
    assert ssh_env.known_hosts_of(dest).read_text() == ""  # nothing accepted on the way


@pytest.mark.ssh
def test_accepting_adds_exactly_the_key_shown_and_the_host_is_known_after(ssh_env: SshServer):
    dest = ssh_env.unknown_alias("unknown-accepted")
    key = host_key_status(dest)
    accept_host_key(dest, key.fingerprints)
    assert ssh_env.known_hosts_of(dest).read_text() == ssh_env.host_line
    assert host_key_status(dest).known
    check_reachable(dest)
    accept_host_key(dest, key.fingerprints)  # known already: nothing more is added
    assert ssh_env.known_hosts_of(dest).read_text() == ssh_env.host_line


@pytest.mark.ssh
def test_a_key_is_added_hashed_where_ssh_hashes_known_hosts(ssh_env: SshServer):
    dest = ssh_env.unknown_alias("unknown-hashed", extra="  HashKnownHosts yes\n")
    accept_host_key(dest, host_key_status(dest).fingerprints)
    known = ssh_env.known_hosts_of(dest)
    name, *key = known.read_text().split()
    assert name.startswith("|1|") and key == ssh_env.host_line.split()[1:]
    found = subprocess.run(
        ["ssh-keygen", "-F", f"[127.0.0.1]:{ssh_env.port}", "-f", str(known)],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    assert f"{name} {' '.join(key)}" in found.splitlines()
    check_reachable(dest)


@pytest.mark.ssh
def test_keys_other_than_those_shown_are_not_added(ssh_env: SshServer):
    dest = ssh_env.unknown_alias("unknown-other-shown")
    shown = fingerprint(public(ssh_env.client_key))  # not the host's
    with pytest.raises(SshError) as caught:
        accept_host_key(dest, (shown,))
    assert str(caught.value).startswith(f"{dest}: the host's keys are not the ones shown")
    assert str(caught.value).endswith("now): nothing was added")
    assert ssh_env.known_hosts_of(dest).read_text() == ""


@pytest.mark.ssh
def test_a_host_behind_a_jump_host_is_not_scanned_from_here(ssh_env: SshServer):
    dest = ssh_env.unknown_alias("jumped", extra=f"  ProxyJump {ssh_env.alias}\n")
    key = host_key_status(dest)
    assert (key.known, key.changed, key.fingerprints) == (False, False, ())
    with pytest.raises(HostKeyError) as caught:
        check_reachable(dest)
    assert "is not known (its fingerprint could not be read from here)" in str(caught.value)
    with pytest.raises(SshError) as caught:
        accept_host_key(dest, (fingerprint(public(ssh_env.host_key)),))
    assert str(caught.value) == (
        f"{dest}: reached through a proxy, so its keys cannot be scanned from here: accept it "
        f"with {ssh_env.ssh_command} {dest} true (and answer yes)"
    )
    assert ssh_env.known_hosts_of(dest).read_text() == ""


def _made_key(tmp_path: Path, kind: str) -> Path:
    key = tmp_path / kind
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(key)], check=True, timeout=60
    )
    return key


@pytest.mark.parametrize("kind", ["ed25519", "rsa", "ecdsa"])
def test_a_fingerprint_is_ssh_keygens(tmp_path: Path, kind: str):
    key = _made_key(tmp_path, kind)
    name, blob = public(key).read_text().split()[:2]
    other = "ssh-rsa" if kind != "rsa" else "ssh-ed25519"
    entries = [f"{other} {blob}", f"{name} {blob[:-4]}!!!!", f"{name} {blob}", "junk"]
    assert ssh._fingerprints(entries) == {fingerprint(public(key)): f"{name} {blob}"}
    with pytest.raises(SshError) as caught:  # not one key among them
        ssh._fingerprints(entries[:2])
    assert str(caught.value).startswith("ssh-keygen -l could not read the host's keys (exit ")
    assert "\n" not in str(caught.value)


def test_the_keys_of_a_host_are_told_apart_by_their_fingerprints(tmp_path: Path):
    keys = [_made_key(tmp_path, kind) for kind in ("ed25519", "rsa", "ecdsa")]
    entries = [" ".join(public(key).read_text().split()[:2]) for key in keys]
    assert ssh._fingerprints(entries) == {
        fingerprint(public(key)): entry for key, entry in zip(keys, entries, strict=True)
    }


def _path_with(monkeypatch, tmp_path: Path, **scripts: str) -> None:
    """A PATH of only ``scripts`` (each a program's name and its shell script)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name, script in scripts.items():
        (folder / name.replace("_", "-")).write_text(f"#!/bin/sh\n{script}\n")
        (folder / name.replace("_", "-")).chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))


def test_openssh_s_tools_missing_are_one_line(monkeypatch, tmp_path: Path):
    _path_with(monkeypatch, tmp_path)
    with pytest.raises(SshError) as caught:
        ssh._fingerprints(["ssh-ed25519 AAAA"])
    assert str(caught.value) == (
        "ssh-keygen is not a program on PATH: it comes with OpenSSH's client, which reads and "
        "keeps host keys here"
    )
    with pytest.raises(SshError, match=r"^ssh-keygen is not a program on PATH"):
        ssh._hashed("[127.0.0.1]:2222 ssh-ed25519 AAAA\n")


def test_an_ssh_keygen_that_fails_or_hangs_is_one_line_in_bounded_time(monkeypatch, tmp_path):
    sleep = shutil.which("sleep")
    _path_with(monkeypatch, tmp_path, ssh_keygen='echo "ssh-keygen: \033[2Jbroken" >&2; exit 3')
    with pytest.raises(SshError) as caught:
        ssh._fingerprints(["ssh-ed25519 AAAA"])
    assert str(caught.value) == (
        "ssh-keygen -l could not read the host's keys (exit 3: ssh-keygen: \ufffd[2Jbroken)"
    )
    with pytest.raises(SshError) as caught:
        ssh._hashed("[127.0.0.1]:2222 ssh-ed25519 AAAA\n")
    assert str(caught.value) == (
        "ssh-keygen -H could not hash the host's name (exit 3: ssh-keygen: \ufffd[2Jbroken): "
        "nothing was added"
    )
    (tmp_path / "bin" / "ssh-keygen").write_text(f"#!/bin/sh\nexec {sleep} 60\n")
    monkeypatch.setattr(ssh, "KEYGEN_TIMEOUT_S", 0.3)
    with pytest.raises(SshError) as caught:
        ssh._fingerprints(["ssh-ed25519 AAAA"])
    assert str(caught.value) == (
        "ssh-keygen -l could not read the host's keys (did not answer within 0.3 s)"
    )


@pytest.mark.ssh
def test_a_changed_host_key_is_refused_and_never_accepted(ssh_env: SshServer):
    dest = ssh_env.mismatch_alias("changed")
    before = ssh_env.known_hosts_of(dest).read_text()
    key = host_key_status(dest)
    expected = fingerprint(public(ssh_env.host_key))
    assert (key.known, key.changed, key.fingerprints) == (False, True, (expected,))
    remove = f'ssh-keygen -f "{ssh_env.known_hosts_of(dest)}" -R "[127.0.0.1]:{ssh_env.port}"'
    assert key.remove_command == remove
    line = (
        f"{dest}: the host key of 127.0.0.1 port {ssh_env.port} has CHANGED since it was "
        f"trusted ({expected} now): refused. If the machine was reinstalled, remove the old "
        f"key with: {remove}"
    )
    for refused in (lambda: check_reachable(dest), lambda: accept_host_key(dest, (expected,))):
        with pytest.raises(HostKeyError) as caught:
            refused()
        assert str(caught.value) == line
    assert ssh_env.known_hosts_of(dest).read_text() == before


@pytest.mark.ssh
def test_no_key_the_host_accepts_is_one_line(ssh_env: SshServer):
    dest = ssh_env.denied_alias("denied")
    with pytest.raises(SshError) as caught:
        check_reachable(dest)
    assert str(caught.value) == (
        f"{dest}: ssh offered no key that {ssh_env.user}@127.0.0.1 accepts (Permission denied "
        "(publickey)): load the key into the agent (ssh-add KEYFILE) or name it with "
        "IdentityFile in ~/.ssh/config"
    )
    assert host_key_status(dest).known  # the key was checked before the login was refused


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.ssh
def test_a_closed_port_is_one_line(ssh_env: SshServer):
    port = _closed_port()
    dest = f"ssh://{ssh_env.user}@127.0.0.1:{port}"
    with pytest.raises(SshError) as caught:
        check_reachable(dest)
    assert str(caught.value) == (
        f"{dest}: the connection was refused (ssh: connect to host 127.0.0.1 port {port}: "
        "Connection refused): is sshd running there, on that port?"
    )
    with pytest.raises(SshError):
        host_key_status(dest)


@pytest.mark.ssh
def test_a_server_that_never_speaks_is_stopped_at_the_deadline(ssh_env: SshServer):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        dest = f"ssh://{ssh_env.user}@127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(SshError) as caught:
            check_reachable(dest, timeout_s=1.0)
    assert str(caught.value) == f"{dest}: ssh did not answer within 1 s"


# The window's Machine picker.


def test_the_host_aliases_of_a_config_and_its_includes(tmp_path: Path):
    (tmp_path / "config.d").mkdir()
    (tmp_path / "config.d" / "b.conf").write_text("Host lab-b\n  HostName 10.0.0.2\n")
    (tmp_path / "config.d" / "a.conf").write_text("host=lab-a\n")
    (tmp_path / "extra").write_text("Host extra1 extra2 # a comment\nInclude config\n")
    config = tmp_path / "config"
    config.write_text(
        "# my machines\n"
        "Host gpubox gpubox-full.lab *.lab !bastion\n"
        "  HostName 10.0.0.1\n"
        "  ProxyJump bastion\n"
        "Host *\n  ServerAliveInterval 30\n"
        'Host "quoted one" gpubox\n'
        "Match host foo\n"
        "Include config.d/*.conf\n"
        f"Include {tmp_path / 'extra'} missing-file\n"
        "Host a?c\n"
        "Host 'unclosed\n"
    )
    assert ssh_config_hosts(config) == [
        "gpubox", "gpubox-full.lab", "quoted one", "lab-a", "lab-b", "extra1", "extra2"
    ]  # fmt: skip


def test_a_missing_or_unreadable_config_has_no_hosts(tmp_path: Path, monkeypatch):
    assert ssh_config_hosts(tmp_path / "no-such-config") == []
    assert ssh_config_hosts(tmp_path) == []  # a folder
    monkeypatch.setenv("HOME", str(tmp_path))
    assert ssh_config_hosts() == []
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host home-alias\n")
    assert ssh_config_hosts() == ["home-alias"]


def test_a_config_is_read_within_its_bounds(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(ssh, "MAX_CONFIG_BYTES", 64)
    config = tmp_path / "config"
    config.write_text("Host first\n" + "#" * 100 + "\nHost past-the-bound\n")
    assert ssh_config_hosts(config) == ["first"]
    for n in range(100):  # a chain of includes longer than OpenSSH's depth
        (tmp_path / f"c{n}").write_text(f"Host h{n}\nInclude c{n + 1}\n")
    assert ssh_config_hosts(tmp_path / "c0") == [f"h{n}" for n in range(ssh.MAX_INCLUDE_DEPTH + 1)]
