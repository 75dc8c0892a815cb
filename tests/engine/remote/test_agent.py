"""``workbench agent`` served over pipes in this process: each operation's answer, what it
refuses, and that neither garbage nor a channel gone crashes it."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from tests.engine.waiting import until
from tests.made_sessions import write_session
from workbench import __version__
from workbench.engine.events import RequestFinished
from workbench.engine.remote.agent import Agent, Channel, serve
from workbench.engine.remote.protocol import (
    PROTOCOL,
    DoneMessage,
    ErrorMessage,
    FetchOp,
    dump,
    parse,
    read_line,
)
from workbench.engine.store import open_session

pytestmark = pytest.mark.timeout(60)


@dataclass
class Served:
    """An agent on a thread, and this side's ends of its pipes."""

    to_agent: BinaryIO
    from_agent: BinaryIO
    thread: threading.Thread
    status: list[int]

    def send(self, op: str, **fields: Any) -> None:
        self.to_agent.write(dump({"op": op, **fields}))
        self.to_agent.flush()

    def receive(self) -> Any:
        line = read_line(self.from_agent)
        assert line is not None, "the agent ended the channel"
        return parse(line, "kind")

    def end(self) -> int:
        """Close its stdin: the near side gone. Returns what ``serve`` returned."""
        self.to_agent.close()
        self.thread.join(30)
        assert not self.thread.is_alive()
        return self.status[0]


@pytest.fixture
def agent(tmp_path) -> Iterator[Served]:
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    stdin, stdout = os.fdopen(in_read, "rb"), os.fdopen(out_write, "wb")
    status: list[int] = []

    def run() -> None:
        try:
            status.append(serve(stdin, stdout, tmp_path / "agent"))
        finally:
            stdin.close()
            with contextlib.suppress(BrokenPipeError):  # what a gone channel left unsent
                stdout.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    served = Served(os.fdopen(in_write, "wb"), os.fdopen(out_read, "rb"), thread, status)
    yield served
    if not served.to_agent.closed:
        served.end()
    served.from_agent.close()


def test_hello_says_the_protocol_the_version_and_the_host(agent):
    agent.send("hello", protocol=PROTOCOL, version=__version__)
    hello = agent.receive()
    assert hello.kind == "hello"
    assert (hello.protocol, hello.version) == (PROTOCOL, __version__)
    assert hello.hostname
    assert agent.end() == 0


def test_another_protocol_is_refused_naming_both_numbers_and_versions(agent):
    agent.send("hello", protocol=PROTOCOL + 1, version="0.2.0")
    refused = agent.receive()
    assert refused == ErrorMessage(
        kind="error",
        text=f"workbench {__version__} here speaks protocol {PROTOCOL}, the near side 0.2.0 "
        f"speaks {PROTOCOL + 1}: install the same version on both machines",
    )
    agent.thread.join(10)
    assert agent.status == [1]


def test_ping_is_answered_with_the_far_clock(agent):
    before = time.perf_counter_ns()
    agent.send("ping", seq=7)
    pong = agent.receive()
    assert pong.kind == "pong" and pong.seq == 7
    assert before <= pong.t_ns <= time.perf_counter_ns()


def test_check_answers_the_hosts_facts(agent):
    agent.send("check", model=None, server_bin=None)
    facts = agent.receive().facts
    assert facts.protocol == PROTOCOL and facts.workbench_version == __version__
    agent.send("check", model="/no/such.gguf", server_bin="/no/llama-server")
    facts = agent.receive().facts
    assert any("/no/llama-server" in p for p in facts.problems)
    assert any("model file not found: /no/such.gguf" in p for p in facts.problems)


def test_check_reads_the_model_through_as_plan_does(agent, truncated_model):
    agent.send("check", model=str(truncated_model), server_bin=None)
    facts = agent.receive().facts
    assert facts.model is None
    assert any(
        "the data of tensor 'token_embd.weight' runs past the end of the file" in p
        for p in facts.problems
    )


def test_a_run_the_far_side_refuses_is_an_error_then_done(agent, tmp_path):
    agent.send(
        "run",
        experiment_toml="[workload]\nrequests = 1\n",
        experiment_name="refused",
        model=str(tmp_path / "missing.gguf"),
        server_bin=None,
    )
    refused = agent.receive()
    assert refused.kind == "error" and "model file not found" in refused.text
    assert agent.receive() == DoneMessage(kind="done")


def test_fetch_takes_a_run_id_only(agent):
    for run_id, said in (
        ("../../etc/passwd", "should match pattern '^[0-9a-f]{32}$', got '../../etc/passwd'"),
        ("A" * 32, "should match pattern"),
        (5, "must be text, got 5"),
    ):
        agent.send("fetch", run_id=run_id)
        answer = agent.receive()
        assert answer.kind == "error" and answer.text.startswith("a message: fetch.run_id ")
        assert said in answer.text
    agent.send("fetch", run_id="0" * 32)
    answer = agent.receive()
    assert answer.kind == "error" and answer.text.startswith(f"no session of run {'0' * 32}")


@pytest.mark.parametrize(
    ("op", "said"),
    [({"op": "ping"}, "a message: ping.seq is missing"),
     ({"op": "ping", "seq": True}, "a message: ping.seq must be a whole number, got True"),
     ({"op": "run", "model": None}, "a message: run.experiment_toml is missing"),
     ({"op": "go", "t0_ns": -1}, "a message: go.t0_ns must be greater than or equal to 0"),
     ({"op": "go", "t0_ns": 2**62}, "a message: go.t0_ns must be less than 4611686018427387904"),
     ({"op": "check", "model": ["/etc/passwd"]}, "a message: check.model must be text"),
     ({"op": "load", "job": "rm -rf /"}, "a message: load.job must be a table, got 'rm -rf /'")],
)  # fmt: skip
def test_an_operation_with_a_wrong_field_is_one_line_and_the_agent_goes_on(agent, op, said):
    agent.to_agent.write(dump(op))
    agent.to_agent.flush()
    answer = agent.receive()
    assert answer.kind == "error" and answer.text.startswith(said), answer.text
    agent.send("ping", seq=1)
    assert agent.receive().kind == "pong"
    assert agent.end() == 0


def test_a_hello_with_a_wrong_field_is_one_line_and_ends_the_agent(agent):
    agent.to_agent.write(dump({"op": "hello", "protocol": "2", "version": "0.2.0"}))
    agent.to_agent.flush()
    answer = agent.receive()
    assert answer == ErrorMessage(
        kind="error", text="a message: hello.protocol must be a whole number, got '2'"
    )
    agent.thread.join(10)
    assert agent.status == [1]


def test_an_unknown_operation_is_one_line_and_ends_the_agent(agent):
    agent.to_agent.write(b'{"op":"\\u001b[2Jexec","argv":["sh"]}\n')
    agent.to_agent.flush()
    answer = agent.receive()
    assert answer.kind == "error" and answer.text.startswith("unknown op '\ufffd[2Jexec': ")
    assert "\x1b" not in answer.text
    agent.thread.join(10)
    assert agent.status == [1]


def test_fetch_sends_the_run_s_session_with_its_sha256(agent, tmp_path):
    run_id = "ab" * 16
    folder = tmp_path / "agent" / run_id
    folder.mkdir(parents=True)
    write_session(folder / "far.session.sqlite")
    agent.send("fetch", run_id=run_id)
    announced = agent.receive()
    assert announced.kind == "file" and announced.run_id == run_id
    data = b""
    while (message := agent.receive()).kind == "chunk":
        data += message.data
    assert message.kind == "file_end"
    assert len(data) == announced.size
    assert hashlib.sha256(data).hexdigest() == announced.sha256
    fetched = tmp_path / "fetched.session.sqlite"
    fetched.write_bytes(data)
    with open_session(fetched) as session, open_session(folder / "far.session.sqlite") as far:
        assert session.records(0) == far.records(0)
    assert sorted(p.name for p in folder.iterdir()) == ["far.session.sqlite"]  # no copy left


class _Watching(io.BytesIO):
    """A stdout that notes the folder's files as each message goes out."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder
        self.seen: list[tuple[str, list[str]]] = []

    def write(self, data: Any) -> int:
        kind = parse(bytes(data), "kind").kind
        self.seen.append((kind, sorted(p.name for p in self.folder.iterdir())))
        return super().write(data)


def test_fetch_s_copy_is_gone_before_the_far_side_hears_the_end(tmp_path):
    run_id = "cd" * 16
    folder = tmp_path / "agent" / run_id
    folder.mkdir(parents=True)
    write_session(folder / "far.session.sqlite")
    stdout = _Watching(folder)
    Agent(Channel(stdout), tmp_path / "agent").handle(FetchOp(op="fetch", run_id=run_id))
    kinds = [kind for kind, _ in stdout.seen]
    assert kinds[0] == "file" and kinds[-1] == "file_end"
    assert any(name.startswith(".fetch-") for name in stdout.seen[0][1])  # the copy it sends
    assert stdout.seen[-1][1] == ["far.session.sqlite"]


def test_garbage_is_answered_with_one_line_and_ends_the_agent(agent):
    agent.to_agent.write(b"\x00not json\n")
    agent.to_agent.flush()
    answer = agent.receive()
    assert answer.kind == "error" and "not a message of the agent's protocol" in answer.text
    agent.thread.join(10)
    assert agent.status == [1]


def test_a_channel_gone_is_no_crash(agent):
    agent.from_agent.close()  # nobody reads what it writes: its writes fail
    agent.send("ping", seq=1)
    agent.send("ping", seq=2)
    assert agent.end() == 0


@pytest.mark.server
def test_a_write_that_fails_cancels_the_run_and_keeps_its_session(agent, tmp_path):
    toml = "[server]\nslots = 1\nctx = 512\n[workload]\nrequests = 6\nmax_tokens = 8\nwarmup = 0\n"
    agent.send("run", experiment_toml=toml, experiment_name="cut", model=None, server_bin=None)
    run_id = agent.receive().run_id
    while not any(isinstance(e, RequestFinished) for e in getattr(agent.receive(), "events", [])):
        pass
    agent.from_agent.close()  # the channel is gone, stdin still open: only writes fail
    (session,) = (tmp_path / "agent" / run_id).glob("*.session.sqlite")

    def ended() -> bool:
        with open_session(session) as far:
            return far.meta["status"] != "running"

    until(ended, 60.0, "the run's end")
    with open_session(session) as far:
        assert far.status == "cancelled"
        finished = [r for r in far.records(0) if r.ok]
        assert 1 <= len(finished) < 6  # those after the cut were cancelled
