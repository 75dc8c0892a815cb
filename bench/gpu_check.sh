#!/usr/bin/env bash
# The workbench on an NVIDIA GPU, checked end to end in one go: build llama-server with CUDA,
# run the reference lab (experiments/slots-1-2-4.toml) with every layer offloaded, check the
# session recorded the server's GPU memory and the GPU's bandwidth, export its charts, run
# the same lab on the CPU and compare the two. Prints PASS / FAIL / SKIP per check and exits
# non-zero when any check failed.
#
#   bench/gpu_check.sh              the whole check (an NVIDIA machine, network for the build)
#   bench/gpu_check.sh --cpu-only   no GPU: the CPU run, its charts and a comparison with the
#                                   recorded demo session; every GPU step is a SKIP
#
# Environment:
#   GPU_CHECK_SKIP_BUILD=1      keep the llama-server installed (already built with CUDA)
#   GPU_CHECK_OUT=DIR           where sessions, charts and the comparison go
#                               (default: results/gpu-check-<date-time>)
#   GPU_CHECK_RUN_ARGS="..."    more `workbench run` flags for both runs, e.g. a quick try:
#                               "--requests 2 --max-tokens 8 --warmup 0"
#   GPU_CHECK_TIMEOUT_S=900     the most each build or run may take
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

CPU_ONLY=0
case "${1:-}" in
  --cpu-only) CPU_ONLY=1 ;;
  "") ;;
  *) echo "usage: $0 [--cpu-only]" >&2; exit 2 ;;
esac
EXPERIMENT=experiments/slots-1-2-4.toml
DEMO=resources/demo/slots-1-2-4.session.sqlite
OUT=${GPU_CHECK_OUT:-results/gpu-check-$(date +%Y%m%d-%H%M%S)}
LIMIT=${GPU_CHECK_TIMEOUT_S:-900}
read -r -a RUN_ARGS <<<"${GPU_CHECK_RUN_ARGS:-}"
PY=.venv/bin/python
WB=.venv/bin/workbench
mkdir -p "$OUT"
FAILED=0

pass() { echo "PASS $1: $2"; }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
skip() { echo "SKIP $1: $2"; }
newest_session() {  # the newest session file in a folder (names are the workbench's own)
  # shellcheck disable=SC2012
  ls -t "$1"/*.session.sqlite 2>/dev/null | head -n 1
}

# A session's own record, read from its SQLite file: the run's status, each configuration's
# server (backend, layers offloaded), its GPU memory samples, the GPU's bandwidth in the
# fingerprint, and the notices that say why a figure is missing. One line per check.
session_checks() {  # $1: session file, $2: gpu or cpu
  "$PY" - "$1" "$2" <<'PYTHON'
import json, sqlite3, sys

path, kind = sys.argv[1], sys.argv[2]
db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
status, hardware = db.execute("SELECT status, hardware_json FROM session").fetchone()
configs = db.execute("SELECT idx, label, status, facts_json FROM configs ORDER BY idx").fetchall()
failed = [f"{label} {st}" for _, label, st, _ in configs if st != "ok"]
ok = status == "complete" and configs and not failed
print(f"{'PASS' if ok else 'FAIL'} {kind}-run: session {status}, {len(configs)} configurations"
      + (f" (not ok: {', '.join(failed)})" if failed else ""))
if kind != "gpu":
    sys.exit(0)
facts = {idx: json.loads(f or "{}") for idx, _, _, f in configs}
offload = {label: (facts[i].get("backend"), facts[i].get("layers_offloaded"),
                   facts[i].get("layers_total")) for i, label, _, _ in configs}
on_gpu = all(b == "CUDA" and n and k == n for b, k, n in offload.values())
print(f"{'PASS' if on_gpu else 'FAIL'} gpu-offload: backend, layers offloaded per "
      f"configuration: {offload}")
samples = {label: db.execute(
    "SELECT COUNT(*), MAX(gpu_bytes) FROM gpu_samples WHERE config_idx = ?", (i,)).fetchone()
    for i, label, _, _ in configs}
buffers = {label: sum(facts[i].get(k) or 0 for k in
                      ("model_buffer_mib", "kv_buffer_mib", "compute_buffer_mib"))
           for i, label, _, _ in configs}
good = all(n and top and top > 0 for n, top in samples.values())
print(f"{'PASS' if good else 'FAIL'} gpu-memory-samples: " + "; ".join(
    f"{label}: {n} samples, peak {(top or 0) / 2**20:.0f} MiB (logged buffers "
    f"{buffers[label]:.0f} MiB)" for label, (n, top) in samples.items()))
if not good:
    for level, text in db.execute("SELECT level, text FROM notices"):
        if "GPU" in text or "NVML" in text:
            print(f"     notice ({level}): {text}")
gpus = json.loads(hardware).get("gpus") or []
bandwidth = [g.get("memory_bandwidth_gbs") for g in gpus]
print(f"{'PASS' if bandwidth and all(bandwidth) else 'FAIL'} gpu-bandwidth: fingerprint "
      + (", ".join(f"{g.get('name')} {g.get('memory_bandwidth_gbs')} GB/s" for g in gpus)
         or "lists no GPU"))
PYTHON
}

report_session() {  # session_checks' lines, each FAIL counted; a check that broke is one too
  local lines line
  if ! lines=$(session_checks "$1" "$2" 2>&1); then
    fail "$2-session" "reading $1 failed: $(tail -n 1 <<<"$lines")"
  fi
  while IFS= read -r line; do
    echo "$line"
    if [[ $line == FAIL* ]]; then FAILED=$((FAILED + 1)); fi
  done <<<"$lines"
}

# Runs the lab; prints the session file it wrote (empty when none).
run_lab() {  # $1: folder, then extra flags
  local folder=$1
  shift
  mkdir -p "$folder"
  timeout "$LIMIT" "$WB" run "$EXPERIMENT" --out "$folder" --quiet "$@" "${RUN_ARGS[@]}" \
    >"$folder/run.log" 2>&1
  echo "     (workbench run exited $?; its output: $folder/run.log)" >&2
  newest_session "$folder"
}

if [ "$CPU_ONLY" = 1 ]; then
  skip build "--cpu-only"
elif [ "${GPU_CHECK_SKIP_BUILD:-0}" = 1 ]; then
  skip build "GPU_CHECK_SKIP_BUILD=1: the installed llama-server is used"
elif timeout "$LIMIT" make install LLAMA_BACKEND=cuda >"$OUT/build.log" 2>&1; then
  pass build "make install LLAMA_BACKEND=cuda ($OUT/build.log)"
else
  fail build "make install LLAMA_BACKEND=cuda failed: see $OUT/build.log"
fi

if [ "$CPU_ONLY" = 1 ]; then
  skip cuda-server "--cpu-only"
  skip nvml "--cpu-only"
else
  SERVER=$("$PY" -c "from workbench.engine.server.discovery import find_server_binary as f; print(f().path)" 2>&1)
  DEVICES=$(timeout 60 "$SERVER" --list-devices 2>&1)
  if grep -q "CUDA" <<<"$DEVICES"; then
    pass cuda-server "$SERVER lists $(grep CUDA <<<"$DEVICES" | head -n 1 | xargs)"
  else
    fail cuda-server "$SERVER lists no CUDA device: $(tr '\n' ' ' <<<"$DEVICES")"
  fi
  if ! "$PY" -c "import pynvml" 2>/dev/null; then
    echo "     nvidia-ml-py is missing: installing the project's [nvidia] extra" >&2
    .venv/bin/pip install --quiet -e '.[nvidia]' >>"$OUT/build.log" 2>&1
  fi
  if NVML=$("$PY" - 2>&1 <<'PYTHON'
from workbench.engine.measure.gpu_memory import nvml

session = nvml()
print(session.unavailable or ", ".join(f"{g.name}: {g.memory_bandwidth_gbs} GB/s" for g in session.gpus()))
raise SystemExit(session.module is None)
PYTHON
  ); then
    pass nvml "$NVML"
  else
    fail nvml "$NVML"
  fi
fi

GPU_SESSION=""
if [ "$CPU_ONLY" = 1 ]; then
  skip gpu-run "--cpu-only"
else
  GPU_SESSION=$(run_lab "$OUT/gpu" --gpu-layers 99)
  if [ -z "$GPU_SESSION" ]; then
    fail gpu-run "no session written (see $OUT/gpu/run.log)"
  else
    report_session "$GPU_SESSION" gpu
    ROOF=$(timeout 120 "$WB" roofline "$GPU_SESSION" 2>&1)
    echo "$ROOF" >"$OUT/roofline.txt"
    if grep -q "peak from NVML" <<<"$ROOF"; then
      pass roofline "$(grep -m 1 'memory bandwidth' <<<"$ROOF")"
    else
      fail roofline "not bound by the GPU's bandwidth: $(head -n 1 <<<"$ROOF")"
    fi
  fi
fi

# The CPU run: the same lab with no GPU visible to the server.
CPU_SESSION=$(CUDA_VISIBLE_DEVICES="" run_lab "$OUT/cpu" --gpu-layers 0)
if [ -z "$CPU_SESSION" ]; then
  fail cpu-run "no session written (see $OUT/cpu/run.log)"
else
  report_session "$CPU_SESSION" cpu
fi

# Charts of the session under test (the GPU's; the CPU's with --cpu-only).
UNDER_TEST=${GPU_SESSION:-}
[ "$CPU_ONLY" = 1 ] && UNDER_TEST=$CPU_SESSION
if [ -z "$UNDER_TEST" ]; then
  fail charts "no session to export"
elif timeout 300 "$WB" export "$UNDER_TEST" --charts "$OUT/charts" >"$OUT/export.log" 2>&1 \
  && [ -n "$(ls "$OUT"/charts/*.png 2>/dev/null)" ]; then
  pass charts "$(find "$OUT/charts" -name '*.png' | wc -l) PNG charts in $OUT/charts"
else
  fail charts "export failed or wrote no PNG: see $OUT/export.log"
fi

# The comparison: GPU against CPU (with --cpu-only: this CPU run against the recorded demo).
if [ "$CPU_ONLY" = 1 ]; then
  A=$CPU_SESSION B=$DEMO
else
  A=$GPU_SESSION B=$CPU_SESSION
fi
if [ -z "$A" ] || [ -z "$B" ]; then
  fail compare "a session is missing (A: '${A}', B: '${B}')"
elif timeout 300 "$WB" compare "$A" "$B" --out "$OUT/compare" >"$OUT/compare.txt" 2>&1 \
  && [ -s "$OUT/compare/report.md" ]; then
  pass compare "$OUT/compare/report.md ($(find "$OUT/compare" -type f | wc -l) files)"
  cat "$OUT/compare.txt"
else
  fail compare "workbench compare failed: see $OUT/compare.txt"
fi

echo
if [ "$FAILED" -gt 0 ]; then
  echo "gpu_check: $FAILED check(s) FAILED (everything is under $OUT)"
  exit 1
fi
echo "gpu_check: all checks passed (everything is under $OUT)"
