"""Comparing sessions recorded with different settings: aligned, normalised, and honest about
what makes them unlike."""

from __future__ import annotations

import csv

import pytest

from tests.made_sessions import Config, build_session, burst, startup_facts
from workbench.cli.main import main
from workbench.engine.analysis.compare import compare_sessions, to_markdown
from workbench.engine.store import open_session
from workbench.engine.store.rows import RemoteOrigin
from workbench.engine.store.writer import write_remote_origin

OTHER = """name = "other"
[server]
slots = [1, 4]
ctx = 4096
[workload]
requests = 3
max_tokens = 8
warmup = 0
"""


@pytest.fixture(scope="module")
def other_session(tmp_path_factory):
    """Against the sweep: slots 1 and 4, twice the context, 8 tokens. np=1 serves its 3
    requests one after another in 2.4 s; np=4 serves them together, a token every 0.15 s,
    in 1.15 s."""
    return build_session(
        tmp_path_factory.mktemp("other") / "other.session.sqlite",
        OTHER,
        [
            Config(burst(0, 3, slots=1, at_s=0.0, tokens=8), startup_facts(1, 4096)),
            Config(burst(3, 3, slots=4, at_s=3.0, tokens=8, itl_s=0.15), startup_facts(4, 4096)),
        ],
    )


def test_sessions_align_by_configuration(sweep_session, other_session):
    with open_session(sweep_session) as a, open_session(other_session) as b:
        comparison = compare_sessions([a, b])
        relative = compare_sessions([a, b], relative=True)
        recorded = a.meta["created_at"][:16].replace("T", " ")
    assert comparison.labels == ["np=1", "np=2", "np=4"]
    assert comparison.columns[0] == f"sweep · Made CPU 8-Core · CPU · {recorded}"
    cells = comparison.cells
    assert cells[("np=1", "agg_tok_s")] == pytest.approx([36 / 3.6, 24 / 2.4])
    assert cells[("np=2", "agg_tok_s")] == [pytest.approx(36 / 2.95), None]
    assert cells[("np=4", "agg_tok_s")] == [None, pytest.approx(24 / 1.15)]
    assert cells[("np=1", "ttft_p50_s")] == pytest.approx([1.3, 0.9])  # the middle one's wait
    assert cells[("np=2", "decode_tok_s")] == [pytest.approx(8.0), None]  # 1 / 0.125 s
    assert relative.cells[("np=1", "ttft_p50_s")] == pytest.approx([1.0, 1.0])
    assert relative.cells[("np=2", "decode_tok_s")] == [pytest.approx(8.0 / 10.0), None]
    assert relative.cells[("np=4", "agg_tok_s")] == [None, pytest.approx((24 / 1.15) / 10.0)]
    assert relative.cells[("np=2", "failed")] == [0, None]  # a count is never divided
    assert comparison.warnings == [
        "different workload max_tokens: 12 vs 8",
        "np=1: different context per slot: 2048 vs 4096",
    ]
    markdown = to_markdown(comparison)
    assert markdown.count("\n| np=") == 33 and "Not a like-for-like comparison" in markdown
    assert "| np=2 | Aggregate throughput (tok/s) | 12.2 | - |" in markdown


def test_compare_command_writes_csv_and_markdown(sweep_session, other_session, tmp_path, capsys):
    out_csv, out_md = tmp_path / "c.csv", tmp_path / "c.md"
    args = [
        "compare",
        str(sweep_session),
        str(other_session),
        "--csv",
        str(out_csv),
        "--markdown",
        str(out_md),
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "np=4" in printed and "not like for like" in printed
    with out_csv.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 33 and rows[0]["configuration"] == "np=1"
    assert rows[1]["metric"] == "Aggregate throughput (tok/s)"
    sweep, other = (next(k for k in rows[1] if k.startswith(name)) for name in ("sweep", "other"))
    assert float(rows[1][sweep]) == pytest.approx(10.0)
    assert [(r["configuration"], r[other]) for r in rows if r["metric"].startswith("Total")] == [
        ("np=1", "2.4"),
        ("np=2", ""),
        ("np=4", "1.15"),
    ]
    assert out_md.read_text().startswith("| configuration | metric |")


def test_the_same_workload_spelled_two_ways_is_like_for_like(tmp_path):
    """Concurrency 0 (all at once) and concurrency 8 both send 8 requests at once, and a
    default left out is the same value written: compare what was sent."""
    spelled = {
        "flags": "[workload]\nrequests = 8\nmax_tokens = 12\nwarmup = 0\n",
        "file": (
            "[workload]\nrequests = 8\nconcurrency = 8\nmax_tokens = 12\nwarmup = 0\n"
            'prompts = "builtin"\nignore_eos = true\n'
        ),
        "more": "[workload]\nrequests = 8\nconcurrency = 64\nmax_tokens = 12\nwarmup = 0\n",
    }
    paths = [
        build_session(
            tmp_path / f"{name}.session.sqlite",
            f'name = "{name}"\n[server]\nslots = 2\n{workload}',
            [Config(burst(0, 8, slots=2, at_s=0.0), startup_facts(2, 8192))],
        )
        for name, workload in spelled.items()
    ]
    with open_session(paths[0]) as a, open_session(paths[1]) as b, open_session(paths[2]) as c:
        assert compare_sessions([a, b, c]).warnings == []
    halved = build_session(
        tmp_path / "halved.session.sqlite",
        'name = "halved"\n[server]\nslots = 2\n'
        "[workload]\nrequests = 8\nconcurrency = 4\nmax_tokens = 12\nwarmup = 0\n",
        [Config(burst(0, 8, slots=2, at_s=0.0), startup_facts(2, 8192))],
    )
    with open_session(paths[0]) as a, open_session(halved) as b:
        assert compare_sessions([a, b]).warnings == ["different workload concurrency: 8 vs 4"]


def test_relative_to_one_slot_divides_performance_not_sizes(sweep_session, other_session):
    """What was asked of the server (tokens in a prompt, per chunk) is no ratio to 1 slot."""
    with open_session(sweep_session) as a, open_session(other_session) as b:
        relative = compare_sessions([a, b], relative=True)
        absolute = compare_sessions([a, b])
    headings = {row["key"]: row["metric"] for row in relative.rows()}
    assert headings["prompt_tokens_p50"] == "Prompt tokens p50 (tokens)"
    assert headings["ttft_p50_s"].endswith("(x of 1 slot)")
    key = ("np=2", "prompt_tokens_p50")
    assert relative.cells[key] == absolute.cells[key]


def test_a_session_measured_on_another_host_names_it_in_its_column(tmp_path):
    """The same machine kind on two hosts (this one and one reached by the agent) reads
    alike by hardware alone: the far session's column names its host."""
    text = 'name = "pair"\n[server]\nslots = 2\n[workload]\nrequests = 8\nmax_tokens = 12\n'
    here, there = (
        build_session(
            tmp_path / f"{name}.session.sqlite",
            text,
            [Config(burst(0, 8, slots=2, at_s=0.0), startup_facts(2, 8192))],
        )
        for name in ("here", "there")
    )
    origin = RemoteOrigin(
        host="gpubox\x1b[2J",
        run_id="a" * 32,
        agent_version="0.1.0",
        protocol=1,
        clock_offset_ns=0,
        rtt_ns=1000,
        received_all=True,
    )
    write_remote_origin(there, origin)
    with open_session(here) as a, open_session(there) as b:
        near, far = compare_sessions([a, b]).columns
    assert near.startswith("pair · ") and "gpubox" not in near
    assert far.startswith("pair · gpubox\ufffd[2J: ")
    assert near.split(" · ")[1] == far.split(" · ")[1].split(": ", 1)[1]
