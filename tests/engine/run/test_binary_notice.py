"""A managed run says which llama-server it ran and how that binary was found."""

from __future__ import annotations

import pytest

from workbench.engine.server.discovery import find_server_binary
from workbench.engine.store import open_session


@pytest.mark.server
def test_a_session_says_which_llama_server_ran_and_how_it_was_found(recorded_session):
    binary = find_server_binary()
    with open_session(recorded_session) as session:
        texts = [n.text for n in session.notices()]
    assert f"llama-server: {binary.path} (found by: {binary.found_by})" in texts
