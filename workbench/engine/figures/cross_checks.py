"""The client's account of a run checked against the server's own.

A benchmark client can be wrong in ways its own numbers never show: it read the sockets late
(saturated), a proxy buffered the stream, chunks carried several tokens, another client used
the same server. The server keeps its own books: each response's ``timings`` (how long it
spent generating) and the ``/metrics`` counters (tokens processed). Each check compares one
figure from both sides over one repeat, and a disagreement over 5 % names its likely cause.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.engine.base.records import RequestRecord
from workbench.engine.base.server_kinds import (
    OUTPUT_COUNTERS,
    PROMPT_COUNTERS,
    REQUEST_COUNTERS,
    total,
)

TOLERANCE = 0.05
# A token reaches the client up to about 5 ms earlier or later than the server timed it
# (75 requests of 4 to 64 tokens on a 2-core machine: median 0.06 ms, extremes -5.1 and
# +4.0 ms): over a few short answers that is more than 5 %, and says nothing of the client.
DELIVERY_JITTER_MS = 5.0


@dataclass(frozen=True)
class CrossCheck:
    name: str  # "decode time", "output tokens", "prompt tokens", "requests"
    client: float
    server: float
    unit: str
    cause: str  # what a disagreement most likely means
    slack: float = 0.0  # a difference this small agrees whatever its share (in ``unit``)

    @property
    def ratio(self) -> float | None:
        return self.client / self.server if self.server else None

    @property
    def agrees(self) -> bool:
        if self.ratio is None:
            return False
        return abs(self.ratio - 1.0) <= TOLERANCE or abs(self.client - self.server) <= self.slack

    def describe(self) -> str:
        ratio = self.ratio
        share = f"{(ratio - 1) * 100:+.1f} %" if ratio is not None else "n/a"
        text = (
            f"{self.name}: client {self.client:g} {self.unit}, server {self.server:g} "
            f"{self.unit} ({share})"
        )
        return text if self.agrees else f"{text}: {self.cause}"


@dataclass(frozen=True)
class CrossChecked:
    """A repeat's cross-checks as the summary keeps them: each one described, and those
    that disagreed."""

    checks: list[str] = field(default_factory=list)
    checks_failed: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, checks: list[CrossCheck]) -> CrossChecked:
        return cls([c.describe() for c in checks], [c.describe() for c in checks if not c.agrees])


def counter_delta(
    before: dict[str, float] | None, after: dict[str, float] | None, names: tuple[str, ...]
) -> float | None:
    """What a counter counted over the repeat. A counter missing before but there after had
    not counted yet: a labelled counter (SGLang's) has no series until its first count."""
    if before is None or after is None:
        return None
    b = total(after, names)
    return None if b is None else b - (total(before, names) or 0.0)


def _usage(record: RequestRecord, key: str) -> int | None:
    value = (record.usage or {}).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _processed_prompt(record: RequestRecord) -> int | None:
    """Prompt tokens the server processed: llama.cpp's counter leaves out the ones it
    reused from its cache (``timings.cache_n``), while ``usage`` reports the whole prompt."""
    whole = _usage(record, "prompt_tokens")
    cached = (record.timings or {}).get("cache_n")
    if whole is None or not isinstance(cached, int) or isinstance(cached, bool):
        return whole
    return whole - cached


def decode_check(records: list[RequestRecord]) -> CrossCheck | None:
    """Client decode time (first to last token chunk) against the server's generation
    time. llama-server starts ``predicted_ms`` when it samples the first token and stops it
    at the last, so it spans what the client sees between its first and last chunk
    (measured at 4, 16 and 64 tokens: a median 0.06 ms apart, each token's delivery a few
    ms either way, hence the slack per request). A whole answer (not
    streamed) shows the client no decoding, so it has nothing to compare."""
    client_ms = server_ms = 0.0
    compared = 0
    for r in records:
        timings = r.timings or {}
        predicted_ms, predicted_n = timings.get("predicted_ms"), timings.get("predicted_n")
        if (
            not r.ok
            or not r.streamed
            or r.t_first_token_ns is None
            or r.t_last_token_ns is None
            or not isinstance(predicted_ms, int | float)
            or not isinstance(predicted_n, int)
            or predicted_n < 2
        ):
            continue
        client_ms += (r.t_last_token_ns - r.t_first_token_ns) / 1e6
        server_ms += predicted_ms
        compared += 1
    if server_ms <= 0:
        return None
    cause = (
        "the client saw tokens later than the server made them: a saturated client or a "
        "proxy buffering the stream"
        if client_ms > server_ms
        else "the client saw the tokens over less time than the server made them: chunks "
        "carrying several tokens (speculative decoding, a proxy), or a server timer that "
        "leaves part of the generation out"
    )
    return CrossCheck(
        "decode time",
        round(client_ms, 3),
        round(server_ms, 3),
        "ms",
        cause,
        slack=DELIVERY_JITTER_MS * compared,
    )


def token_checks(
    records: list[RequestRecord],
    before: dict[str, float] | None,
    after: dict[str, float] | None,
) -> list[CrossCheck]:
    """Output tokens the responses reported, and prompt tokens the server processed (not
    reused from its cache), against the server's counters."""
    out = []
    sent = [r for r in records if r.t_submit_ns is not None]
    for name, count, names in (
        ("output tokens", lambda r: _usage(r, "completion_tokens"), OUTPUT_COUNTERS),
        ("prompt tokens", _processed_prompt, PROMPT_COUNTERS),
    ):
        server = counter_delta(before, after, names)
        counts = [count(r) for r in sent]
        if server is None or not sent or any(c is None for c in counts):
            continue
        client = float(sum(c for c in counts if c is not None))
        cause = (
            "the server counted more than the responses reported: another client used the "
            "server during the run, or requests the client gave up on kept running"
            if server > client
            else "the server counted less than the responses reported: its counters missed "
            "requests (a restart, a second server behind a proxy)"
        )
        out.append(CrossCheck(name, client, server, "tokens", cause))
    return out


def request_check(
    records: list[RequestRecord],
    before: dict[str, float] | None,
    after: dict[str, float] | None,
) -> CrossCheck | None:
    """Requests sent against requests the server counted (servers with such a counter)."""
    server = counter_delta(before, after, REQUEST_COUNTERS)
    sent = sum(1 for r in records if r.t_submit_ns is not None)
    if server is None or not sent:
        return None
    cause = (
        "the server counted more requests than were sent: another client, or retries by a proxy"
        if server > sent
        else "the server counted fewer requests than were sent: some never reached it or "
        "did not finish"
    )
    return CrossCheck("requests", float(sent), server, "requests", cause)


def logged_request_check(records: list[RequestRecord]) -> CrossCheck | None:
    """llama-server has no request counter; its log prints the timings of every task it
    finishes, and each such task was matched to one response (its slot). Requests that
    finished against those the log accounts for."""
    finished = [r for r in records if r.ok and r.timings]
    if not finished:
        return None
    logged = sum(1 for r in finished if r.slot is not None)
    return CrossCheck(
        "requests",
        float(len(finished)),
        float(logged),
        "requests",
        "the server's log accounts for fewer finished requests than the client saw: "
        "responses whose timings match no logged task (another server, or a proxy)",
    )


def run_cross_checks(
    records: list[RequestRecord],
    before: dict[str, float] | None,
    after: dict[str, float] | None,
    logged: bool = False,
) -> list[CrossCheck]:
    """Every check one repeat's records and counters allow. ``logged``: the slots were
    matched from the server's own log (managed llama-server)."""
    measured = [r for r in records if not r.warmup]
    checks: list[CrossCheck | None] = [decode_check(measured)]
    checks += token_checks(measured, before, after)
    checks.append(
        request_check(measured, before, after)
        or (logged_request_check(measured) if logged else None)
    )
    return [c for c in checks if c is not None]


def tokens_per_chunk(records: list[RequestRecord]) -> float | None:
    """Mean tokens per text chunk by the server's count; above 1, ITL is a gap between
    chunks, and TPOT and decode speed rest on the server's token counts."""
    tokens = chunks = 0
    for r in records:
        count, source = r.output_tokens
        if r.ok and count and source != "chunks" and r.chunks:
            tokens += count
            chunks += len(r.chunks)
    return tokens / chunks if chunks else None
