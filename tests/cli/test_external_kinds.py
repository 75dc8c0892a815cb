"""External mode against a mock of each server kind (llama.cpp, vLLM, SGLang /metrics names):
the run says which kind it found, the session keeps its requests and KV-cache series, the
window's run model fills its plots from them, and the cross-checks read each kind's
counters. The mock runs in a process of its own, as a real server would."""

from __future__ import annotations

import functools

import pytest
from rich.console import Console

from workbench.cli.main import main
from workbench.cli.tables import results_table
from workbench.engine.base.server_kinds import LLAMACPP
from workbench.engine.figures import client_limits
from workbench.engine.measure.sampler import ServerSampler
from workbench.engine.run import config_run
from workbench.engine.run.replay import load_session_events
from workbench.engine.store import open_session
from workbench.mock_server import EXPOSITIONS
from workbench.mock_server import MockProcess as Mock
from workbench.ui.run_model import RunModel

# Streams of about 0.26 s each (30 ms to the first token, 23 gaps of 10 ms): the sampler,
# ticking at 20 Hz here (4 Hz in a real run), sees them in flight four or five times.
MOCK = ("--ttft-ms", "30", "--itl-ms", "10", "--tokens", "24", "--slots", "4")
QUICK = ("--ttft-ms", "20", "--itl-ms", "5", "--tokens", "24", "--slots", "4")
EXPERIMENT = 'name = "kinds"\n[workload]\nrequests = 4\nmax_tokens = 24\nwarmup = 0\n'


@pytest.fixture(autouse=True)
def quick_sampler(monkeypatch):
    monkeypatch.setattr(config_run, "ServerSampler", functools.partial(ServerSampler, http_hz=20.0))


def run_external(tmp_path, key, capsys, timing=MOCK):
    """A CLI run against the mock speaking ``key``: what it printed and its session."""
    experiment = tmp_path / "kinds.toml"
    experiment.write_text(EXPERIMENT)
    out = tmp_path / "out"
    with Mock(*timing, "--metrics", key) as mock:
        code = main(["run", str(experiment), "--out", str(out), "--base-url", mock.url])
    printed = capsys.readouterr().out
    assert code == 0, printed
    (session,) = out.glob("*.session.sqlite")
    return printed, session


@pytest.mark.parametrize("key", sorted(EXPOSITIONS))
def test_each_kind_is_reported_and_fills_the_server_plots(tmp_path, capsys, key):
    kind = EXPOSITIONS[key].kind
    printed, session_path = run_external(tmp_path, key, capsys)
    slots = "/slots gives busy slots" if kind.slots else "no /slots"
    gives = "requests running, requests waiting" + ("" if kind is LLAMACPP else ", KV-cache use")
    said = f"{kind.name} detected: /metrics gives {gives}; {slots}"
    assert said in " ".join(printed.split())  # the terminal wraps long lines
    with open_session(session_path) as session:
        assert any(n.text.startswith(said) for n in session.notices())
        assert session.samples("metrics_samples", 0)
        run = session.summaries()[0].runs[0]
    # The window's view of the session: the same events as live, replayed.
    model = RunModel()
    model.apply([event for _, event in load_session_events(session_path)])
    assert model.server.kind is kind and model.server.kind_text.startswith(said)
    assert model.running[0] and max(model.running[1]) >= 1
    assert model.waiting[0] and set(model.waiting[1]) == {0.0}  # the mock never queues
    if kind is LLAMACPP:
        assert model.kv_usage == ([], [])  # per slot from /slots instead
    else:
        assert max(model.kv_usage[1]) > 0
    # Each kind's counters agree with the responses; llama.cpp also times its decoding.
    checks = [c.split(":")[0] for c in run.cross_checks.checks]
    expected = ["decode time", "output tokens", "prompt tokens"]
    assert checks == (expected if kind is LLAMACPP else [*expected[1:], "requests"])
    assert run.cross_checks.checks_failed == []


def test_a_client_limited_external_run_is_flagged(tmp_path, capsys, monkeypatch):
    """The client-limited mark does not depend on who started the server: with the bar for
    a busy measuring loop at zero, an external run is marked in the notices, the terminal's
    table and the stored session."""
    monkeypatch.setattr(client_limits, "LOOP_BUSY_LIMIT", 0.0)
    printed, session_path = run_external(tmp_path, "vllm", capsys, QUICK)
    said = " ".join(printed.split())
    # A loaded machine may add a late dispatch to the reasons, ahead of the busy loop.
    assert "[external] client-limited (" in said and "measuring loop busy" in said
    assert "[clie" in printed  # the table's mark, cut to the 160 columns of a pipe
    with open_session(session_path) as session:
        assert session.meta["mode"] == "external"
        (summary,) = session.summaries()
    assert summary.client_limited and "measuring loop busy" in summary.client_limited
    console = Console(width=400, record=True)
    console.print(results_table([summary]))
    # The server runs elsewhere: its machine is unknown, never quiet.
    assert "│ external [client-limited] [machine unknown] │" in console.export_text()
