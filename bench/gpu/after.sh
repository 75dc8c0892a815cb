#!/usr/bin/env bash
# Here, after bench/gpu/device_check.sh came back: the GPU session's charts, its comparison
# with the same lab on a CPU machine (bench/gpu/device_check.sh --cpu-only), both rooflines,
# and how much continuous batching gains on each (aggregate tok/s at the most slots over 1 slot).
#
#   bench/gpu/after.sh SESSION_GPU SESSION_CPU OUTDIR
#
# OUTDIR gets: charts-gpu/, charts-cpu/, gpu.csv, cpu.csv, compare/ (report.md and charts),
# relative.md (each session against its 1-slot configuration), roofline-*.txt, show-*.txt,
# checks-gpu.txt. Exits 1 when a step failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
if [ $# -ne 3 ]; then
  echo "usage: $0 SESSION_GPU SESSION_CPU OUTDIR" >&2
  exit 2
fi
GPU=$1 CPU=$2 DIR=$3
WB=${WORKBENCH:-.venv/bin/workbench}
PY=${PYTHON:-.venv/bin/python}
mkdir -p "$DIR"
FAILED=0
run() {  # run NAME COMMAND...: its output in the log, a FAIL line when it fails
  local name=$1
  shift
  if "$@" >>"$DIR/after.log" 2>&1; then echo "ok   $name"; else echo "FAIL $name (see $DIR/after.log)"; FAILED=$((FAILED + 1)); fi
}
"$PY" bench/gpu/session_checks.py "$GPU" >"$DIR/checks-gpu.txt" 2>&1
cat "$DIR/checks-gpu.txt"
for side in gpu cpu; do
  session=$GPU
  [ "$side" = cpu ] && session=$CPU
  run "charts-$side" "$WB" export "$session" --charts "$DIR/charts-$side" --csv "$DIR/$side.csv"
  "$WB" roofline "$session" >"$DIR/roofline-$side.txt" 2>&1 || FAILED=$((FAILED + 1))
  COLUMNS=140 "$WB" show "$session" >"$DIR/show-$side.txt" 2>&1 || FAILED=$((FAILED + 1))
done
run compare "$WB" compare "$GPU" "$CPU" --out "$DIR/compare" --markdown "$DIR/compare.md"
run relative "$WB" compare --relative "$GPU" "$CPU" --markdown "$DIR/relative.md"
# Continuous batching's gain on each machine, from the exported tables.
"$PY" - "$DIR/gpu.csv" "$DIR/cpu.csv" <<'PYTHON' | tee "$DIR/gain.txt"
import csv, sys

for name, path in zip(("GPU", "CPU"), sys.argv[1:]):
    try:
        rows = {int(r["slots"]): float(r["agg_tok_s"]) for r in csv.DictReader(open(path))}
    except (OSError, KeyError, ValueError) as exc:
        print(f"{name}: no table ({exc})")
        continue
    low, high = min(rows), max(rows)
    print(f"{name}: aggregate {rows[low]:.1f} tok/s at {low} slot(s), {rows[high]:.1f} at {high}: "
          f"x{rows[high] / rows[low]:.2f}")
PYTHON
echo "after: $FAILED step(s) failed; everything is under $DIR"
exit $((FAILED > 0))
