# Tidal: make demo | test | bench | lint
#
# Each target bootstraps .venv on first use (python3 >= 3.11) and installs the
# project with the extras it needs; a stamp file keyed on pyproject.toml keeps
# later runs quick.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
STAMP_DEMO := $(VENV)/.stamp-sandbox
STAMP_DEV := $(VENV)/.stamp-dev
PYTEST_ARGS ?=
# Tests run side by side in this many pytest-xdist workers: most end-to-end
# tests wait on processes rather than compute, so more workers than cores pay.
# TEST_WORKERS=0 runs them one at a time in one process.
TEST_WORKERS ?= 4

.PHONY: demo test test-fast bench bench-profile lint format docs sim-docs frontier clean debs guidellm

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Tidal needs Python 3.11 or newer; set PYTHON=python3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel

$(STAMP_DEMO): pyproject.toml | $(BIN)/python
	$(PIP) install -q -e '.[sandbox]'
	@touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(PIP) install -q -e '.[sandbox,loadtest,dev]'
	@touch $@ $(STAMP_DEMO)

debs:
	@scripts/ensure-debian-packages

demo: $(STAMP_DEMO)
	$(BIN)/tidal demo

# Every tier (unit, integration, end to end): CI runs this. The workers sort the
# tests longest first (tests/conftest.py) and load scheduling hands them out one
# at a time to whichever worker is free (--maxschedchunk 1: by default a worker
# is given a quarter of its share at once, which put every end-to-end test on
# the first worker), so the long tests start at once and the short ones fill in.
test: $(STAMP_DEV) debs
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist load --maxschedchunk 1 $(PYTEST_ARGS)

# Unit tests only: seconds, for the edit-test loop.
test-fast: $(STAMP_DEV)
	$(BIN)/python -m pytest tests/unit -q $(PYTEST_ARGS)

bench: $(STAMP_DEV) debs
	$(BIN)/python -m loadtests.bench

# bench's companion: Python calls, allocations and system calls per relayed request
# (counts, which compare across versions where timings on a busy machine do not).
bench-profile: $(STAMP_DEV) debs
	$(BIN)/python -m loadtests.bench.profile_relay

# GuideLLM (vLLM's benchmark tool) through an activator, from zero, with the
# example model's replicas sampled: `tidal sandbox up` in one terminal, then
# `make guidellm ACTIVATOR=<its activator URL> KUBECONFIG=<its kubeconfig>`.
# GuideLLM needs torch and transformers, which Tidal does not: it gets its own
# environment (GUIDELLM_TORCH: a torch requirement installed first, e.g. a CPU
# build, which saves gigabytes). Its synthetic prompts need a tokenizer: one
# is built offline (loadtests/guidellm/build_tokenizer.py). The report goes to
# out/guidellm.{json,csv,html}, beside locust's out/spike_report.*.
GUIDELLM_VENV := .venv-guidellm
GUIDELLM ?= guidellm==0.8.1
GUIDELLM_TORCH ?=
ACTIVATOR ?= http://127.1.0.3:8080
KUBECONFIG ?= /tmp/tidal-sandbox/kubeconfig
GUIDELLM_ARGS ?= --profile kind=constant,rate=2 --constraint kind=max_duration,seconds=75 \
	--data kind=synthetic_text,prompt_tokens=256,output_tokens=64

$(GUIDELLM_VENV)/bin/guidellm:
	$(PYTHON) -m venv $(GUIDELLM_VENV)
	$(if $(GUIDELLM_TORCH),$(GUIDELLM_VENV)/bin/python -m pip install -q '$(GUIDELLM_TORCH)')
	$(GUIDELLM_VENV)/bin/python -m pip install -q '$(GUIDELLM)'

out/guidellm-tokenizer/tokenizer.json: loadtests/guidellm/build_tokenizer.py | $(GUIDELLM_VENV)/bin/guidellm
	$(GUIDELLM_VENV)/bin/python loadtests/guidellm/build_tokenizer.py out/guidellm-tokenizer

guidellm: $(STAMP_DEV) $(GUIDELLM_VENV)/bin/guidellm out/guidellm-tokenizer/tokenizer.json
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 \
	$(BIN)/python -m loadtests.replicas_sampler --kubeconfig $(KUBECONFIG) --namespace default \
	    --deployment llama --out out/guidellm-replicas.csv -- \
	  $(GUIDELLM_VENV)/bin/guidellm run --backend kind=openai_http,target=$(ACTIVATOR) \
	    $(GUIDELLM_ARGS) --tokenizer kind=huggingface_auto,model=out/guidellm-tokenizer \
	    --output kind=json,path=out/guidellm.json --output kind=csv,path=out/guidellm.csv \
	    --output kind=html,path=out/guidellm.html --disable-console-interactive

lint: $(STAMP_DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# Regenerate docs/annotations.md, docs/metrics.md and docs/statuses.md from the code.
docs: $(STAMP_DEV)
	$(BIN)/python -m scripts.generate_docs

# Re-run the simulations docs/simulator.md and docs/warm-tier.md quote and
# rewrite their generated tables and charts (minutes of CPU).
sim-docs: $(STAMP_DEV)
	$(BIN)/python -m scripts.simulator_tables

# The battery: tidal against every fixed fleet and the baselines on the whole
# grid of workloads and cold starts, one verdict per cell, the worst last
# (hours of CPU; FRONTIER_ARGS="--workload code --cold-start 5s --jobs 2" for a subset).
FRONTIER_ARGS ?=
frontier: $(STAMP_DEV)
	$(BIN)/python -m simulator.battery $(FRONTIER_ARGS)

format: $(STAMP_DEV)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache
