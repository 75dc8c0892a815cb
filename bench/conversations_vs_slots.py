"""Did the conversations find their history in the cache, per configuration?

Reads a conversations run's ``requests.csv`` (``workbench run`` writes it next to the
session, ``workbench export SESSION --requests-csv FILE`` writes it again) and prints, for
each configuration, as a Markdown table:

- **history reused**: over every later turn (2 on) of every conversation, the tokens the
  server took from its cache (``cache_n``, at most the history) against the history it had
  processed once already (the previous turn's ``prompt_tokens``), as
  ``figures/conversation_cache`` counts a turn's ``seen`` and ``cached``;
- **re-prefilled / turn**: the mean history a later turn processed again;
- **TTFT p50** of turn 1 and of the later turns, and their ratio.

  .venv/bin/python bench/conversations_vs_slots.py results/conversations-vs-slots-*/requests.csv

The shipped ``experiments/conversations-vs-slots.toml`` measures 1, 2, 4 and 8 slots for 8
users, with the RAM prompt cache off and on; its table is in the docs' conversations
section.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Configuration:
    """One configuration's measured turns: each conversation's by turn number."""

    label: str
    turns: dict[str, dict[int, dict[str, str]]] = field(default_factory=lambda: defaultdict(dict))

    def later(self) -> list[tuple[dict[str, str], dict[str, str]]]:
        """Each later turn with the turn before it in its conversation, both answered."""
        return [
            (by_turn[n - 1], row)
            for by_turn in self.turns.values()
            for n, row in sorted(by_turn.items())
            if n > 1 and n - 1 in by_turn and _ok(by_turn[n - 1]) and _ok(row)
        ]


def _ok(row: dict[str, str]) -> bool:
    return (
        row["ok"] in ("1", "True", "true") and bool(row["prompt_tokens"]) and bool(row["cache_n"])
    )


def read(path: Path) -> list[Configuration]:
    configs: dict[str, Configuration] = {}
    with path.open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row["warmup"] in ("1", "True", "true") or not row["conversation"]:
                continue
            config = configs.setdefault(row["config"], Configuration(row["label"]))
            config.turns[row["conversation"]][int(row["turn"])] = row
    return [configs[k] for k in sorted(configs, key=int)]


def table(configs: list[Configuration]) -> str:
    lines = [
        "| configuration | history reused | re-prefilled / turn | TTFT p50 turn 1 | "
        "TTFT p50 turns 2+ | later / first |",
        "|---|---|---|---|---|---|",
    ]
    for config in configs:
        pairs = config.later()
        seen = [int(before["prompt_tokens"]) for before, _ in pairs]
        cached = [min(int(row["cache_n"]), s) for (_, row), s in zip(pairs, seen, strict=True)]
        firsts = [float(t[1]["ttft_s"]) for t in config.turns.values() if 1 in t and t[1]["ttft_s"]]
        laters = [float(row["ttft_s"]) for _, row in pairs if row["ttft_s"]]
        if not seen or not firsts or not laters:
            lines.append(f"| {config.label} | (no answered later turns) | | | | |")
            continue
        first, later = statistics.median(firsts), statistics.median(laters)
        lines.append(
            f"| {config.label} | {sum(cached) / sum(seen):.0%} | "
            f"{(sum(seen) - sum(cached)) / len(seen):.0f} | {first:.2f} s | {later:.2f} s | "
            f"{later / first:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("requests_csv", type=Path, help="a conversations run's requests.csv")
    args = parser.parse_args()
    print(table(read(args.requests_csv)))


if __name__ == "__main__":
    main()
