"""The near side against far sides that go wrong (``far_sides.py``), without a server: each
fault is one clear line, in bounded time, with the process carrying the channel ended."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from workbench import __version__
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.remote.protocol import PROTOCOL, ProtocolError
from workbench.engine.remote.remote_runner import RemoteRunner
from workbench.engine.remote.targets import ProcessTarget
from workbench.engine.run.lifecycle import RunLifecycle
from workbench.engine.run.runner import RunOptions
from workbench.engine.store import open_session

pytestmark = pytest.mark.timeout(60)

FAR_SIDES = str(Path(__file__).with_name("far_sides.py"))
EXPERIMENT = parse_experiment('name = "far"\n[workload]\nrequests = 2\n', name_hint="far")


def runner(tmp_path: Path, mode: str) -> RemoteRunner:
    return RemoteRunner(
        EXPERIMENT,
        RunOptions(tmp_path / "out"),
        ProcessTarget("gpubox"),
        [sys.executable, FAR_SIDES, mode],
        None,
        reply_timeout_s=10.0,
        liveness_s=1.0,
        ping_every_s=0.2,
        stop_wait_s=5.0,
    )


def test_garbage_before_the_run_is_one_line_and_ends_the_process(tmp_path):
    far = runner(tmp_path, "junk")
    started = time.monotonic()
    with pytest.raises(ProtocolError) as raised:
        far.prepare()
    assert str(raised.value).startswith("gpubox sent something that is not the agent's protocol")
    assert "\n" not in str(raised.value)
    assert time.monotonic() - started < 10.0
    assert far._link is not None and far._link.process.poll() is not None
    assert not far.session_path.exists()  # refused before anything was made


def test_another_protocol_says_both_versions_and_what_to_do(tmp_path):
    with pytest.raises(WorkbenchError) as raised:
        runner(tmp_path, "old").prepare()
    assert str(raised.value) == (
        f"gpubox: workbench 9.9.9 there, {__version__} here: protocol {PROTOCOL + 1} vs "
        f"{PROTOCOL}, upgrade with `pip install concurrency-workbench=={__version__}` on the "
        "older side"
    )


def test_a_far_side_gone_silent_is_a_lost_connection_within_the_liveness_bound(tmp_path):
    far = runner(tmp_path, "stall")
    started = time.monotonic()
    result = RunLifecycle(far, stop_wait_s=10.0).run()
    assert time.monotonic() - started < 20.0
    assert result.status == "incomplete"
    assert "gpubox sent nothing for 1 s" in (result.error or "")
    assert f"workbench fetch gpubox {far.session_path}" in (result.error or "")
    with open_session(far.session_path) as session:
        assert session.status == "incomplete"
        assert session.remote_origin().received_all is False
    assert far._link is not None and far._link.process.poll() is not None


def test_the_near_copy_is_placed_by_this_machines_wall_clock_at_the_far_origin(tmp_path):
    """A far clock 1,000 s ahead whose run began 5 s ago: the near copy's wall origin is this
    machine's wall clock 5 s ago, not the moment its header came (sessions from several
    machines are placed side by side by it)."""
    far = runner(tmp_path, "ahead")
    try:
        far.prepare()
        now = time.time()
        with open_session(far.session_path) as session:
            wall_origin = session.meta["wall_origin"]
            assert session.remote_origin().clock_offset_ns == pytest.approx(1000e9, abs=0.1e9)
        assert wall_origin == pytest.approx(now - 5.0, abs=0.5)
    finally:
        far.cancel()
        assert far._link is not None
        far._link.kill()


def test_garbage_during_a_run_fails_it_and_keeps_the_session(tmp_path):
    far = runner(tmp_path, "junk-mid-run")
    result = RunLifecycle(far, stop_wait_s=10.0).run()
    assert result.status == "failed"
    assert (result.error or "").startswith("gpubox sent something that is not the agent's protocol")
    assert "\x1b" not in (result.error or "")  # what came is shown safe for a terminal
    with open_session(far.session_path) as session:
        assert session.status == "failed"
        assert any("not the agent's protocol" in n.text for n in session.notices())
    assert far._link is not None and far._link.process.poll() is not None


def test_a_far_command_that_fails_is_one_line_with_what_it_said(tmp_path):
    failing = ["sh", "-c", "echo 'sh: 1: workbench: not found' >&2; exit 127", "sh"]
    far = RemoteRunner(EXPERIMENT, RunOptions(tmp_path), ProcessTarget("gpubox"), failing, None)
    with pytest.raises(WorkbenchError) as raised:
        far.prepare()
    assert str(raised.value) == "the connection to gpubox closed: sh: 1: workbench: not found"


def test_a_cancel_the_far_side_does_not_answer_ends_the_channel_within_its_bound(tmp_path):
    far = runner(tmp_path, "stall")
    far.liveness_s, far.stop_wait_s = 60.0, 1.0  # only the cancel's bound can end it
    lifecycle = RunLifecycle(far, stop_wait_s=20.0)
    lifecycle.prepare()
    lifecycle.start()
    started = time.monotonic()
    lifecycle.cancel()
    result = lifecycle.finish()
    assert time.monotonic() - started < 10.0
    assert result.status == "incomplete"
    assert far._link is not None and far._link.process.poll() is not None


def test_what_the_far_side_says_is_made_safe_for_a_terminal(tmp_path):
    with pytest.raises(WorkbenchError) as raised:
        runner(tmp_path, "evil-error").prepare()
    assert "\x1b" not in str(raised.value) and "\x07" not in str(raised.value)
    assert str(raised.value).startswith("gpubox: ") and "no model here" in str(raised.value)


def test_a_far_clock_out_of_bounds_is_refused(tmp_path):
    with pytest.raises(ProtocolError) as raised:
        runner(tmp_path, "huge-clock").prepare()
    assert str(raised.value) == (
        "gpubox sent something that is not the agent's protocol: a message: pong.t_ns must be "
        f"less than {2**62}, got {10**30}"
    )


def test_a_far_run_takes_no_base_url_nor_a_session_to_resume(tmp_path):
    for options in (
        RunOptions(tmp_path, base_url="http://127.0.0.1:8080"),
        RunOptions(tmp_path, resume=tmp_path / "s.session.sqlite"),
    ):
        far = RemoteRunner(EXPERIMENT, options, ProcessTarget("gpubox"), ["false"], None)
        with pytest.raises(WorkbenchError, match="gpubox: a run there starts its own servers"):
            far.prepare()
