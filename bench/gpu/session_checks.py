"""Checks a GPU lab's session from its SQLite file: the run completed, every configuration's
server offloaded every layer to CUDA, NVML sampled the server's GPU memory, and the machine's
fingerprint holds the GPU's bandwidth. One PASS/FAIL line per check; exits 1 on any FAIL.

    session_checks.py SESSION [--cpu]   (--cpu: the run's own check alone)
"""

from __future__ import annotations

import json
import sqlite3
import sys


def checks(path: str, gpu: bool) -> list[str]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    status, hardware = db.execute("SELECT status, hardware_json FROM session").fetchone()
    configs = db.execute(
        "SELECT idx, label, status, facts_json FROM configs ORDER BY idx"
    ).fetchall()
    failed = [f"{label} {st}" for _, label, st, _ in configs if st != "ok"]
    ok = status == "complete" and configs and not failed
    lines = [
        f"{'PASS' if ok else 'FAIL'} run: session {status}, {len(configs)} configurations"
        + (f" (not ok: {', '.join(failed)})" if failed else "")
    ]
    if not gpu:
        return lines
    facts = {idx: json.loads(f or "{}") for idx, _, _, f in configs}
    offload = {
        label: (
            facts[i].get("backend"),
            facts[i].get("layers_offloaded"),
            facts[i].get("layers_total"),
        )
        for i, label, _, _ in configs
    }
    on_gpu = bool(offload) and all(b == "CUDA" and n and k == n for b, k, n in offload.values())
    lines.append(
        f"{'PASS' if on_gpu else 'FAIL'} gpu-offload: backend, layers offloaded/total: {offload}"
    )
    samples = {
        label: db.execute(
            "SELECT COUNT(*), MIN(gpu_bytes), MAX(gpu_bytes) FROM gpu_samples WHERE config_idx = ?",
            (i,),
        ).fetchone()
        for i, label, _, _ in configs
    }
    buffers = {
        label: sum(
            facts[i].get(k) or 0
            for k in ("model_buffer_mib", "kv_buffer_mib", "compute_buffer_mib")
        )
        for i, label, _, _ in configs
    }
    good = bool(samples) and all(n and top and top > 0 for n, _, top in samples.values())
    lines.append(
        f"{'PASS' if good else 'FAIL'} gpu-memory-samples (NVML): "
        + "; ".join(
            f"{label}: {n} samples, {(low or 0) / 2**20:.0f}..{(top or 0) / 2**20:.0f} MiB "
            f"(logged buffers {buffers[label]:.0f} MiB)"
            for label, (n, low, top) in samples.items()
        )
    )
    if not good:
        for level, text in db.execute("SELECT level, text FROM notices"):
            if "GPU" in text or "NVML" in text:
                lines.append(f"     notice ({level}): {text}")
    gpus = json.loads(hardware).get("gpus") or []
    bandwidth = [g.get("memory_bandwidth_gbs") for g in gpus]
    lines.append(
        f"{'PASS' if bandwidth and all(bandwidth) else 'FAIL'} gpu-bandwidth: fingerprint "
        + (
            ", ".join(f"{g.get('name')} {g.get('memory_bandwidth_gbs')} GB/s" for g in gpus)
            or "lists no GPU"
        )
    )
    return lines


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    lines = checks(argv[0], gpu="--cpu" not in argv[1:])
    print("\n".join(lines))
    return 1 if any(line.startswith("FAIL") for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
