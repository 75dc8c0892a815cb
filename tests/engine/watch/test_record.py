"""A kept watch: written as it goes, read back as it was (the SLOs it was given with it), a
crash keeps what was saved, and a newer, damaged or foreign file is one clear line."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest

from workbench.engine.base.server_kinds import VLLM
from workbench.engine.tune.slo_targets import parse_slos
from workbench.engine.watch.record import (
    MAX_HEAD_CHARS,
    MAX_SLOS,
    SUFFIX,
    Recorder,
    WatchFileError,
    kept_in,
    read,
    read_whole,
)
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.summary import summarize
from workbench.engine.watch.unseen import TokenLedger
from workbench.engine.watch.watcher import Load, Watched


def watched_into(recorder: Recorder) -> Watched:
    watched = Watched(0, kind=VLLM, seconds=2.0)
    for n in range(20):
        load = Load(n / 10, 2.0, float(n % 3), 10.0 * n, 2.0 * n, n / 20, requests=float(n))
        watched.count_load(load)
        recorder.load(load)
    watched.polls, watched.busy, watched.all_busy = 20, {0: 20, 1: 12}, 12
    for task in (
        WatchedTask(0, 7, 0.1, 1.0, 0.5, 1.1, 1500, 1024, 20, decoded_all=True),
        WatchedTask(1, 9, 0.2, 0.2, gone_s=0.3, missed=True, sequence_tokens=9),
    ):
        watched.tasks.restore(task)
        recorder.task(task)
    found_running = WatchedTask(0, 11, 1.2, 1.9, 1.5, None, 64, 0, 4, running_at_start=True)
    watched.tasks.restore(found_running, running=True)
    watched.histograms({"vllm:time_to_first_token_seconds": {0.1: 1.0, math.inf: 2.0}})
    watched.histograms({"vllm:time_to_first_token_seconds": {0.1: 3.0, math.inf: 8.0}})
    watched.memory_max_bytes, watched.memory_note = 300 * 2**20, ""
    watched.ledger = TokenLedger(3, 500.0, 300.0, tasks=4, missed_tokens=60.0, missed=3)
    for t_s, answered in ((1.3, False), (1.5, True), (1.8, False)):  # the last gap still open
        watched.answered(t_s, answered)
    return watched


def test_a_kept_watch_reads_back_as_it_was(tmp_path):
    path = tmp_path / f"w{SUFFIX}"
    recorder = Recorder(path, "http://127.0.0.1:8080", 0.1)
    watched = watched_into(recorder)
    recorder.close(watched)
    kept = read(path)
    assert (kept.url, kept.interval_s) == ("http://127.0.0.1:8080", 0.1)
    assert summarize(kept.watched) == summarize(watched)
    assert kept.watched.ledger == watched.ledger and summarize(watched).unseen.tasks == 10
    assert kept.watched.tasks.tasks == watched.tasks.tasks
    assert kept.watched.tasks.began == watched.tasks.began == 2  # not the one it found
    assert [(g.down_s, g.up_s) for g in kept.watched.gaps] == [(1.3, 1.5), (1.8, None)]
    assert summarize(kept.watched).down_s == pytest.approx(0.2 + 0.2)  # the open one to 2.0 s


def test_the_slos_a_watch_was_given_are_kept_with_it(tmp_path):
    slos = parse_slos(["ttft_p90:2000", "TPOT_p50:37.5", "e2el_p99:1e7", "stall_p99:900"])
    path = tmp_path / f"w{SUFFIX}"
    recorder = Recorder(path, "http://127.0.0.1:8080", 0.1, slos)
    with sqlite3.connect(path) as conn:  # as typed, before the first save
        (kept,) = conn.execute("SELECT slos FROM watch").fetchone()
    assert json.loads(kept) == [
        "ttft_p90:2000",
        "tpot_p50:37.5",
        "e2el_p99:10000000",
        "stall_p99:900",
    ]
    recorder.close(watched_into(recorder))
    assert read(path).slos == slos and read_whole(path)[0].slos == slos
    none = tmp_path / f"none{SUFFIX}"
    Recorder(none, "http://127.0.0.1:8080", 0.1).close(Watched(0))
    assert read(none).slos == ()


def test_a_watch_that_crashed_keeps_what_it_saved(tmp_path):
    path = tmp_path / f"w{SUFFIX}"
    recorder = Recorder(path, "http://127.0.0.1:8080", 0.1)
    watched = watched_into(recorder)
    recorder.save(watched, now=True)
    recorder.task(WatchedTask(1, 99, 3.0, 3.0, gone_s=3.1))  # after the last save: lost
    kept = read(path)  # the recorder never closed, as after a kill
    assert kept.watched.tasks.ended == 2 and kept.watched.polls == 20


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (
            "PRAGMA user_version = 5",
            "a watch file of version 5, newer than this workbench's 4: update the workbench "
            "to read it",
        ),
        (
            """UPDATE watch SET slos = '["ttft_p90:2000", "ttft:3"]'""",
            "a damaged watch file (its SLO 'ttft:3': write METRIC_PCT:MS, e.g. ttft_p90:2000 "
            "(metrics ttft, tpot, itl, e2el, stall; p50, p90, p99))",
        ),
        (
            """UPDATE watch SET slos = '["ttft_p90:2000", "ttft_p90:-1"]'""",
            "a damaged watch file (its SLO 'ttft_p90:-1': the limit is a time above 0 ms, "
            "not '-1')",
        ),
        (
            """UPDATE watch SET slos = '["ttft_p90:2000", "ttft_p90:2000"]'""",
            "a damaged watch file (its SLO ttft_p90 is given twice: give each limit once)",
        ),
        (
            f"UPDATE watch SET slos = '{json.dumps(['ttft_p90:1'] * (MAX_SLOS + 1))}'",
            f"a damaged watch file (its SLOs are not a list of at most {MAX_SLOS} METRIC_PCT:MS)",
        ),
        (
            f"UPDATE watch SET slos = '{json.dumps(['ttft_p90:' + '9' * 100])}'",
            f"a damaged watch file (its SLOs are not a list of at most {MAX_SLOS} METRIC_PCT:MS)",
        ),
        (
            "UPDATE watch SET slos = 'ttft_p90:2000'",
            f"a damaged watch file (its SLOs are not a list of at most {MAX_SLOS} METRIC_PCT:MS)",
        ),
        (
            "UPDATE watch SET slos = 7",
            f"a damaged watch file (its SLOs are not a list of at most {MAX_SLOS} METRIC_PCT:MS)",
        ),
        ("UPDATE tasks SET decoded = 'many'", "a damaged watch file ('many' is not a number)"),
        ("UPDATE loads SET waiting = 1e300", "a damaged watch file (1e+300 is out of range)"),
        ("UPDATE watch SET counters = '[1]'", "a damaged watch file (its watch row is not one)"),
        (
            "UPDATE watch SET counters = json_set(counters, '$.ledger.missed_tokens', -30)",
            "a damaged watch file (its ledger counts -30.0)",
        ),
        (
            "UPDATE watch SET counters = json_set(counters, '$.ledger.rated', 'ab')",
            "a damaged watch file (its ledger's rates are not a table)",
        ),
        (
            "UPDATE watch SET counters = json_set(counters, '$.running[1]', "
            "json_extract(counters, '$.running[0]'))",
            "a damaged watch file (two tasks running on one slot)",
        ),
        (
            f"UPDATE watch SET url = '{'x' * (MAX_HEAD_CHARS + 1)}'",
            f"a damaged watch file (its watch row is longer than {MAX_HEAD_CHARS:,} characters)",
        ),
        ("DROP TABLE loads", "not a watch file (no such table: loads)"),
    ],
)
def test_a_newer_or_damaged_file_is_one_clear_line(tmp_path, damage, said):
    path = tmp_path / f"w{SUFFIX}"
    recorder = Recorder(path, "http://127.0.0.1:8080", 0.1)
    recorder.close(watched_into(recorder))
    with sqlite3.connect(path) as conn:
        conn.execute(damage)
    with pytest.raises(WatchFileError) as refused:
        read(path)
    assert str(refused.value) == f"{path.name}: {said}"


def test_a_file_that_is_no_database_is_refused(tmp_path):
    path = tmp_path / f"w{SUFFIX}"
    path.write_text("not a database")
    with pytest.raises(WatchFileError, match="not a watch file"):
        read(path)


def test_a_listing_reads_each_watchs_head_and_names_an_unreadable_one(tmp_path):
    path = tmp_path / "a" / f"w{SUFFIX}"
    path.parent.mkdir()
    recorder = Recorder(path, "http://127.0.0.1:8080", 0.1)
    recorder.close(watched_into(recorder))
    (tmp_path / f"bad{SUFFIX}").write_text("not a database")
    (tmp_path / "x.session.sqlite").write_text("a session is not listed here")
    good, bad = sorted(kept_in([tmp_path]), key=lambda i: i.path.name, reverse=True)
    assert (good.url, good.seconds, good.tasks, good.kind, good.error) == (
        "http://127.0.0.1:8080",
        2.0,
        2,
        "vLLM",
        "",
    )
    assert bad.error.startswith(f"bad{SUFFIX}: not a watch file")


OLDER = {
    3: "ALTER TABLE watch DROP COLUMN slos;",
    2: "ALTER TABLE loads DROP COLUMN cached_tokens; ALTER TABLE loads DROP COLUMN requests; "
    "ALTER TABLE loads DROP COLUMN prompt_seconds; ALTER TABLE loads DROP COLUMN output_seconds;",
    1: "ALTER TABLE loads DROP COLUMN kv_usage;",
}


@pytest.mark.parametrize("version", [3, 2, 1])
def test_a_watch_of_an_older_version_reads_without_its_later_columns(tmp_path, version):
    path = tmp_path / f"w{SUFFIX}"
    recorder = Recorder(path, "http://127.0.0.1:8080", 0.1, parse_slos(["ttft_p90:2000"]))
    watched = watched_into(recorder)
    recorder.close(watched)
    now = summarize(read(path).watched)
    assert (now.kv_use_max, now.requests_finished) == (95, 19)  # 19 / 20; 0 to 19
    with sqlite3.connect(path) as conn:
        for older in range(3, version - 1, -1):
            conn.executescript(OLDER[older])
        conn.execute(f"PRAGMA user_version = {version}")
    kept = read(path)
    assert kept.slos == ()  # no SLOs given, as a watch before them was
    old = summarize(kept.watched)
    assert (old.requests_finished is None) == (version < 3) and old.queue_max == now.queue_max
    assert (old.kv_use_max is None) == (version == 1)
