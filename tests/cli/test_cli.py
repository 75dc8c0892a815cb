"""``workbench run / show / export`` end to end on the real server, and the CLI's errors."""

from __future__ import annotations

import asyncio
import csv
import json
from pathlib import Path

import pytest

from tests.fakes.sse_server import Behaviour, serve_in_thread
from workbench.cli.main import main
from workbench.engine.analysis.export import LAB_COLUMNS
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.server.llama_server import LlamaServer, free_port
from workbench.engine.store import open_session

SWEEP = """
name = "cli-sweep"
[server]
slots = [1, 2]
ctx = 4096
[workload]
requests = 4
max_tokens = 16
warmup = 1
"""


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


@pytest.mark.server
def test_run_show_export_round_trip(tmp_path, capsys):
    experiment = tmp_path / "sweep.toml"
    experiment.write_text(SWEEP)
    out = tmp_path / "results"
    assert main(["run", str(experiment), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "n_slots=2 n_ctx_slot=2048" in printed
    (session,) = out.glob("*.session.sqlite")

    with (out / "concurrency.csv").open() as fh:
        header = fh.readline().strip().split(",")
    assert header[: len(LAB_COLUMNS)] == LAB_COLUMNS
    rows = read_csv(out / "concurrency.csv")
    assert [(r["slots"], r["n_ctx_slot"], r["concurrency"]) for r in rows] == [
        ("1", "4096", "4"),
        ("2", "2048", "4"),
    ]
    assert all(float(r["agg_tok_s"]) > 0 and r["failed"] == "0" for r in rows)
    requests = read_csv(out / "requests.csv")
    assert len(requests) == 2 * (4 + 1)
    assert {r["warmup"] for r in requests} == {"True", "False"}

    assert main(["show", str(session), "--requests"]) == 0
    shown = capsys.readouterr().out
    assert "np=1" in shown and "np=2" in shown and "complete" in shown

    exported = tmp_path / "again.csv"
    as_json = tmp_path / "session.json"
    per_request = tmp_path / "requests.csv"
    args = ["export", str(session), "--csv", str(exported), "--json", str(as_json)]
    assert main([*args, "--requests-csv", str(per_request)]) == 0
    assert read_csv(exported) == rows
    document = json.loads(as_json.read_text())
    assert document["session"]["status"] == "complete"
    assert [c["facts"]["n_slots"] for c in document["configs"]] == [1, 2]
    summary = document["configs"][1]["summary"]
    assert summary["mean"]["agg_tok_s"] == pytest.approx(float(rows[1]["agg_tok_s"]), rel=1e-3)
    assert document["configs"][0]["process_samples"]
    assert len(read_csv(per_request)) == len(requests)


@pytest.mark.server
def test_external_mode_reads_slots_and_leaves_the_server_alone(
    server_binary, model_path, tmp_path, capsys
):
    server = LlamaServer(
        server_binary, model_path, ServerSettings(slots=2, ctx=4096), tmp_path / "ext.log"
    )
    asyncio.run(server.start())
    try:
        experiment = tmp_path / "ext.toml"
        experiment.write_text(SWEEP)
        out = tmp_path / "ext"
        url = server.base_url + "/v1/"  # as vLLM and Ollama document their base URLs
        code = main(["run", str(experiment), "--out", str(out), "--base-url", url])
        printed = capsys.readouterr().out
        assert code == 0, printed
        assert server.is_running()
        # The real server's own /metrics names and /slots, as the catalogue has them.
        assert (
            "llama.cpp detected: /metrics gives requests running, requests waiting; /slots "
            "gives busy slots and each slot's context use"
        ) in " ".join(printed.split())
        (row,) = read_csv(out / "concurrency.csv")  # server axes collapse in external mode
        assert row["slots"] == "2" and row["label"] == "external"
        assert (row["n_ctx_slot"], row["ctx"]) == ("2048", "4096")  # from /props
        assert row["failed"] == "0"
    finally:
        server.stop()


def test_invalid_experiment_names_the_field(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('[server]\nslots = [1, "two"]\n')
    assert main(["run", str(bad), "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "[server] slots" in err and "'two'" in err and "Traceback" not in err


def test_unreachable_base_url_is_a_clear_error(tmp_path, capsys):
    experiment = tmp_path / "e.toml"
    experiment.write_text(SWEEP)
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["run", str(experiment), "--out", str(tmp_path), "--base-url", url]) == 1
    assert "nothing answers at" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.session.sqlite"))


def test_show_and_export_errors(tmp_path, capsys):
    assert main(["show", str(tmp_path / "missing.sqlite")]) == 1
    assert "session file not found" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "missing.sqlite")]) == 1
    assert "--csv" in capsys.readouterr().err


# -- exit status: a script or CI can tell what happened --------------------------------------
EXIT_EXPERIMENT = 'name = "exits"\n[workload]\nrequests = 3\nmax_tokens = 4\nwarmup = 0\n'


@pytest.mark.parametrize(
    ("behaviour", "expected"),
    [
        (Behaviour(tokens=4), 0),
        (Behaviour(status=500, error_body='{"error": "boom"}'), 3),  # every request failed
        (lambda body: Behaviour(tokens=4, disconnect_after=1 if "1." in str(body) else None), 3),
    ],
    ids=["all-ok", "all-failed", "one-failed"],
)
def test_exit_status_says_whether_requests_failed(tmp_path, capsys, behaviour, expected, request):
    experiment = tmp_path / "e.toml"
    experiment.write_text(EXIT_EXPERIMENT)
    with serve_in_thread(behaviour) as server:
        args = ["run", str(experiment), "--out", str(tmp_path / "out")]
        args += ["--base-url", server.base_url]
        code = main(args)
    assert code == expected, capsys.readouterr()
    if expected:
        said = {"all-failed": "3 requests failed", "one-failed": "1 request failed"}
        assert said[request.node.callspec.id] in capsys.readouterr().out


def test_a_table_that_cannot_be_written_is_an_error_after_the_results(tmp_path, capsys):
    experiment = tmp_path / "e.toml"
    experiment.write_text(EXIT_EXPERIMENT)
    out = tmp_path / "out"
    (out / "concurrency.csv").mkdir(parents=True)  # a folder where the table should go
    with serve_in_thread(Behaviour(tokens=4)) as server:
        code = main(["run", str(experiment), "--out", str(out), "--base-url", server.base_url])
    printed = capsys.readouterr()
    assert code == 1, printed
    assert "cannot write" in printed.err and "Is a directory" in printed.err
    assert "Results" not in printed.out and "exits" in printed.out  # the results came first
    assert "session:" not in printed.out
    (session,) = out.glob("*.session.sqlite")
    with open_session(session) as opened:
        assert opened.status == "complete"


def test_exit_status_of_a_configuration_that_failed(tmp_path, unknown_architecture_model, capsys):
    """A model only the server can refuse: its configuration fails, the run goes on (4)."""
    experiment = tmp_path / "e.toml"
    experiment.write_text(EXIT_EXPERIMENT)
    model = str(unknown_architecture_model)
    args = ["run", str(experiment), "--out", str(tmp_path / "out"), "--model", model]
    assert main(args) == 4


def test_sigterm_while_preparing_says_so(tmp_path):
    """A signal before the run starts (here while probing a server that never answers) once
    ended the process with status 143 and not a word."""
    import socket
    import subprocess
    import sys

    experiment = tmp_path / "e.toml"
    experiment.write_text(EXIT_EXPERIMENT)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        args = ["run", str(experiment), "--out", str(tmp_path / "out"), "--base-url", url]
        proc = subprocess.Popen(
            [sys.executable, "-m", "workbench", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        silent.settimeout(30)
        probe, _ = silent.accept()  # the probe has connected and waits for an answer
        with probe:
            proc.terminate()
            out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, out
    assert "interrupted" in out


def test_credentials_and_api_keys_travel_in_headers_and_are_never_stored(
    tmp_path, capsys, monkeypatch
):
    experiment = tmp_path / "e.toml"
    experiment.write_text(EXIT_EXPERIMENT)
    monkeypatch.setenv("WB_TEST_KEY", "sk-secret-key-123")
    out = tmp_path / "out"
    with serve_in_thread(Behaviour(tokens=4)) as server:
        port = server.base_url.rsplit(":", 1)[1]
        url = f"http://alice:pa%24%24word@127.0.0.1:{port}/v1"
        args = ["run", str(experiment), "--out", str(out), "--base-url", url]
        assert main([*args, "--api-key-env", "WB_TEST_KEY"]) == 0, capsys.readouterr()
        completions = [r for r in server.received if r.method == "POST"]
    assert completions and all(
        r.headers.get("authorization") == "Bearer sk-secret-key-123" for r in completions
    )
    (session,) = out.glob("*.session.sqlite")
    assert main(["export", str(session), "--json", str(tmp_path / "s.json")]) == 0
    assert main(["show", str(session)]) == 0
    printed = capsys.readouterr().out
    for place in [*out.rglob("*"), tmp_path / "s.json"]:
        if place.is_file():
            data = place.read_bytes()
            assert b"sk-secret-key-123" not in data and b"pa$$word" not in data, place
            assert b"pa%24%24word" not in data and b"alice" not in data, place
    assert "alice" not in printed and "sk-secret" not in printed
    with open_session(session) as opened:
        assert opened.meta["base_url"] == f"http://127.0.0.1:{port}/v1"


def test_a_missing_api_key_variable_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("WB_NO_SUCH_KEY", raising=False)
    experiment = tmp_path / "e.toml"
    experiment.write_text(EXIT_EXPERIMENT)
    with serve_in_thread(Behaviour(tokens=4)) as server:
        args = ["run", str(experiment), "--out", str(tmp_path), "--base-url", server.base_url]
        assert main([*args, "--api-key-env", "WB_NO_SUCH_KEY"]) == 1
    assert "WB_NO_SUCH_KEY: that environment variable is not set" in capsys.readouterr().err
