"""Over-saturation end to end: Poisson arrivals above what the server answers are flagged in
the terminal, the session and ``concurrency.csv``, and arrivals below it are not; both have
steady-state figures beside the whole-run ones.

The mock answers every request at once (it never queues), so its capacity is set on the
client: a concurrency limit of 1 lets one request in at a time, each holding it about 0.2 s
(50 ms to the first token, then 15 gaps of 10 ms): about 5 requests a second. The requests
over the limit queue in the client, and the queue's growth is what the flag measures."""

from __future__ import annotations

import csv

from workbench.cli.main import main
from workbench.engine.analysis.export import LAB_COLUMNS
from workbench.engine.figures.saturation import LEFT_UNSENT
from workbench.engine.store import open_session
from workbench.mock_server import MockProcess as Mock

MOCK = ("--ttft-ms", "50", "--itl-ms", "10", "--tokens", "16", "--slots", "1")
# 1.5 requests/s for 14 s, then 8 requests/s for 11 s (Poisson, drawn from the same seed).
EXPERIMENT = """name = "saturation"
zip = ["workload.rate", "workload.requests"]
[workload]
arrival = "poisson"
rate = [1.5, 8.0]
requests = [30, 96]
concurrency = 1
max_tokens = 16
warmup = 0
"""


def run(tmp_path, capsys, experiment_text: str):
    """A CLI run of ``experiment_text`` against the mock: what it printed, its folder and
    its session."""
    experiment = tmp_path / "saturation.toml"
    experiment.write_text(experiment_text)
    out = tmp_path / "out"
    with Mock(*MOCK) as mock:
        code = main(["run", str(experiment), "--out", str(out), "--base-url", mock.url])
    printed = " ".join(capsys.readouterr().out.split())
    assert code == 0, printed
    (session_path,) = out.glob("*.session.sqlite")
    return printed, out, session_path


def test_arrivals_above_capacity_are_flagged_and_below_it_are_not(tmp_path, capsys):
    printed, out, session_path = run(tmp_path, capsys, EXPERIMENT)
    with open_session(session_path) as session:
        below, above = session.summaries()
        due = [r.t_intended_ns for r in session.records(0) if r.t_intended_ns is not None]
    # Long enough to be judged: the flag's absence is the test's answer, not too few points.
    assert (max(due) - min(due)) / 1e9 > 12.0
    assert below.over_saturated is None and "over-saturated" not in below.flags
    assert above.over_saturated and "queue grew" in above.over_saturated
    assert "over-saturated" in above.flags
    assert any(note.startswith("over-saturated: ") for note in above.trust_notes)
    assert "over-saturated (the queue grew" in printed  # the run's notice
    assert "[over-saturated]" in printed  # the results table's mark
    # Both open loops have a steady state; through it the overloaded one answers without a
    # pause (about 5 requests of 16 tokens a second: 78 tok/s measured), the other as its
    # arrivals come (about 1.5 a second).
    for summary in (below, above):
        assert summary.value("steady_s") > 5.0 and summary.value("steady_requests") > 0
    assert above.value("steady_agg_tok_s") > 2 * below.value("steady_agg_tok_s")
    (table,) = out.glob("**/concurrency.csv")
    with table.open() as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
    columns = list(reader.fieldnames or [])
    assert columns[: len(LAB_COLUMNS)] == LAB_COLUMNS
    steady = columns.index("steady_s")  # after every older column
    assert columns[steady : steady + 7] == [
        "steady_s", "steady_requests", "steady_agg_tok_s", "steady_ttft_p50_s",
        "steady_ttft_p90_s", "steady_tpot_p50_ms", "over_saturated",
    ]  # fmt: skip
    assert rows[0]["over_saturated"] == "" and "queue grew" in rows[1]["over_saturated"]
    assert float(rows[0]["steady_agg_tok_s"]) > 0


def test_a_run_asked_to_stop_when_over_saturated_stops(tmp_path, capsys):
    # 8 requests/s, planned for 25 s: the watcher stops it once the queue has grown for
    # the 10 s of arrivals the test needs at the least.
    stopping = EXPERIMENT.replace("rate = [1.5, 8.0]", "rate = 8.0")
    stopping = stopping.replace("requests = [30, 96]", "requests = 200\nstop_when_saturated = true")
    stopping = stopping.replace('zip = ["workload.rate", "workload.requests"]\n', "")
    printed, _, session_path = run(tmp_path, capsys, stopping)
    with open_session(session_path) as session:
        (summary,) = session.summaries()
        records = session.records(0)
    unsent = [r for r in records if r.error == LEFT_UNSENT]
    sent = [r for r in records if r.t_submit_ns is not None]
    assert len(unsent) + len(sent) == 200 and len(unsent) > 50
    assert all(r.ok for r in sent)  # those sent finished
    assert summary.value("requests") == len(sent) and summary.value("failed") == 0
    assert summary.over_saturated and "over-saturated" in summary.flags
    assert f"repeat 1 stopped when over-saturated (stop_when_saturated): {len(unsent)} " in printed
    # Some waited for a place when it stopped (their time had come); the rest never came due.
    waited = [r for r in unsent if r.t_intended_ns is not None]
    assert waited and len(waited) < len(unsent)
