"""``recommendation.json``: a tune's answer as a file, with a fixed, documented key set
(``docs/guides/tune.md``) that other tools may read. Every candidate says where its figures
come from (``measured`` or ``predicted``); ``measured`` holds only what a run measured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench.engine.tune.records import Recommendation, TriedConfig
from workbench.engine.tune.slo_targets import value_ms

VERSION = 1
FILE_NAME = "recommendation.json"


def _candidate(config: TriedConfig) -> dict[str, Any]:
    return {
        "label": config.label,
        "settings": config.settings,
        "args": list(config.llama_server_args),
        "source": config.source if config.measured is not None or config.predicted else "none",
        "figures": config.measured if config.measured is not None else config.predicted,
        "predicted": config.predicted,
        "meets_slo": config.meets_slo,
        "fits_memory": config.fits_memory,
        "why_lost": config.why_lost,
    }


def document(recommendation: Recommendation) -> dict[str, Any]:
    """The file's content: its keys in the order the guide lists them."""
    r = recommendation
    winner = r.winner
    measured = {} if winner is None or winner.measured is None else winner.measured
    return {
        "version": VERSION,
        "slos": [
            {
                "slo": s.name,
                "limit_ms": s.limit_ms,
                "measured_ms": value_ms(s, measured) if measured else None,
            }
            for s in r.slos
        ],
        "verified": r.verified,
        "reason": r.reason,
        "llama_server_args": None if winner is None else list(winner.llama_server_args),
        "command_line": r.command_line,
        "measured": {s.name: value_ms(s, measured) for s in r.slos} if measured else {},
        "winner": None if winner is None else _candidate(winner),
        "users": r.users,
        "rate_rps": r.rate_rps,
        "rate_probes": [
            {"rate_rps": p.rate_rps, "met": p.met, "why": p.why} for p in r.rate_probes
        ],
        "runners_up": [_candidate(t) for t in r.runners_up],
        "tried": [_candidate(t) for t in r.tried],
        "session": None if r.session_path is None else str(r.session_path),
        "rate_session": None if r.rate_session_path is None else str(r.rate_session_path),
        "elapsed_s": round(r.elapsed_s, 1),
    }


def write_recommendation(recommendation: Recommendation, folder: Path) -> Path:
    path = folder / FILE_NAME
    path.write_text(json.dumps(document(recommendation), indent=2) + "\n")
    return path
