"""Goodput against SLOs and the recommendation, on a session with known timings; planning
arithmetic."""

from __future__ import annotations

import pytest

from tests.made_sessions import Config, build_session, burst, failed, request, startup_facts
from workbench.cli.main import main
from workbench.engine.analysis.slo import (
    Slo,
    goodput,
    machines_needed,
    parse_goodput,
    peak_users,
    recommend,
)
from workbench.engine.store import open_session


def test_planning_arithmetic():
    assert peak_users(1000, 0.05) == 50
    assert peak_users(999, 0.05) == 50  # rounded up: 49.95 people are 50
    assert peak_users(50, 0.14) == 7  # 7.000000000000001 in floating point
    assert machines_needed(50, 8) == 7
    assert machines_needed(50, 0) is None
    with pytest.raises(ValueError):
        Slo()


def test_goodput_and_recommendation(sweep_session, capsys):
    # np=1: TTFT 0.1, 1.3, 2.5 s in 3.6 s; np=2: TTFT 0.1, 0.1, 1.575 s in 2.95 s.
    with open_session(sweep_session) as session:
        easy = goodput(session, Slo(ttft_s=60.0))
        impossible = goodput(session, Slo(ttft_s=1e-6))
        between = goodput(session, Slo(ttft_s=1.0))
        decode = goodput(session, Slo(decode_tok_s=9.0))
    assert [(r.good, r.requests, r.acceptable) for r in easy] == [(3, 3, True), (3, 3, True)]
    assert [r.goodput_rps for r in easy] == pytest.approx([3 / 3.6, 3 / 2.95])
    assert [r.throughput_rps for r in impossible] == pytest.approx([3 / 3.6, 3 / 2.95])
    assert [r.ttft_p50_s for r in easy] == pytest.approx([1.3, 0.1])
    assert recommend(easy).choice.label == "np=2"  # the most good requests per second
    assert recommend(easy).text == "np=2: 1.02 good requests/s with 3 concurrent requests"
    assert all(r.good == 0 and not r.acceptable for r in impossible)
    assert impossible[0].reasons == ["TTFT p50 1.300 s > 1e-06 s"]
    assert recommend(impossible).choice is None
    assert "add a machine" in recommend(impossible).text
    # A per-request threshold between the fastest and slowest requests splits them.
    assert [r.good for r in between] == [1, 2]
    assert [r.goodput_rps for r in between] == pytest.approx([1 / 3.6, 2 / 2.95])
    assert between[0].reasons == ["TTFT p50 1.300 s > 1 s"] and between[1].acceptable
    # Two requests decoding together make a token every 0.125 s: 8 tok/s, too slow.
    assert [r.good for r in decode] == [3, 0]
    assert decode[1].reasons == ["3 of 3 requests decode slower than 9 tok/s"]
    assert recommend(decode).choice.label == "np=1"

    assert main(["slo", str(sweep_session), "--ttft", "60", "--registered", "100"]) == 0
    out = capsys.readouterr().out
    assert "peak concurrent users = 100 registered x 0.05 online = 5" in out
    assert "recommendation: np=2: 1.02 good requests/s" in out
    assert main(["slo", str(sweep_session)]) == 1


def test_failures_make_a_configuration_unacceptable(tmp_path):
    # np=2: two requests served at once in 1.2 s, the third fails after 0.5 s. np=4: its
    # server never got ready.
    requests = [*burst(0, 2, slots=2, at_s=0.0), failed(2, submit_s=0.0, done_s=0.5, error="x")]
    path = build_session(
        tmp_path / "f.session.sqlite",
        "[server]\nslots = [2, 4]\n[workload]\nrequests = 3\n",
        [
            Config(requests, startup_facts(2, 8192)),
            Config(status="failed", error="llama-server exited with status 1 while starting"),
        ],
    )
    with open_session(path) as session:
        partly, never = goodput(session, Slo(ttft_s=60.0))
    assert (partly.requests, partly.good, partly.acceptable) == (3, 2, False)
    assert partly.reasons == ["1 requests failed"]
    assert partly.goodput_rps == pytest.approx(2 / 1.2)
    assert (never.requests, never.good, never.goodput_rps, never.acceptable) == (0, 0, 0.0, False)
    assert never.reasons == ["no TTFT p50"]
    assert recommend([partly, never]).choice is None


def test_vllms_goodput_spelling_is_read_as_the_same_limits():
    assert parse_goodput(["ttft:500", "tpot:50", "e2el:3000"]) == {
        "ttft_s": 0.5,
        "tpot_s": 0.05,
        "e2e_p90_s": 3.0,
    }
    assert parse_goodput([]) == {}
    for pairs, message in (
        (["ttft=500"], "give KEY:MILLISECONDS"),
        (["ttft:5:0"], "give KEY:MILLISECONDS"),
        (["TTFT:500"], "the key is one of ttft, tpot, e2el"),
        (["itl:5"], "the key is one of ttft, tpot, e2el"),
        (["ttft:fast"], "a number of milliseconds >= 0"),
        (["ttft:-1"], "a number of milliseconds >= 0"),
        (["ttft:nan"], "a number of milliseconds >= 0"),
        (["ttft:1", "ttft:2"], "ttft is given twice"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_goodput(pairs)


def test_tpot_limits_each_request_as_vllm_counts_it(sweep_session, tmp_path, capsys):
    # np=1 makes a token every 0.1 s, np=2 every 0.125 s (two requests decoding together).
    with open_session(sweep_session) as session:
        tpot = goodput(session, Slo(tpot_s=0.11))
        same_as_ttft = goodput(session, Slo(**parse_goodput(["ttft:1000"])))
        ttft = goodput(session, Slo(ttft_s=1.0))
    assert [r.good for r in tpot] == [3, 0]
    assert tpot[0].acceptable and tpot[1].reasons == ["3 of 3 requests over TPOT 110 ms"]
    assert same_as_ttft == ttft
    # A one-token request has no TPOT: vLLM counts it as 0, so it meets any TPOT limit.
    path = build_session(
        tmp_path / "one.session.sqlite",
        "[workload]\nrequests = 2\n",
        [Config([request(0, tokens=1), request(1, tokens=12, itl_s=0.2)], startup_facts(1, 4096))],
    )
    with open_session(path) as session:
        (mixed,) = goodput(session, Slo(tpot_s=0.1))
    assert (mixed.good, mixed.requests) == (1, 2)
    assert mixed.reasons == ["1 of 2 requests over TPOT 100 ms"]

    assert main(["slo", str(sweep_session), "--goodput", "ttft:1000", "tpot:110"]) == 0
    out = capsys.readouterr().out
    assert "SLO: TTFT <= 1 s, TPOT <= 110 ms" in out
    assert "recommendation: no configuration meets the SLOs" in out
    for args, message in (
        (["--goodput", "itl:5"], "the key is one of ttft, tpot, e2el"),
        (["--ttft", "1", "--goodput", "ttft:1000"], "--goodput sets the limit --ttft gave"),
        ([], "give at least one SLO: --ttft, --ttft-p90, --decode, --e2e-p90, --goodput"),
    ):
        assert main(["slo", str(sweep_session), *args]) == 1
        assert message in " ".join(capsys.readouterr().err.split())
