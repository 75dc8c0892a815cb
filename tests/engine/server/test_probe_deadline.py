"""The external server's probe ends within the deadline it names, however the server
behaves: every endpoint is asked at once under that one deadline, not one after another."""

from __future__ import annotations

import socket
import time

import pytest

from workbench.engine.base.errors import ExternalServerError
from workbench.engine.server.external import PROBE_PATHS, probe_external


def test_a_server_that_accepts_and_never_answers_is_given_up_on_in_time():
    # Listening without ever reading: the kernel takes each connection, nothing answers.
    with socket.create_server(("127.0.0.1", 0), backlog=2 * len(PROBE_PATHS)) as silent:
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(ExternalServerError) as refused:
            probe_external(f"http://127.0.0.1:{port}", deadline_s=0.5)
        took = time.monotonic() - started
    assert f"nothing answers at http://127.0.0.1:{port} within 0.5 s" in str(refused.value)
    # One after another, the five endpoints would take five deadlines (2.5 s).
    assert 0.5 <= took < 1.5
