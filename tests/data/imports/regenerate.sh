#!/usr/bin/env bash
# Regenerates the GuideLLM and NVIDIA AIPerf result files in this folder, end to end,
# against a real llama-server (the project's own, from .venv) serving the default model.
#
# NOT part of the test suite or CI: run it by hand, from anywhere:
#     bash tests/data/imports/regenerate.sh
# It needs PyPI (the tools are installed into scratch virtualenvs OUTSIDE the repository,
# never into the project) but not the Hugging Face hub: the tokenizer both tools load is
# built locally from the GGUF model's own vocabulary.
#
# Overridable: SCRATCH (default /tmp), GUIDELLM_VENV, AIPERF_VENV, TOOL_TIMEOUT (s per run).
# See README.md here for what the files hold.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
PROJECT_PY="$REPO/.venv/bin/python"

SCRATCH="${SCRATCH:-/tmp}"
GUIDELLM_VENV="${GUIDELLM_VENV:-$SCRATCH/scratch-guidellm}"
AIPERF_VENV="${AIPERF_VENV:-$SCRATCH/scratch-aiperf}"
TOKENIZER_DIR="$SCRATCH/smollm2-135m-instruct-tokenizer"
WORK="$SCRATCH/imports-regen"
TOOL_TIMEOUT="${TOOL_TIMEOUT:-900}"

# The exact versions used (the full transitive pins are in */pip-freeze.txt).
GUIDELLM_VERSION=0.8.1
AIPERF_VERSION=0.13.0
TORCH_VERSION=2.13.0   # CPU wheel on this machine's disk; keeps pip from pulling a CUDA build
GGUF_VERSION=0.19.0    # lets transformers read the tokenizer out of the GGUF file

MODEL_ALIAS=SmolLM2-135M-Instruct

log() { printf '[regenerate] %s\n' "$*" >&2; }

# ---------------------------------------------------------------- scratch venvs
guidellm_ok() {
    "$GUIDELLM_VENV/bin/python" -c "import gguf, torch" \
        && [[ "$("$GUIDELLM_VENV/bin/guidellm" --version)" == *" $GUIDELLM_VERSION" ]]
}
aiperf_ok() {
    [[ "$("$AIPERF_VENV/bin/aiperf" --version)" == "$AIPERF_VERSION" ]]
}
ensure_venv() { # venv-dir freeze-file check-function pip-args...
    local venv="$1" freeze="$2" check="$3"
    shift 3
    if [[ ! -x "$venv/bin/python" ]]; then
        log "creating $venv"
        python3 -m venv "$venv"
    fi
    if ! "$check" >/dev/null 2>&1; then
        log "installing into $venv: $*"
        "$venv/bin/pip" install --quiet -c "$freeze" "$@"
        "$check"
    fi
}
ensure_venv "$GUIDELLM_VENV" "$HERE/guidellm/pip-freeze.txt" guidellm_ok \
    "torch==$TORCH_VERSION" "guidellm==$GUIDELLM_VERSION" "gguf==$GGUF_VERSION"
ensure_venv "$AIPERF_VENV" "$HERE/aiperf/pip-freeze.txt" aiperf_ok "aiperf==$AIPERF_VERSION"
log "guidellm $("$GUIDELLM_VENV/bin/guidellm" --version 2>&1 | tail -1)"
log "aiperf $("$AIPERF_VENV/bin/aiperf" --version 2>&1 | tail -1)"

# ---------------------------------------------------------------- server and model
SERVER="$("$PROJECT_PY" -c 'from workbench.engine.server.discovery import find_server_binary; print(find_server_binary().path)')"
MODEL="$("$PROJECT_PY" -c 'from workbench.engine.models.model_file import default_model_path; print(default_model_path())')"
log "server $SERVER"
log "model  $MODEL"

# ---------------------------------------------------------------- tokenizer from the GGUF
# Both tools want a Hugging Face tokenizer (GuideLLM to size its synthetic prompts, AIPerf
# also to count tokens); the hub is not reachable, so build one from the GGUF's vocabulary.
if [[ ! -f "$TOKENIZER_DIR/tokenizer.json" ]]; then
    log "building tokenizer in $TOKENIZER_DIR"
    rm -rf "$TOKENIZER_DIR.src" && mkdir -p "$TOKENIZER_DIR.src"
    ln -s "$MODEL" "$TOKENIZER_DIR.src/model.gguf"
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$GUIDELLM_VENV/bin/python" - "$TOKENIZER_DIR.src" "$TOKENIZER_DIR" <<'EOF'
import sys
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1], gguf_file="model.gguf")
tok.save_pretrained(sys.argv[2])
EOF
    rm -rf "$TOKENIZER_DIR.src"
fi

# ---------------------------------------------------------------- work dir and inputs
rm -rf "$WORK"
mkdir -p "$WORK"
# A tiny dataset for the runs with an error: 4 prompts, the third too long for a slot's
# context (1024 tokens with -c 2048 -np 2), so llama-server answers it with HTTP 400.
"$PROJECT_PY" - "$WORK" <<'EOF'
import json, sys, pathlib
work = pathlib.Path(sys.argv[1])
long_prompt = " ".join(["the quick brown fox jumps over the lazy dog"] * 150)
prompts = [
    "Explain in one sentence why the sky looks blue during the day.",
    "List three common uses of copper in household electrical wiring.",
    long_prompt,
    "Write a short greeting for a colleague who starts a new job today.",
]
with open(work / "guidellm-prompts.jsonl", "w") as f:
    for p in prompts:
        f.write(json.dumps({"prompt": p, "output_tokens_count": 16}) + "\n")
with open(work / "aiperf-prompts.jsonl", "w") as f:
    for p in prompts:
        f.write(json.dumps({"text": p, "output_length": 16}) + "\n")
EOF

# ---------------------------------------------------------------- start llama-server
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
SERVER_PID=""
stop_server() {
    if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        log "stopping llama-server (pid $SERVER_PID)"
        kill "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# -t 1: the machine has 2 cores; with llama.cpp's 2 threads spinning against the tools' own
# processes, decoding slowed ~100x (1.5 s per token at concurrency 2). One thread leaves the
# other core to the load generator.
SERVER_CMD=("$SERVER" -m "$MODEL" --alias "$MODEL_ALIAS" --host 127.0.0.1 --port "$PORT"
            -np 2 -c 2048 -t 1)
log "starting: ${SERVER_CMD[*]}"
"${SERVER_CMD[@]}" >"$WORK/llama-server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 240); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -20 "$WORK/llama-server.log" >&2; exit 1; }
    sleep 0.5
done
curl -sf "http://127.0.0.1:$PORT/health" >/dev/null
log "llama-server ready on port $PORT"

run_tool() { # log-file command...
    local logfile="$1"
    shift
    log "running: $*"
    if ! (cd "$WORK" && timeout --kill-after=30 "$TOOL_TIMEOUT" "$@") >"$logfile" 2>&1; then
        tail -40 "$logfile" >&2
        log "FAILED: $*"
        exit 1
    fi
}

# ---------------------------------------------------------------- GuideLLM
# Offline: everything it loads is local. One worker process: several, each polling, starved
# llama-server on 2 cores.
export GUIDELLM__MAX_WORKER_PROCESSES=1
GUIDELLM_ENV=(env HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1)
mkdir -p "$WORK/guidellm" "$WORK/guidellm-with-error"
run_tool "$WORK/guidellm.log" "${GUIDELLM_ENV[@]}" "$GUIDELLM_VENV/bin/guidellm" run \
    --backend "kind=openai_http,target=http://127.0.0.1:$PORT,model=$MODEL_ALIAS,request_format=/v1/chat/completions" \
    --tokenizer "kind=huggingface_auto,model=$TOKENIZER_DIR" \
    --data kind=synthetic_text,prompt_tokens=32,output_tokens=24 \
    --profile kind=concurrent --override profile.streams 1,2 \
    --constraint kind=max_requests,count=5 \
    --seed kind=static,value=42 \
    --output "kind=json,path=$WORK/guidellm/benchmarks.json" \
    --output kind=console \
    --disable-progress
run_tool "$WORK/guidellm-with-error.log" "${GUIDELLM_ENV[@]}" "$GUIDELLM_VENV/bin/guidellm" run \
    --backend "kind=openai_http,target=http://127.0.0.1:$PORT,model=$MODEL_ALIAS,request_format=/v1/chat/completions" \
    --tokenizer "kind=huggingface_auto,model=$TOKENIZER_DIR" \
    --data "kind=json_file,path=$WORK/guidellm-prompts.jsonl" \
    --profile kind=synchronous \
    --constraint kind=max_requests,count=4 \
    --seed kind=static,value=42 \
    --output "kind=json,path=$WORK/guidellm-with-error/benchmarks.json" \
    --output kind=console \
    --disable-progress
unset GUIDELLM__MAX_WORKER_PROCESSES

# ---------------------------------------------------------------- AIPerf
# Not offline: aiperf 0.13.0 with HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE set looks a local
# tokenizer path up in the hub cache and fails (HFValidationError); online, it loads a local
# path directly and never touches the network.
AIPERF_ENV=(env -u HF_HUB_OFFLINE -u TRANSFORMERS_OFFLINE)
AIPERF_COMMON=(--model "$MODEL_ALIAS" --url "http://127.0.0.1:$PORT" --endpoint-type chat --streaming
               --tokenizer "$TOKENIZER_DIR" --extra-inputs ignore_eos:true --random-seed 42
               --no-server-metrics --no-gpu-telemetry --ui none)
for c in 1 2; do
    run_tool "$WORK/aiperf-concurrency$c.log" "${AIPERF_ENV[@]}" "$AIPERF_VENV/bin/aiperf" profile \
        "${AIPERF_COMMON[@]}" \
        --isl 32 --isl-stddev 0 --osl 24 --osl-stddev 0 \
        --concurrency "$c" --request-count 5 \
        --artifact-dir "$WORK/aiperf/concurrency$c"
done
run_tool "$WORK/aiperf-with-error.log" "${AIPERF_ENV[@]}" "$AIPERF_VENV/bin/aiperf" profile \
    "${AIPERF_COMMON[@]}" \
    --input-file "$WORK/aiperf-prompts.jsonl" --custom-dataset-type single_turn \
    --concurrency 1 --request-count 4 \
    --artifact-dir "$WORK/aiperf/with-error"

stop_server
SERVER_PID=""

# ---------------------------------------------------------------- copy the results in
mkdir -p "$HERE/guidellm/with-error"
cp "$WORK/guidellm/benchmarks.json" "$HERE/guidellm/benchmarks.json"
cp "$WORK/guidellm-with-error/benchmarks.json" "$HERE/guidellm/with-error/benchmarks.json"
for run in concurrency1 concurrency2 with-error; do
    mkdir -p "$HERE/aiperf/$run"
    cp "$WORK/aiperf/$run/profile_export.jsonl" "$WORK/aiperf/$run/profile_export_aiperf.json" \
        "$HERE/aiperf/$run/"
done
log "done; results copied into $HERE (work files and logs left in $WORK)"
ls -l "$HERE"/guidellm/benchmarks.json "$HERE"/guidellm/with-error/benchmarks.json \
    "$HERE"/aiperf/*/profile_export*
