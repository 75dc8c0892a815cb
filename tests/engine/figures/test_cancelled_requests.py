"""Requests a stop (Ctrl-C, Stop) cut short are counted as cancelled, apart from the failed
ones: they were the user's doing, not the server's."""

from __future__ import annotations

from dataclasses import replace

from tests.made_sessions import Config, build_session, failed, request, startup_facts
from workbench.cli.main import main
from workbench.engine.store import open_session

TOML = "[server]\nslots = 1\n[workload]\nrequests = 6\n"


def made(tmp_path, *, cancelled: bool = True):
    """Three answered requests, one the server failed, and (``cancelled``) two a stop cut:
    one mid-stream, one before it was sent (the words the client records)."""
    requests = [request(i, submit_s=i * 2.0) for i in range(3)]
    requests.append(failed(3, submit_s=6.0, done_s=6.1, error="HTTP 500: boom"))
    if cancelled:
        cut = replace(request(4, submit_s=8.0), ok=False, error="cancelled after 3 token chunks")
        unsent = failed(5, submit_s=8.0, done_s=8.0, error="cancelled before it was sent")
        requests += [cut, replace(unsent, t_submit_ns=None, http_status=None)]
    path = tmp_path / "s.session.sqlite"
    return build_session(path, TOML, [Config(requests, startup_facts(1, 8192))])


def test_cancelled_requests_are_not_counted_as_failed(tmp_path, capsys):
    path = made(tmp_path)
    with open_session(path) as session:
        (summary,) = session.summaries()
    assert summary.value("requests") == 6
    assert summary.value("failed") == 1  # once 3: the two a stop cut counted as failures
    assert summary.value("cancelled") == 2
    assert summary.value("ok") == 3
    assert main(["show", str(path)]) == 0
    header = next(line for line in capsys.readouterr().out.splitlines() if "failed" in line)
    assert "cancelled" in header


def test_a_run_nothing_cancelled_has_no_cancelled_column(tmp_path, capsys):
    path = made(tmp_path, cancelled=False)
    with open_session(path) as session:
        (summary,) = session.summaries()
    assert (summary.value("failed"), summary.value("cancelled")) == (1, None)
    assert main(["show", str(path)]) == 0
    assert "cancelled" not in capsys.readouterr().out
