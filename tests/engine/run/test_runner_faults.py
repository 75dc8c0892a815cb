"""Bad input and failing components: each gives a clear, specific error and loses nothing."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from tests.fakes.sse_server import Behaviour, serve_in_thread
from workbench.engine.base.errors import (
    ExternalServerError,
    ModelFileError,
    OutputDirError,
    PortInUseError,
    ServerBinaryNotFound,
    SessionError,
)
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import EventBus, FirstToken, ServerReady
from workbench.engine.run.lifecycle import run_experiment
from workbench.engine.run.runner import ExperimentRunner, RunOptions
from workbench.engine.server.external import probe_external
from workbench.engine.server.llama_server import check_port_free, free_port
from workbench.engine.store import SCHEMA_VERSION, open_session

SMALL = """
name = "small"
[server]
slots = {slots}
ctx = 2048
{server_extra}
[workload]
requests = {requests}
max_tokens = {max_tokens}
warmup = 0
"""


def small(write_experiment, slots="1", requests=2, max_tokens=8, server_extra=""):
    text = SMALL.format(
        slots=slots, requests=requests, max_tokens=max_tokens, server_extra=server_extra
    )
    return write_experiment(text)[1]


def fake_binary(tmp_path: Path, script: str) -> str:
    """A stand-in llama-server that answers the hardware fingerprint's ``--version`` at once
    (as the real one does) and runs ``script`` when started as a server."""
    path = tmp_path / "fake-llama-server"
    version = 'if [ "$1" = --version ]; then echo "version: 1 (fake)"; exit 0; fi\n'
    path.write_text("#!/bin/sh\n" + version + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_missing_binary_says_how_to_get_one(write_experiment, tmp_path, monkeypatch):
    runner = ExperimentRunner(
        small(write_experiment), RunOptions(tmp_path, server_bin=str(tmp_path / "nope"))
    )
    with pytest.raises(ServerBinaryNotFound, match=r"does not exist.*make run"):
        runner.prepare()
    monkeypatch.setenv("LLAMA_SERVER", str(tmp_path / "also-missing"))
    with pytest.raises(ServerBinaryNotFound, match="LLAMA_SERVER"):
        ExperimentRunner(small(write_experiment), RunOptions(tmp_path)).prepare()


def test_missing_and_non_gguf_model(write_experiment, tmp_path):
    missing = small(write_experiment, server_extra=f'model = "{tmp_path / "no.gguf"}"')
    with pytest.raises(ModelFileError, match="not found"):
        ExperimentRunner(missing, RunOptions(tmp_path / "out" / "deep")).prepare()
    assert not (tmp_path / "out").exists()  # refused before anything was made
    text_file = tmp_path / "notes.gguf"
    text_file.write_text("this is not a model at all, just some text " * 4)
    wrong = small(write_experiment, server_extra=f'model = "{text_file}"')
    with pytest.raises(ModelFileError, match="not a GGUF model file"):
        ExperimentRunner(wrong, RunOptions(tmp_path / "out")).prepare()


def test_a_truncated_model_is_refused_before_any_server_starts(
    write_experiment, tmp_path, truncated_model
):
    """Read through to its tensors' data, as ``plan`` reads it: once it got past the magic,
    started a server that failed to load it and left a failed session behind."""
    draft = small(write_experiment, server_extra=f'draft_model = "{truncated_model}"')
    with pytest.raises(ModelFileError, match=r"\[server\] draft_model: .*runs past the end"):
        ExperimentRunner(draft, RunOptions(tmp_path / "out")).prepare()
    experiment = small(write_experiment, server_extra=f'model = "{truncated_model}"')
    runner = ExperimentRunner(experiment, RunOptions(tmp_path / "out"))
    with pytest.raises(ModelFileError) as refused:
        runner.prepare()
    assert str(refused.value) == (
        f"{truncated_model} is not a readable GGUF file: the data of tensor "
        "'token_embd.weight' runs past the end of the file (truncated or corrupt)"
    )
    assert not (tmp_path / "out").exists()  # no session, no server log


@pytest.mark.server
def test_a_model_the_server_cannot_load_fails_start_with_the_server_log(
    write_experiment, tmp_path, unknown_architecture_model
):
    """Whole and well formed, but of an architecture llama.cpp does not know: only the
    server finds that out, and its log says so."""
    experiment = small(write_experiment, server_extra=f'model = "{unknown_architecture_model}"')
    result = run_experiment(experiment, RunOptions(tmp_path / "out"))
    (summary,) = result.summaries
    assert summary.status == "failed"
    assert "while starting" in summary.error and "last log lines" in summary.error
    assert "exited with status" in summary.error
    assert "unknown model architecture: 'llamx'" in summary.error
    with open_session(result.session_path) as session:
        assert session.configs[0].status == "failed"
        assert session.status == "complete"


def test_sigill_at_start_is_explained(write_experiment, tmp_path):
    binary = fake_binary(tmp_path, 'echo "loading model"; kill -ILL $$')
    options = RunOptions(tmp_path, server_bin=binary)
    (summary,) = run_experiment(small(write_experiment), options).summaries
    assert "SIGILL" in summary.error
    assert "CPU instructions" in summary.error and "mno-amx" in summary.error
    assert "loading model" in summary.error  # the log tail is shown


def test_server_that_never_gets_healthy_hits_the_deadline(write_experiment, tmp_path):
    pid_file = tmp_path / "pid"
    binary = fake_binary(tmp_path, f"echo $$ > {pid_file}; exec sleep 60")
    experiment = small(write_experiment, server_extra="startup_timeout_s = 0.3")
    (summary,) = run_experiment(experiment, RunOptions(tmp_path, server_bin=binary)).summaries
    assert "did not become healthy within 0.3 s" in summary.error
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_port_already_taken(write_experiment, tmp_path):
    """Refused before the server is started: the stand-in binary never runs as a server."""
    binary = fake_binary(tmp_path, 'echo "started as a server"; exit 3')
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        experiment = small(write_experiment, server_extra=f"port = {port}")
        (summary,) = run_experiment(experiment, RunOptions(tmp_path, server_bin=binary)).summaries
        with pytest.raises(PortInUseError) as refused:
            check_port_free(port)
    assert summary.status == "failed"
    assert summary.error == str(refused.value)
    assert f"port {port}" in summary.error and "already in use" in summary.error


@pytest.mark.server
def test_a_fixed_port_serves_every_configuration_of_a_sweep(write_experiment, tmp_path):
    """The previous server's TIME_WAIT sockets must not make the port look taken."""
    experiment = small(write_experiment, slots="[1, 2]", server_extra=f"port = {free_port()}")
    result = run_experiment(experiment, RunOptions(tmp_path))
    assert [(s.status, s.error) for s in result.summaries] == [("ok", None), ("ok", None)]


@pytest.mark.server
def test_server_killed_mid_run_fails_its_requests_and_the_next_config_runs(
    write_experiment, tmp_path
):
    experiment = small(write_experiment, slots="[1, 2]", requests=4, max_tokens=48)
    bus = EventBus()
    ready = bus.subscribe(ServerReady, FirstToken)
    killed = threading.Event()

    def killer() -> None:
        pid = None
        while not killed.is_set():
            event = ready.queue.get(timeout=60)
            if isinstance(event, ServerReady):
                pid = event.pid
            elif event.config_index == 0 and pid is not None:
                os.kill(pid, signal.SIGKILL)
                killed.set()

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    result = run_experiment(experiment, RunOptions(tmp_path), bus)
    thread.join(5)
    assert killed.is_set()
    first, second = result.summaries
    assert first.status == "failed" and "SIGKILL" in first.error and "mid-run" in first.error
    assert first.value("failed") >= 3
    assert second.status == "ok" and second.value("ok") == 4
    with open_session(result.session_path) as session:
        failed = [r for r in session.records(0) if not r.ok]
        assert failed and all(r.error for r in failed)
        states = [row.state for row in session.samples("server_states", 0)]
        assert "crashed" in states


def test_external_url_that_does_not_answer():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ExternalServerError, match="nothing answers"):
        probe_external(url)


def test_output_folder_not_writable(write_experiment, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    runner = ExperimentRunner(small(write_experiment), RunOptions(blocker / "results"))
    with pytest.raises(OutputDirError, match="cannot write to the output folder"):
        runner.prepare()


def test_session_from_a_newer_version_is_refused_untouched(tmp_path):
    path = tmp_path / "future.session.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE session (id INTEGER)")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = path.read_bytes()
    with pytest.raises(SessionError, match="newer workbench"):
        open_session(path)
    assert path.read_bytes() == before


def test_file_that_is_not_a_session(tmp_path):
    path = tmp_path / "x.session.sqlite"
    path.write_bytes(b"definitely not sqlite" * 100)
    with pytest.raises(SessionError, match="not a workbench session"):
        open_session(path)
    with pytest.raises(SessionError, match="not found"):
        open_session(tmp_path / "missing.sqlite")


def test_a_server_without_a_tokenizer_gets_prompts_of_about_the_length(tmp_path):
    """An external server that is not llama-server has no /tokenize: prompts are padded a
    word per token, their length left to the server's own count, and the run says so."""
    experiment = parse_experiment(
        "[workload]\nrequests = 2\nmax_tokens = 4\nwarmup = 0\ninput_tokens = 300\n"
    )
    with serve_in_thread(Behaviour(tokens=4)) as server:
        result = run_experiment(experiment, RunOptions(tmp_path, base_url=server.base_url))
        sent = [r.body for r in server.received if r.path == "/v1/chat/completions"]
    assert result.status == "complete" and result.summaries[0].value("ok") == 2
    with open_session(result.session_path) as session:
        records = session.records(0)
        notices = [n.text for n in session.notices()]
    assert all(r.prompt_tokens is None for r in records)
    words = [len(body["messages"][0]["content"].split()) for body in sent]
    assert all(280 <= n <= 310 for n in words), words
    assert any("has no tokenizer to count with" in n and "about 300 tokens" in n for n in notices)


def test_without_a_tokenizer_the_model_files_vocabulary_counts(tmp_path, model_path):
    """Given the model file (--model), prompts are sized by its own vocabulary."""
    from workbench.engine.models.gguf_tokenizer import estimator_for

    experiment = parse_experiment(
        f"[server]\nmodel = '{model_path}'\n"
        "[workload]\nrequests = 2\nmax_tokens = 4\nwarmup = 0\ninput_tokens = 300\n"
    )
    with serve_in_thread(Behaviour(tokens=4)) as server:
        result = run_experiment(experiment, RunOptions(tmp_path, base_url=server.base_url))
        sent = [r.body for r in server.received if r.path == "/v1/chat/completions"]
    with open_session(result.session_path) as session:
        notices = [n.text for n in session.notices()]
    count = estimator_for(model_path)
    counts = [count(body["messages"][0]["content"]) for body in sent]
    assert all(299 <= n <= 301 for n in counts), counts
    assert any(f"counted with {model_path.name}'s vocabulary" in n for n in notices)
