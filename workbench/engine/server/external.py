"""External mode: a server someone else started (llama-server, vLLM, SGLang, Ollama).

We cannot start or stop it, but we check that it answers before a run and read what it
tells about itself: slots and context per slot (llama.cpp's ``/props``), model names
(``/v1/models``, which vLLM and SGLang need in every request), and which kind of server it is
(``/metrics`` names, else ``/v1/models``' ``owned_by``), so the run can say what its plots
will show.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

from workbench.engine.base.errors import ExternalServerError
from workbench.engine.base.records import StartupFacts
from workbench.engine.base.server_kinds import ServerKind, by_owner, describe, detect, parse_metrics
from workbench.engine.net.bounded_http import MAX_BYTES, Answer, bounded_get_all
from workbench.engine.net.http_stream import ConnectFailed

PROBE_TIMEOUT_S = 5.0  # the whole probe, every endpoint asked at once
PROBE_PATHS = ("/health", "/v1/models", "/props", "/slots", "/metrics")
# /metrics only says which kind of server it is, and a run goes on without it: the probe
# waits less for it (as the cross-checks do for their counters).
METRICS_WAIT_S = 2.0


@dataclass(frozen=True)
class ExternalServer:
    base_url: str
    slots: int | None = None
    n_ctx_slot: int | None = None
    models: list[str] = field(default_factory=list)
    kind: ServerKind | None = None
    gives: tuple[str, ...] = ()  # what its /metrics gives of the plotted facts, in words
    slots_endpoint: bool = False  # it answers /slots

    @property
    def description(self) -> str:
        """Which kind of server it is and what its plots will show, for a notice."""
        return describe(self.kind, self.gives, self.slots_endpoint)

    @property
    def facts(self) -> StartupFacts:
        """The slot layout it told; its total context is the slots' contexts together."""
        n_ctx = self.slots * self.n_ctx_slot if self.slots and self.n_ctx_slot else None
        return StartupFacts(n_slots=self.slots, n_ctx_slot=self.n_ctx_slot, n_ctx=n_ctx)


def split_credentials(url: str) -> tuple[str, dict[str, str]]:
    """``http://user:password@host`` as the URL without them, and the Basic authorization
    header they stand for: credentials travel in a header, never into a session or a log."""
    parts = parse_base_url(url)
    if parts.username is None and parts.password is None:
        return url, {}
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return clean, {"Authorization": f"Basic {token}"}


def api_key_headers(env_name: str | None) -> dict[str, str]:
    """A bearer token read from an environment variable now; it is never written anywhere."""
    if not env_name:
        return {}
    key = os.environ.get(env_name, "").strip()
    if not key:
        raise ExternalServerError(
            f"--api-key-env {env_name}: that environment variable is not set or empty"
        )
    if not (key.isascii() and key.isprintable()) or " " in key:
        raise ExternalServerError(
            f"the API key in ${env_name} must be printable ASCII without spaces"
        )
    return {"Authorization": f"Bearer {key}"}


def normalise_base_url(url: str) -> str:
    """``http://host:8000/v1`` (as vLLM and Ollama document it) and ``http://host:8000`` both
    mean the server root: request paths start with /v1 themselves."""
    url = url.strip().rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    parse_base_url(url)
    return url


def parse_base_url(url: str) -> SplitResult:
    """A base URL's parts, checked for what connecting needs: http or https, a host, and a
    port from 1 to 65535 if one is given. Credentials in it are never repeated in an error."""
    parts = urlsplit(url.strip())
    netloc = parts.netloc.rpartition("@")[2]
    shown = urlunsplit(parts._replace(netloc=netloc))
    if parts.scheme not in ("http", "https"):
        raise ExternalServerError(f"base URL must start with http:// or https://, got {shown!r}")
    if not parts.hostname:
        raise ExternalServerError(f"base URL {shown!r} names no host")
    try:
        port = parts.port
    except ValueError:  # not a number, or above 65535
        port = 0
    if port == 0:
        given = netloc.rpartition(":")[2]
        raise ExternalServerError(
            f"base URL {shown!r}: the port must be a whole number from 1 to 65535, got {given!r}"
        )
    return parts


def _json(answer: Answer | None) -> Any:
    if answer is None or answer.status != 200:
        return None
    with contextlib.suppress(ValueError):
        return json.loads(answer.body)
    return None


def probe_external(
    base_url: str, headers: dict[str, str] | None = None, deadline_s: float = PROBE_TIMEOUT_S
) -> ExternalServer:
    """What the server tells about itself; the probe ends within ``deadline_s``, however
    slowly the server answers or does not."""
    url = normalise_base_url(base_url)
    waits = {
        path: min(deadline_s, METRICS_WAIT_S) if path == "/metrics" else deadline_s
        for path in PROBE_PATHS
    }
    try:
        answers = bounded_get_all(url, waits, headers)
    except ConnectFailed as exc:
        raise ExternalServerError(
            f"nothing answers at {url} ({type(exc).__name__}: {exc}); "
            "check the address and that the server is running"
        ) from None
    if all(a is None for a in answers.values()):
        raise ExternalServerError(
            f"nothing answers at {url} within {deadline_s:g} s and "
            f"{MAX_BYTES // 2**20} MiB per answer; check the address and that the server "
            "is running"
        )
    codes = {
        path: (a.status if a is not None else f"no whole answer in {waits[path]:g} s")
        for path, a in answers.items()
        if path in ("/health", "/v1/models")
    }
    models_doc = _json(answers["/v1/models"])
    props = _json(answers["/props"])
    slots_doc = _json(answers["/slots"])
    if 200 not in codes.values():
        raise ExternalServerError(
            f"{url} answers, but not like an OpenAI-compatible server: /health gave HTTP "
            f"{codes['/health']} and /v1/models HTTP {codes['/v1/models']}"
        )
    cards: list[dict[str, Any]] = []
    if isinstance(models_doc, dict) and isinstance(models_doc.get("data"), list):
        cards = [m for m in models_doc["data"] if isinstance(m, dict)]
    models = [m["id"] for m in cards if "id" in m]
    slots = n_ctx_slot = None
    if isinstance(props, dict):
        if isinstance(props.get("total_slots"), int):
            slots = props["total_slots"]
        settings = props.get("default_generation_settings")
        if isinstance(settings, dict) and isinstance(settings.get("n_ctx"), int):
            n_ctx_slot = settings["n_ctx"]
    if slots is None and isinstance(slots_doc, list):
        slots = len(slots_doc)
    metrics = _metrics(answers["/metrics"])
    owners = (by_owner(m.get("owned_by")) for m in cards)
    kind = detect(metrics) or next((k for k in owners if k is not None), None)
    gives = kind.gives(metrics) if kind is not None else ()
    return ExternalServer(url, slots, n_ctx_slot, models, kind, gives, isinstance(slots_doc, list))


def _metrics(answer: Answer | None) -> dict[str, float]:
    """The /metrics answer's series; none when it has none or is not Prometheus text."""
    if answer is None or answer.status != 200:
        return {}
    try:
        return parse_metrics(answer.text)
    except ValueError:
        return {}
