"""A tune on a window of a recorded trace, on the real llama-server: no users, the window is
the load; its verification run sends that window (its settings stored with the session's
configuration, its rows the session's requests), and the answer says the window's requests
at once as the run measured them."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.engine.tune.test_tune_server import SLOS, stored_calibration
from workbench.engine.store import open_session
from workbench.engine.tune.records import TuneRequest
from workbench.engine.tune.search import requests_at_once, tune

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[3]
# Rows 6.0 to 6.8 s of the sample (6000, 6400, 6400, 6800 ms): the next ones, at 8.3 s and
# later, are outside 3 s once max_requests has its 4; a tenth as long, to keep the run short.
WINDOW = {"trace_start_s": 6.0, "trace_duration_s": 3.0, "max_requests": 4, "time_scale": 2.0}


def test_a_tune_on_a_trace_window_sends_that_window_and_measures_its_load(
    server_binary: str, model_path: Path, tmp_path: Path, monkeypatch
):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    stored_calibration(server_binary, model_path)  # ranks with it: no probe
    traffic = {
        "arrival": "trace",
        "trace": str(ROOT / "resources" / "traces" / "sample-mooncake.jsonl"),
        "length_scale": 0.1,
        "warmup": 0,
        **WINDOW,
    }
    request = TuneRequest(
        SLOS, None, str(model_path), traffic, "slots=2", 90.0, tmp_path, server_binary
    )
    result = tune(request, lambda progress: None, threading.Event())

    assert result.verified, result.reason
    load = result.load
    assert load is not None and load.rows == 4 and load.span_s == 0.4  # 6.0..6.8 s, at 2x
    assert "the scheduler model at np=2" in load.estimated_from
    assert result.session_path is not None
    with open_session(result.session_path) as session:
        (config,) = session.configs
        assert config.workload.items() >= WINDOW.items()
        records = session.records(0)
    assert len(records) == 4  # the window's rows, not the file's 40
    assert load.measured == result.users == requests_at_once(records) >= 1
