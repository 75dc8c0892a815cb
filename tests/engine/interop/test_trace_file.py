"""Recorded traces read whole and checked: Mooncake's rows and AIPerf's sessions, their times
and lengths scaled for one configuration, and every file that is not what it claims refused
in one line naming the file, the line and the field, within bounded time and memory."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from workbench.cli.main import main
from workbench.engine.base.errors import ExperimentError
from workbench.engine.config.experiment import TraceWorkload, WorkloadSettings
from workbench.engine.interop import trace_file
from workbench.engine.interop.trace_file import (
    AIPERF,
    MAX_ROWS,
    MOONCAKE,
    plan_trace,
    read_trace,
)

MOONCAKE_ROWS = [
    {"timestamp": 0, "input_length": 700, "output_length": 40, "hash_ids": [0, 1]},
    {"timestamp": 500, "input_length": 1200, "output_length": 20, "hash_ids": [0, 1, 2]},
    {"timestamp": 500, "input_length": 300, "output_length": 10, "hash_ids": [7]},
    {"timestamp": 2250.5, "input_length": 100, "output_length": 1, "hash_ids": []},
]
ROOT = Path(__file__).resolve().parents[3]


def write(tmp_path: Path, rows: list, name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def trace_workload(**settings) -> WorkloadSettings:
    return TraceWorkload(trace="t.jsonl", **settings)


def test_a_mooncake_trace_reads_as_written(tmp_path):
    trace = read_trace(write(tmp_path, ["", *MOONCAKE_ROWS]))
    assert trace.format == MOONCAKE and trace.name == "t.jsonl"
    assert [r.line for r in trace.rows] == [2, 3, 4, 5]  # a blank line is no row
    assert [r.timestamp_ms for r in trace.rows] == [0, 500, 500, 2250.5]
    assert trace.rows[1].hash_ids == (0, 1, 2) and trace.rows[1].input_length == 1200


def test_scaled_for_a_configuration(tmp_path):
    """time_scale 2 halves every gap; length_scale 0.5 halves the lengths and the blocks."""
    trace = read_trace(write(tmp_path, MOONCAKE_ROWS))
    plan = plan_trace(trace, trace_workload(time_scale=2.0, length_scale=0.5, block_size=512))
    assert plan.offsets == [0.0, 0.25, 0.25, 1.12525]
    assert plan.input_tokens == [350, 600, 150, 50]
    assert plan.output_tokens == [20, 10, 5, 1]  # never under one token
    assert plan.block_tokens == 256
    assert plan.follows == [None] * 4
    assert plan.longest_request == 610


def test_start_offset_and_max_requests_cut_the_trace(tmp_path):
    trace = read_trace(write(tmp_path, MOONCAKE_ROWS))
    plan = plan_trace(trace, trace_workload(trace_start_s=0.5, max_requests=2))
    assert [r.line for r in plan.rows] == [2, 3]
    assert plan.offsets == [0.0, 0.0]  # shifted to start at 0
    with pytest.raises(ExperimentError, match=r"t\.jsonl: no rows from trace_start_s = 3 s on"):
        plan_trace(trace, trace_workload(trace_start_s=3))


def test_a_duration_keeps_the_rows_that_arrive_within_the_window(tmp_path):
    """[start, start + duration): a row at the window's end is the next window's; the rows
    start at 0, and the plan says how long they take to send."""
    trace = read_trace(write(tmp_path, MOONCAKE_ROWS))
    plan = plan_trace(trace, trace_workload(trace_start_s=0.5, trace_duration_s=1.75))
    assert [r.line for r in plan.rows] == [2, 3] and plan.offsets == [0.0, 0.0]
    plan = plan_trace(trace, trace_workload(trace_duration_s=2.2505))  # row 4 at its end
    assert [r.line for r in plan.rows] == [1, 2, 3] and plan.span_s == 0.5
    plan = plan_trace(trace, trace_workload(trace_duration_s=2.251, time_scale=2.0))
    assert [r.line for r in plan.rows] == [1, 2, 3, 4] and plan.span_s == 1.12525
    plan = plan_trace(trace, trace_workload(trace_duration_s=0.5))
    assert [r.line for r in plan.rows] == [1] and plan.span_s == 0.0
    whole = plan_trace(trace, trace_workload(trace_duration_s=0))  # 0: to the end
    assert len(whole.rows) == 4
    # max_requests bounds the window's rows further
    plan = plan_trace(trace, trace_workload(trace_duration_s=10, max_requests=3))
    assert [r.line for r in plan.rows] == [1, 2, 3]


def test_a_window_with_no_rows_is_one_line_naming_it_and_the_traces_times(tmp_path):
    trace = read_trace(write(tmp_path, MOONCAKE_ROWS))
    with pytest.raises(ExperimentError) as caught:
        plan_trace(trace, trace_workload(trace_start_s=0.6, trace_duration_s=1.5))
    assert str(caught.value) == (
        "t.jsonl: no rows from trace_start_s = 0.6 s for trace_duration_s = 1.5 s: its rows "
        "arrive from 0 s to 2.2505 s"
    )


def test_a_session_is_in_the_window_by_its_first_turn_whole(tmp_path):
    """A session whose first turn arrives after the window is left out with its later
    turns; one that began inside keeps its later turns, which go after its replies."""
    rows = [
        {"session_id": "a", "timestamp": 0, "input_length": 10},
        {"session_id": "c", "timestamp": 900, "input_length": 50},
        {"session_id": "b", "timestamp": 1000, "input_length": 20},
        {"session_id": "a", "delay": 5000, "input_length": 30},
        {"session_id": "b", "delay": 100, "input_length": 40},
    ]
    trace = read_trace(write(tmp_path, rows))
    plan = plan_trace(trace, trace_workload(trace_duration_s=0.95))
    assert [r.line for r in plan.rows] == [1, 2, 4]
    assert plan.follows == [None, None, (0, 5.0)]
    assert plan.span_s == 5.0  # the later turn, its reply taking none
    plan = plan_trace(trace, trace_workload(trace_start_s=0.95, trace_duration_s=1))
    assert [r.line for r in plan.rows] == [3, 5] and plan.offsets[0] == 0.05


def test_a_row_without_output_length_asks_the_workloads_max_tokens(tmp_path):
    trace = read_trace(write(tmp_path, [{"timestamp": 0, "input_length": 10}]))
    assert plan_trace(trace, trace_workload(max_tokens=33)).output_tokens == [33]


def test_aiperf_sessions_follow_their_previous_turn(tmp_path):
    """A session's first turn at its timestamp (or 0), each later one `delay` after the
    previous turn of its own session, whatever lies between them in the file."""
    rows = [
        {"session_id": "a", "timestamp": 0, "input_length": 10, "output_length": 2},
        {"session_id": "b", "timestamp": 1000, "input_length": 20, "hash_ids": [1]},
        {"session_id": "a", "delay": 400, "input_length": 30, "output_length": 2},
        {"session_id": "a", "input_length": 40, "output_length": 2},
        {"session_id": 7, "input_length": 50, "output_length": 2},
    ]
    trace = read_trace(write(tmp_path, rows))
    assert trace.format == AIPERF
    assert [r.session_id for r in trace.rows] == ["a", "b", "a", "a", "7"]
    plan = plan_trace(trace, trace_workload(time_scale=2.0))
    assert plan.follows == [None, None, (0, 0.2), (2, 0.0), None]
    assert plan.offsets[:2] == [0.0, 0.5] and plan.offsets[4] == 0.0


def test_a_session_that_began_before_the_start_is_left_out_whole(tmp_path):
    rows = [
        {"session_id": "a", "timestamp": 0, "input_length": 10},
        {"session_id": "b", "timestamp": 1000, "input_length": 20},
        {"session_id": "a", "delay": 5000, "input_length": 30},
    ]
    plan = plan_trace(read_trace(write(tmp_path, rows)), trace_workload(trace_start_s=0.5))
    assert [r.session_id for r in plan.rows] == ["b"] and plan.offsets == [0.5]


def test_a_trace_over_a_day_is_refused(tmp_path):
    trace = read_trace(write(tmp_path, [{"timestamp": 9e7, "input_length": 1}]))
    with pytest.raises(ExperimentError, match="over a day to send at time_scale = 1"):
        plan_trace(trace, trace_workload())
    assert plan_trace(trace, trace_workload(time_scale=2)).offsets == [45_000.0]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (["{not json"], r"t\.jsonl:1: not valid JSON"),
        (["[1, 2]"], r"t\.jsonl:1: must be a table, got \[1, 2\]"),
        (["[" * 100_000 + "]" * 100_000], r"t\.jsonl:1: not valid JSON"),
        ([{"input_length": 5}], r"t\.jsonl:1: neither 'timestamp' .* nor 'session_id'"),
        ([{"timestamp": 0, "input_len": 5}], r"t\.jsonl:1: input_length is missing"),
        (
            [{"timestamp": 0, "input_length": 5, "input_len": 5}],
            r"t\.jsonl:1: input_len is not a field here",
        ),
        ([{"timestamp": 0}], r"t\.jsonl:1: input_length is missing"),
        (
            [{"timestamp": 0, "input_length": -5}],
            r"t\.jsonl:1: input_length must be greater than or equal to 0, got -5",
        ),
        (
            [{"timestamp": 0, "input_length": 5, "output_length": 0}],
            r"t\.jsonl:1: output_length must be greater than or equal to 1, got 0",
        ),
        (
            [{"timestamp": 0, "input_length": 5.5}],
            r"t\.jsonl:1: input_length must be a whole number, got 5\.5",
        ),
        (
            [{"timestamp": 0, "input_length": True}],
            r"t\.jsonl:1: input_length must be a whole number, got True",
        ),
        (
            [{"timestamp": 0, "input_length": 10**12}],
            r"t\.jsonl:1: input_length must be less than or equal to 10000000, got 1000000000000",
        ),
        (
            [{"timestamp": -1, "input_length": 5}],
            r"t\.jsonl:1: timestamp must be greater than or equal to 0, got -1",
        ),
        (
            ['{"timestamp": 1e999, "input_length": 5}'],
            r"t\.jsonl:1: timestamp must be a finite number, got inf",
        ),
        (
            [{"timestamp": "0", "input_length": 5}],
            r"t\.jsonl:1: timestamp must be a number, got '0'",
        ),
        (
            [{"timestamp": 10, "input_length": 5}, {"timestamp": 9, "input_length": 5}],
            r"t\.jsonl:2: timestamp 9 is before line 1's 10: timestamps must not go backwards",
        ),
        (
            [{"timestamp": 0, "input_length": 5}, {"input_length": 5}],
            r"t\.jsonl:2: timestamp is missing",
        ),
        (
            [{"timestamp": 0, "input_length": 5, "hash_ids": 3}],
            r"t\.jsonl:1: hash_ids must be a list, got 3",
        ),
        (
            [{"timestamp": 0, "input_length": 5, "hash_ids": [1, -2]}],
            r"t\.jsonl:1: hash_ids\[1\] must be greater than or equal to 0, got -2",
        ),
        (
            [{"timestamp": 0, "input_length": 5, "hash_ids": [1, False]}],
            r"t\.jsonl:1: hash_ids\[1\] must be a whole number, got False",
        ),
        (
            [{"timestamp": 0, "input_length": 5, "hash_ids": list(range(20_001))}],
            r"t\.jsonl:1: hash_ids list should have at most 20000 items .*, not 20001",
        ),
        (
            [{"session_id": "a", "input_length": 5}, {"timestamp": 0, "input_length": 5}],
            r"t\.jsonl:2: session_id is missing",
        ),
        (
            [{"session_id": "a", "input_length": 5, "delay": 5}],
            r"t\.jsonl:1: delay on the first turn of session 'a'",
        ),
        (
            [
                {"session_id": "a", "input_length": 5},
                {"session_id": "a", "input_length": 5, "delay": -1},
            ],
            r"t\.jsonl:2: delay must be greater than or equal to 0, got -1",
        ),
        (
            [
                {"session_id": "a", "input_length": 5},
                {"session_id": "a", "input_length": 5, "timestamp": 9},
            ],
            r"t\.jsonl:2: timestamp on a later turn of session 'a'",
        ),
        (
            [{"session_id": ["a"], "input_length": 5}],
            r"t\.jsonl:1: session_id must be text, got \['a'\]",
        ),
        (
            [{"session_id": "a", "input_length": 5, "text_input": "hi"}],
            r"t\.jsonl:1: text_input is not a field here",
        ),
        ([""], r"t\.jsonl: no rows: not a trace"),
    ],
)
def test_a_file_that_is_not_a_trace_says_where(tmp_path, rows, message):
    with pytest.raises(ExperimentError, match=message):
        read_trace(write(tmp_path, rows))


def test_the_whole_file_hash_ids_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_file, "MAX_FILE_HASH_IDS", 100)
    row = {"timestamp": 0, "input_length": 5, "hash_ids": list(range(20))}
    with pytest.raises(ExperimentError, match=r"t\.jsonl:6: hash_ids brings the file's .* 100"):
        read_trace(write(tmp_path, [row] * 10))


def test_a_billion_lines_are_refused_by_the_bound_not_read(tmp_path):
    """A sparse file of 10^9 newlines (1 GB, nothing on disk) is refused by its size at once;
    the row bound stops a smaller file of more rows than a run may send at its first extra
    line, without reading the rest."""
    huge = tmp_path / "huge.jsonl"
    with huge.open("wb") as fh:
        fh.truncate(10**9)
    started = time.monotonic()
    with pytest.raises(ExperimentError, match=r"huge\.jsonl: 954 MiB, over the 128 MiB"):
        read_trace(huge)
    many = tmp_path / "many.jsonl"
    many.write_text("\n" * (MAX_ROWS + 1) + "not even JSON\n" * 1000)
    with pytest.raises(ExperimentError, match=r"many\.jsonl: over 100,000 lines"):
        read_trace(many)
    assert time.monotonic() - started < 5


def test_a_line_of_100_mb_is_refused_at_its_bound(tmp_path):
    """A sparse file of one 100 MB line: refused after reading the line bound (1 MiB), not
    the line."""
    long_line = tmp_path / "long.jsonl"
    with long_line.open("wb") as fh:
        fh.write(b'{"timestamp": 0, "input_length": 5}\n')
        fh.truncate(100 * 10**6)
    started = time.monotonic()
    with pytest.raises(ExperimentError, match=r"long\.jsonl:2: a line over 1,048,576 bytes"):
        read_trace(long_line)
    assert time.monotonic() - started < 5


def test_a_fifo_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ExperimentError, match=r"pipe\.jsonl: not a file"):
        read_trace(fifo)


def test_a_bad_trace_stops_the_run_before_anything_starts(tmp_path, capsys):
    """One line on stderr naming the file, the line and the field, exit 1, and no session:
    the file is read whole before a server is looked for."""
    write(tmp_path, [MOONCAKE_ROWS[0], {"timestamp": 1, "input_length": -3}])
    experiment = tmp_path / "e.toml"
    experiment.write_text("[workload]\narrival = 'trace'\ntrace = 't.jsonl'\n")
    out = tmp_path / "out"
    code = main(["run", str(experiment), "--out", str(out), "--server-bin", "/nowhere"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip().count("\n") == 0 and "Traceback" not in err
    assert "t.jsonl:2: input_length must be greater than or equal to 0, got -3" in err
    assert not out.exists()


def test_the_shipped_sample_is_a_trace_that_fits_the_default_model():
    """The sample replays at 1 to 4 slots of the default 8,192-token context as it is (a
    row's input_length holds the chat template), and its rows share blocks."""
    sample = ROOT / "resources" / "traces" / "sample-mooncake.jsonl"
    trace = read_trace(sample)
    assert trace.format == MOONCAKE and 30 <= len(trace.rows) <= 50
    assert plan_trace(trace, trace_workload()).longest_request <= 8192 // 4
    ids = [h for r in trace.rows for h in r.hash_ids]
    assert len(ids) > len(set(ids))
