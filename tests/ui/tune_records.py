"""A tune's records with known figures, for the Tune tab and the Pareto chart: no server, no
search."""

from __future__ import annotations

from pathlib import Path

from workbench.engine.tune.records import Recommendation, SloTarget, TriedConfig

SLOS = (SloTarget("ttft", 90, 2000.0), SloTarget("tpot", 50, 120.0))


def tried(
    slots: int,
    ttft_p90_s: float | None,
    agg_tok_s: float | None,
    measured: bool = False,
    meets: bool = True,
    why_lost: str | None = "lower throughput",
    cache: str = "f16",
) -> TriedConfig:
    figures = {"ttft_p90_s": ttft_p90_s, "agg_tok_s": agg_tok_s, "tpot_p50_ms": 80.0}
    settings = {"slots": slots, "ctx": 4096 * slots, "cache_type_k": cache}
    return TriedConfig(
        label=f"np={slots} {cache}",
        settings=settings,
        llama_server_args=("-np", str(slots), "-c", str(4096 * slots), "-ctk", cache),
        predicted={**figures, "ttft_p90_s": (ttft_p90_s or 0) * 0.9 or None},
        measured=figures if measured else None,
        meets_slo=meets,
        why_lost=why_lost,
    )


WINNER = tried(4, 1.4, 96.0, measured=True, why_lost=None)
TRIED = (
    tried(1, 5.2, 31.0, meets=False, why_lost="TTFT p90 5.2 s > 2000 ms"),
    tried(2, 2.6, 58.0, measured=True, meets=False, why_lost="TTFT p90 2.6 s > 2000 ms"),
    WINNER,
    tried(4, 1.5, 90.0, cache="q8_0"),
    tried(8, 0.9, 70.0, meets=False, why_lost="TPOT p50 150 ms > 120 ms"),
    tried(8, 1.1, 101.0, measured=True, meets=False, why_lost="TPOT p50 131 ms > 120 ms"),
    tried(16, None, None, why_lost="does not fit in memory"),
)


def recommendation(verified: bool = True) -> Recommendation:
    runners_up = tuple(t for t in TRIED if t is not WINNER and t.why_lost)[:3]
    return Recommendation(
        slos=SLOS,
        winner=WINNER,
        verified=verified,
        users=8,
        rate_rps=0.9,
        runners_up=runners_up,
        tried=TRIED,
        command_line="llama-server -m model.gguf -np 4 -c 16384 -ctk f16",
        session_path=Path("results/tune.session.sqlite"),
        elapsed_s=312.0,
    )
