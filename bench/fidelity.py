"""Does the workbench recover latencies it was not told? Side by side with a raw httpx loop.

A mock server (``workbench.mock_server``, in a process of its own) streams every request on a
known schedule: first chunk ``--ttft-ms`` after the request arrives, then a token every
``--itl-ms``. For each number of concurrent streams, in the same run and in this order:

- the workbench, as a user runs it: ``workbench run --base-url`` in a process of its own, under
  a pseudo-terminal so its live progress draws as it does for a person (``--no-tty`` to skip);
- a minimal raw-httpx loop, in a process of its own.

Each measured figure is printed beside the configured one. The mock also logs when it really
wrote each chunk (timers fire late under load), so the table splits the error in two:
``err`` (measured minus configured) and ``client`` (measured minus what the mock really
served: the client's own share; for TPOT, measured first-to-last chunk time against the mock's
own). CPU is the client process's CPU seconds while the streams
ran (not its start-up), per 1,000 streamed tokens.

    .venv/bin/python bench/fidelity.py                      # 1, 8, 64, 256 streams
    .venv/bin/python bench/fidelity.py --streams 8,64 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import raw_client  # noqa: E402

from workbench.engine.figures.per_request import percentile  # noqa: E402
from workbench.engine.store import open_session  # noqa: E402
from workbench.mock_server import MockProcess  # noqa: E402

GOALS_MS = {1: 1.0, 8: 1.0, 64: 2.0, 256: 5.0}  # TTFT p50 error; p99 within 3x


@dataclass
class Measured:
    """One request as a client saw it, matched to what the mock really did."""

    prompt: str
    t_submit_ns: int
    t_first_ns: int
    t_last_ns: int
    tokens: int
    chunk_ns: list[int]


@dataclass
class Row:
    client: str
    streams: int
    ttft_p50: float
    ttft_p99: float
    client_p50: float
    client_p99: float
    mock_late_p50: float
    tpot_p50: float
    tpot_client_pct: float  # measured TPOT against what the mock really sent, p50
    itl_p50: float
    itl_p99: float
    cpu_per_k: float
    failed: int


# -- the mock server -----------------------------------------------------------------------
def start_mock(args: argparse.Namespace) -> MockProcess:
    timing = ["--ttft-ms", str(args.ttft_ms), "--itl-ms", str(args.itl_ms)]
    timing += ["--tokens", str(args.tokens), "--tokens-per-chunk", str(args.tokens_per_chunk)]
    return MockProcess(*timing, *(["--close"] if args.close else []))


# -- the two clients -----------------------------------------------------------------------
def run_workbench(url: str, streams: int, tokens: int, tty: bool) -> tuple[list[Measured], float]:
    folder = Path(tempfile.mkdtemp(prefix="fidelity-"))
    try:
        experiment = folder / "fidelity.toml"
        experiment.write_text(
            f'name = "fidelity-{streams}"\n[workload]\nrequests = {streams}\n'
            f"concurrency = {streams}\nmax_tokens = {tokens}\nwarmup = 1\n"
        )
        cmd = [sys.executable, "-m", "workbench.cli.main", "run", str(experiment)]
        cmd += ["--base-url", url, "--out", str(folder / "out")]
        if tty and shutil.which("script"):
            cmd = ["script", "-qec", shlex.join(cmd), "/dev/null"]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
        sessions = list((folder / "out").glob("*.session.sqlite"))
        if done.returncode != 0 or not sessions:
            raise SystemExit(f"workbench run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        out = []
        with open_session(sessions[0]) as session:
            cpu = sum(load.process_cpu_s for load in session.client_load(0).values())
            for r in session.records(0):
                if r.warmup:
                    continue
                if r.ok and r.t_submit_ns and r.t_first_token_ns and r.t_last_token_ns:
                    n, _ = r.output_tokens
                    chunk_ns = [c.t_ns for c in r.chunks]
                    out.append(
                        Measured(
                            r.prompt,
                            r.t_submit_ns,
                            r.t_first_token_ns,
                            r.t_last_token_ns,
                            n or 0,
                            chunk_ns,
                        )
                    )
        return out, cpu
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_raw(url: str, streams: int, tokens: int) -> tuple[list[Measured], float]:
    document = raw_client.run(url, streams, tokens)
    cpu = document["cpu_s"]
    out = []
    for r in document["requests"]:
        ns = r["chunk_ns"]
        if ns:
            out.append(Measured(r["prompt"], r["t_submit_ns"], ns[0], ns[-1], tokens, ns))
    return out, cpu


# -- the table -----------------------------------------------------------------------------
def summarise(
    client: str,
    streams: int,
    measured: list[Measured],
    log: dict[str, dict],
    args: argparse.Namespace,
    cpu: float,
) -> Row:
    ms = 1e6
    ttft, own, late, tpot, tpot_own, itl = [], [], [], [], [], []
    for m in measured:
        served = log.get(m.prompt)
        if served is None or not served["sent_ns"]:
            continue
        first_sent = served["sent_ns"][0]
        ttft.append((m.t_first_ns - m.t_submit_ns) / ms)
        own.append(((m.t_first_ns - m.t_submit_ns) - (first_sent - served["t_received_ns"])) / ms)
        late.append((first_sent - served["t_received_ns"]) / ms - args.ttft_ms)
        if m.tokens > 1:
            tpot.append((m.t_last_ns - m.t_first_ns) / ms / (m.tokens - 1))
            sent = served["sent_ns"]
            served_span = sent[-1] - sent[0]
            if served_span > 0:
                tpot_own.append(((m.t_last_ns - m.t_first_ns) / served_span - 1) * 100)
        itl += [(b - a) / ms for a, b in zip(m.chunk_ns, m.chunk_ns[1:], strict=False)]
    tokens = sum(m.tokens for m in measured)

    def p(values: list[float], q: float) -> float:
        value = percentile(values, q)
        return float("nan") if value is None else value

    return Row(
        client,
        streams,
        p(ttft, 50) - args.ttft_ms,
        p(ttft, 99) - args.ttft_ms,
        p(own, 50),
        p(own, 99),
        p(late, 50),
        p(tpot, 50),
        p(tpot_own, 50),
        p(itl, 50),
        p(itl, 99),
        cpu / tokens * 1000 if tokens else float("nan"),
        streams - len(ttft),
    )


def print_table(rows: list[Row], args: argparse.Namespace) -> None:
    itl_configured = args.itl_ms * args.tokens_per_chunk
    print(
        f"\nconfigured: TTFT {args.ttft_ms:g} ms, TPOT {args.itl_ms:g} ms, ITL (chunk gap) "
        f"{itl_configured:g} ms, {args.tokens} tokens, {args.tokens_per_chunk} per chunk, "
        f"keep-alive {'off' if args.close else 'on'}; {os.cpu_count()} cores"
    )
    head = (
        "| streams | client | TTFT p50 err | TTFT p99 err | client p50 | client p99 "
        "| mock late p50 | TPOT p50 (err) | TPOT client | ITL p50 / p99 | CPU s/1k tok | failed |"
    )
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        tpot_err = (r.tpot_p50 / args.itl_ms - 1) * 100
        print(
            f"| {r.streams} | {r.client} | {r.ttft_p50:+.2f} ms | {r.ttft_p99:+.2f} ms "
            f"| {r.client_p50:+.2f} ms | {r.client_p99:+.2f} ms | {r.mock_late_p50:+.2f} ms "
            f"| {r.tpot_p50:.3f} ms ({tpot_err:+.2f} %) | {r.tpot_client_pct:+.2f} % "
            f"| {r.itl_p50:.2f} / {r.itl_p99:.2f} ms "
            f"| {r.cpu_per_k:.3f} | {r.failed} |"
        )
    print("\ngoals (workbench): TTFT p50 error within", end="")
    print(", ".join(f" {g:g} ms at {n}" for n, g in GOALS_MS.items()), end="")
    print("; p99 within 3x; TPOT within 0.5 %; never more than 1 ms worse than the raw loop.")
    by_key = {(r.client, r.streams): r for r in rows}
    for n in sorted({r.streams for r in rows}):
        wb, raw = by_key.get(("workbench", n)), by_key.get(("raw httpx", n))
        if wb is None:
            continue
        goal = GOALS_MS.get(n, 5.0)
        checks = [
            ("TTFT p50", abs(wb.ttft_p50) <= goal),
            ("TTFT p99", abs(wb.ttft_p99) <= 3 * goal),
            ("TPOT", abs(wb.tpot_p50 / args.itl_ms - 1) <= 0.005),
        ]
        if raw is not None:
            checks.append(("vs raw", wb.ttft_p50 - raw.ttft_p50 <= 1.0))
        verdict = ", ".join(f"{name} {'met' if ok else 'MISSED'}" for name, ok in checks)
        print(f"  {n} streams: {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="1,8,64,256", help="comma-separated stream counts")
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument("--itl-ms", type=float, default=20.0)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1, help="repeat each measurement")
    parser.add_argument("--close", action="store_true", help="the mock refuses keep-alive")
    parser.add_argument("--no-tty", action="store_true", help="run the CLI without a terminal")
    parser.add_argument("--only", choices=("workbench", "raw"), help="measure one client only")
    args = parser.parse_args()
    streams = [int(s) for s in args.streams.split(",")]
    rows: list[Row] = []
    for n in streams:
        for _ in range(args.rounds):
            for client in ("workbench", "raw httpx"):
                if args.only and not client.startswith(args.only):
                    continue
                mock = start_mock(args)
                try:
                    if client == "workbench":
                        measured, cpu = run_workbench(mock.url, n, args.tokens, not args.no_tty)
                    else:
                        measured, cpu = run_raw(mock.url, n, args.tokens)
                    rows.append(summarise(client, n, measured, mock.served(), args, cpu))
                finally:
                    mock.stop()
                print(f"  measured {client} at {n} streams", file=sys.stderr)
    if args.rounds > 1:
        rows = _medians(rows)
    print_table(rows, args)
    return 0


def _medians(rows: list[Row]) -> list[Row]:
    """One row per (client, streams): the median of each figure over the rounds."""
    groups: dict[tuple[str, int], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.client, r.streams), []).append(r)
    out = []
    for (client, n), group in groups.items():
        figures = list(Row.__dataclass_fields__)[2:]
        values = [statistics.median(getattr(r, f) for r in group) for f in figures]
        out.append(Row(client, n, *values))  # type: ignore[arg-type]
    return out


if __name__ == "__main__":
    sys.exit(main())
