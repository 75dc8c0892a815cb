"""When the client, not the server, shaped a run's numbers.

Two signs: requests left later than they should have (dispatch delay), or the thread that
reads the sockets and takes the timestamps was saturated. A late dispatch only matters
against the latency it could distort: 8 ms of delay shapes a 50 ms TTFT, not an 18 s one.
A saturated loop delays every arrival it reads, so it counts whatever the latencies are.
The thresholds live here, with the rule that applies them; the catalogue (``metrics``) reads
them to print its definitions.
"""

from __future__ import annotations

from dataclasses import dataclass

DISPATCH_LIMIT_MS = 5.0  # dispatch delay p99 above this may have shaped the numbers ...
DISPATCH_SHARE_OF_TTFT = 0.01  # ... when it is at least this share of TTFT p50
LOOP_BUSY_LIMIT = 0.85  # share of the run the measuring loop was busy: saturated above this

CLIENT_LIMITED_RULE = (
    f"dispatch delay p99 over {DISPATCH_LIMIT_MS:g} ms and at least "
    f"{DISPATCH_SHARE_OF_TTFT:.0%} of TTFT p50, or the measuring loop busy over "
    f"{LOOP_BUSY_LIMIT:.0%} of a repeat"
)


@dataclass(frozen=True)
class ClientLoad:
    """How hard the measuring client worked during one run (one repeat of a configuration).

    ``loop_cpu_s`` is the CPU time of the thread whose event loop reads the sockets and
    takes the timestamps; when it nears the run's wall time, arrivals wait for the loop and
    every latency grows by that wait."""

    wall_s: float
    loop_cpu_s: float
    process_cpu_s: float

    @property
    def loop_busy(self) -> float:
        return self.loop_cpu_s / self.wall_s if self.wall_s > 0 else 0.0


def client_limited_reason(
    dispatch_p99_ms: float | None, load: ClientLoad | None, ttft_p50_s: float | None = None
) -> str | None:
    """Why a run's numbers are the client's as much as the server's, or None. Without a
    TTFT (no request answered) a late dispatch is judged on its own."""
    reasons = []
    if dispatch_p99_ms is not None and dispatch_p99_ms > DISPATCH_LIMIT_MS:
        if ttft_p50_s is None or ttft_p50_s <= 0:
            reasons.append(
                f"dispatch delay p99 {dispatch_p99_ms:.1f} ms > {DISPATCH_LIMIT_MS:g} ms"
            )
        elif (share := dispatch_p99_ms / 1000 / ttft_p50_s) >= DISPATCH_SHARE_OF_TTFT:
            reasons.append(
                f"dispatch delay p99 {dispatch_p99_ms:.1f} ms > {DISPATCH_LIMIT_MS:g} ms, "
                f"{_share(share)} of TTFT p50 {ttft_p50_s:.3g} s"
            )
    if load is not None and load.loop_busy > LOOP_BUSY_LIMIT:
        reasons.append(f"measuring loop busy {load.loop_busy:.0%} of the run")
    return "; ".join(reasons) or None


def _share(share: float) -> str:
    return f"{share:.0%}" if share >= 0.095 else f"{share:.1%}"
