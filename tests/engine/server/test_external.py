"""External mode's address handling (the real-server side is in tests/cli/test_cli.py)."""

from __future__ import annotations

import pytest

from workbench.engine.base.errors import ExternalServerError
from workbench.engine.base.records import StartupFacts
from workbench.engine.server.external import ExternalServer, normalise_base_url


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
        ("http://localhost:8000/v1", "http://localhost:8000"),
        (" http://localhost:8000/v1/ ", "http://localhost:8000"),
        ("https://example.test/api", "https://example.test/api"),
    ],
)
def test_base_url_is_the_server_root(given, expected):
    assert normalise_base_url(given) == expected


def test_base_url_without_scheme_is_refused():
    with pytest.raises(ExternalServerError, match="http:// or https://"):
        normalise_base_url("127.0.0.1:8080")


def test_facts_from_what_the_server_tells():
    assert ExternalServer("http://x", 4, 2048).facts == StartupFacts(
        n_slots=4, n_ctx_slot=2048, n_ctx=8192
    )
    assert ExternalServer("http://x").facts == StartupFacts()
