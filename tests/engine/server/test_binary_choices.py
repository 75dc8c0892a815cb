"""The binaries offered when no llama-server is configured: found on PATH, in Homebrew's
folders and as the pinned build, each with its version; a binary that hangs or floods is
stopped at its bound."""

from __future__ import annotations

import os
import time

import pytest

from workbench.engine.server import binary_choices
from workbench.engine.server.binary_choices import PINNED, server_candidates, server_version


def script(path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_the_pinned_build_says_its_version():
    (pinned,) = [c for c in server_candidates() if c.found_by == PINNED]
    assert pinned.problem is None and pinned.version.startswith("version: ")


def test_a_fake_on_path_and_homebrew_are_offered_once_each(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = script(
        bin_dir / "llama-server", 'echo "version: 7000 (feedbee)" >&2; echo "built with clang" >&2'
    )
    brew = tmp_path / "brew-llama-server"
    brew.symlink_to(fake)  # the same program twice: offered once
    other = script(tmp_path / "other-llama-server", "echo 'version: 6999 (c0ffee)'")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(binary_choices, "HOMEBREW", (str(brew), other, "/nowhere/llama-server"))
    choices = server_candidates()
    assert [(c.path, c.found_by, c.version) for c in choices[:2]] == [
        (fake, "PATH", "version: 7000 (feedbee); built with clang"),
        (other, "Homebrew", "version: 6999 (c0ffee)"),
    ]
    assert choices[2].found_by == PINNED and len(choices) == 3


@pytest.mark.parametrize(
    ("body", "timeout_s", "said"),
    [
        # Waits out its whole timeout: short, as only the bound matters.
        ("sleep 30", 0.1, "did not answer within 0.1 s"),
        # These end on their own, long before the timeout; the margin is for a busy machine.
        ("yes version: spam", 0.3, "wrote more than 65536 bytes"),
        ("echo 'usage: something else'; exit 2", 0.3, "did not say a llama.cpp version (exit 2)"),
    ],
)
def test_a_binary_that_misbehaves_is_stopped_and_named(tmp_path, body, timeout_s, said):
    started = time.monotonic()
    version, problem = server_version(script(tmp_path / "llama-server", body), timeout_s=timeout_s)
    assert version is None and said in problem
    assert time.monotonic() - started < 5


def test_what_is_not_a_program_is_said_so(tmp_path):
    plain = tmp_path / "llama-server"
    plain.write_text("not a program")
    assert server_version(str(plain)) == (None, f"{plain} is not an executable file")


def test_a_remembered_binary_is_found_until_it_is_gone(tmp_path, monkeypatch):
    from workbench.engine.config.preferences import remember
    from workbench.engine.server.discovery import find_server_binary

    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("LLAMA_SERVER", raising=False)
    chosen = script(tmp_path / "llama-server", "echo 'version: 1 (a)'")
    remember(server_bin=chosen, server_bin_found_by="Homebrew")
    found = find_server_binary()
    assert (found.path, found.found_by) == (chosen, "remembered choice (Homebrew)")
    assert find_server_binary(explicit=chosen).found_by == "explicit path"  # still first
    os.remove(chosen)
    assert find_server_binary().found_by != "remembered choice (Homebrew)"
