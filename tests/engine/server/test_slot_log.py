"""Which slot served each request, from the server's log: parsing and matching, then a real
run where every request (12 tokens: too short for /slots samples) gets its slot."""

from __future__ import annotations

import pytest

from tests.conftest import older_session
from workbench.engine.analysis.export import request_rows
from workbench.engine.base.records import RequestRecord
from workbench.engine.run.replay import session_events
from workbench.engine.server.slot_log import SlotLog, SlotMatch, parse_slot_timings
from workbench.engine.store import open_session
from workbench.ui.run_model import RunModel

# Lines as llama-server (build 11434) writes them; other lines interleave.
LOG = """\
0.04.022.569 I slot launch_slot_: id  1 | task 0 | processing task, is_child = 0
0.04.233.454 I slot print_timing: id  1 | task 0 | prompt eval time =     179.45 ms /    31 tokens (    5.79 ms per token,   172.75 tokens per second)
0.04.233.460 I slot launch_slot_: id  0 | task 5 | processing task, is_child = 0
0.04.233.509 I slot print_timing: id  1 | task 0 |        eval time =      31.14 ms /     4 tokens (   10.38 ms per token,    96.34 tokens per second)
0.04.233.531 I slot print_timing: id  1 | task 0 |       total time =     210.59 ms /    35 tokens
0.04.233.867 I slot      release: id  1 | task 0 | stop processing: n_tokens = 34, truncated = 0
0.04.280.390 I slot print_timing: id  0 | task 5 | prompt eval time =      11.27 ms /     1 tokens (   11.27 ms per token,    88.76 tokens per second)
0.04.280.444 I slot print_timing: id  0 | task 5 |        eval time =      17.62 ms /     3 tokens (    8.81 ms per token,   113.49 tokens per second)
"""  # noqa: E501


def record(index: int, prompt_ms: float, prompt_n: int, eval_ms: float, eval_n: int):
    timings = {
        "prompt_ms": prompt_ms,
        "prompt_n": prompt_n,
        "predicted_ms": eval_ms,
        "predicted_n": eval_n,
    }
    return RequestRecord(0, 0, index, "p", ok=True, timings=timings)


def test_each_finished_task_is_parsed_with_its_slot():
    tasks = parse_slot_timings(LOG)
    assert [(t.slot, t.task, t.prompt_n, t.eval_n) for t in tasks] == [(1, 0, 31, 4), (0, 5, 1, 3)]
    assert tasks[0].prompt_ms == 179.45 and tasks[0].eval_ms == 31.14


# Older builds: one header, then the figures on lines of their own ("\n\r" between).
OLD_LOG = (
    "slot print_timing: id  0 | task 7 | \n\rprompt eval time =     179.45 ms /    31 tokens"
    " (    5.79 ms per token,   172.75 tokens per second)\n\r       eval time =      31.14 ms"
    " /     4 tokens (   10.38 ms per token,    96.34 tokens per second)\n\r      total time ="
    "     210.59 ms /    35 tokens\n"
    "llama_perf_context_print: prompt eval time =     999.00 ms /    31 tokens\n"
    "llama_perf_context_print:        eval time =      31.14 ms /     4 tokens\n"
)


def test_the_older_log_layout_is_read_too():
    tasks = parse_slot_timings(OLD_LOG)
    assert [(t.slot, t.task, t.prompt_ms, t.prompt_n, t.eval_ms, t.eval_n) for t in tasks] == [
        (0, 7, 179.45, 31, 31.14, 4)
    ]


def test_records_match_their_logged_task_by_counts_and_times(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(LOG)
    a = record(0, 179.448, 31, 31.1401, 4)  # the client sees the unrounded numbers
    b = record(1, 11.2704, 1, 17.62, 3)
    stranger = record(2, 179.448, 31, 99.0, 4)  # same prompt, other generation time
    failed = RequestRecord(0, 0, 3, "p", ok=False)
    slot_log = SlotLog(log)
    matched = slot_log.assign([a, b, stranger, failed])
    assert matched == [SlotMatch(a, 1), SlotMatch(b, 0)]
    assert all(r.slot is None for r in (a, b))  # published records are never changed
    assert [r.slot for r in slot_log.named([a, b, stranger])] == [1, 0, None]


def test_a_logged_task_explains_one_request_and_half_written_lines_wait(tmp_path):
    log = tmp_path / "server.log"
    lines = LOG.splitlines(keepends=True)
    log.write_text("".join(lines[:3]) + lines[3][:40])  # its eval line is being written
    slot_log = SlotLog(log)
    first = record(0, 179.45, 31, 31.14, 4)
    other = record(1, 11.27, 1, 17.62, 3)
    assert slot_log.assign([first, other]) == []
    log.write_text("".join(lines))  # the eval line is complete now
    assert slot_log.assign([first, other]) == [SlotMatch(first, 1), SlotMatch(other, 0)]
    assert slot_log.assign([first, other]) == []  # named once
    twin = record(2, 179.45, 31, 31.14, 4)
    assert slot_log.assign([twin]) == []  # its task already explained the first record
    assert SlotLog(tmp_path / "missing.log").assign([twin]) == []


def test_a_request_two_tasks_fit_equally_keeps_no_slot(tmp_path):
    log = tmp_path / "server.log"
    same = "slot print_timing: id  {slot} | task {task} | {kind} time =  {ms} ms / {n} tokens\n"
    log.write_text(
        "".join(
            same.format(slot=slot, task=slot, kind=kind, ms=ms, n=n)
            for slot in (0, 1)
            for kind, ms, n in (("prompt eval", "100.00", 40), ("eval", "50.00", 8))
        )
    )
    ambiguous = record(0, 100.001, 40, 50.002, 8)
    assert SlotLog(log).assign([ambiguous]) == [] and ambiguous.slot is None


@pytest.mark.server
def test_every_request_of_a_real_run_knows_its_slot(recorded_session):
    with open_session(recorded_session) as session:
        one, two = ([r for r in session.records(c.index) if not r.warmup] for c in session.configs)
        assert all(r.ok and r.slot == 0 for r in one)
        assert all(r.ok and r.slot in (0, 1) for r in two)
        assert {r.slot for r in two} == {0, 1}  # 3 requests at once on 2 slots
        rows = request_rows(session)
        assert [row["slot"] for row in rows if not row["warmup"]] == [r.slot for r in one + two]
        # A reopened session shows the same lanes: the views get the slots from the records.
        model = RunModel()
        model.apply([event for _, event in session_events(session)])
        assert sorted(v.slot for v in model.requests.values()) == sorted(r.slot for r in one + two)


def test_a_version_2_session_reads_without_slots(sweep_session, tmp_path):
    def slots(session) -> list[list[int | None]]:
        return [[r.slot for r in session.records(c.index) if not r.warmup] for c in session.configs]

    with open_session(sweep_session) as session:
        assert slots(session) == [[0, 0, 0], [0, 1, 0]]
    old = older_session(sweep_session, tmp_path, 2, "request_slots")
    with open_session(old) as session:
        assert session.schema_version == 2
        assert slots(session) == [[None] * 3, [None] * 3]
        figures = [(c.label, c.status, c.runs[0].ttft_p50_s) for c in session.summaries()]
        assert figures == [("np=1", "ok", 1.3), ("np=2", "ok", 0.1)]


@pytest.mark.server
def test_a_log_that_cannot_be_followed_costs_the_lanes_not_the_run(tmp_path, monkeypatch):
    from workbench.engine.config.experiment import parse_experiment
    from workbench.engine.run.lifecycle import run_experiment
    from workbench.engine.run.runner import RunOptions

    def unreadable(self, records):
        if any(r.ok for r in records):
            raise ValueError("garbled")
        return []

    monkeypatch.setattr(SlotLog, "assign", unreadable)
    experiment = parse_experiment(
        "[server]\nslots = 1\nctx = 1024\n[workload]\nrequests = 2\nmax_tokens = 4\nwarmup = 0\n"
    )
    result = run_experiment(experiment, RunOptions(tmp_path))
    assert result.status == "complete"
    with open_session(result.session_path) as session:
        assert [r.ok for r in session.records(0)] == [True, True]
        assert any(
            "slot lanes: cannot follow the server log" in (n.text or "") for n in session.notices()
        )
