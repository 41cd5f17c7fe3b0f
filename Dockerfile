# HiFi-RAG's service (`hifirag serve`, the MMU-RAGent API) as a container image.
#
#   docker build -t hifirag .                          # or: podman build --format docker -t hifirag .
#   docker run -d --name hifirag -p 5010:5010 \
#       -e HIFIRAG_SERVICE_TOKEN="$(openssl rand -hex 32)" \
#       -v /path/to/shared/data:/srv/shared-data:ro -v hifirag-data:/var/lib/hifirag hifirag
#   curl -s localhost:5010/health
#
# Two volumes: the shared data sets, read-only (the offline profile's documentation corpus is built from
# their docs_html on the first start, about a minute, and the refine examples come from mmu_ragent), and
# the data root (warehouse, corpus, blob store, stage cache), owned by the image's user. The same image
# runs the Prefect server and the deployments' worker: see compose.yaml and docs/deployments.md.
#
# Build arguments:
#   BASE            the Debian bookworm image both stages start from (its python3 is 3.11, which the
#                   project requires); a base made with debootstrap works too (docs/deployments.md).
#   TORCH_PIP_ARGS  where pip finds torch 2.13.0's CPU build. PyPI's torch 2.13.0 for Linux is the CUDA
#                   build, gigabytes more, so the image pins 2.13.0+cpu, from PyTorch's CPU index by
#                   default; or from a page that lists the wheel (its other dependencies from PyPI):
#                   --build-arg TORCH_PIP_ARGS="--find-links http://127.0.0.1:8765/" (docs/deployments.md).
# Secret (optional): `--secret id=pip_ca,src=BUNDLE` gives pip a CA bundle for a TLS-intercepting proxy,
# for the build only; nothing of it stays in the image.

ARG BASE=docker.io/library/debian:bookworm-slim

FROM ${BASE} AS build
ARG TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/hifirag/venv
ENV PATH=/opt/hifirag/venv/bin:$PATH
# A current pip (bookworm's is 23.0), then torch, alone and pinned, from the CPU build (the project's
# dependencies would otherwise pull CUDA). hadolint reads TORCH_PIP_ARGS's options as an unpinned package.
# hadolint ignore=DL3013
RUN --mount=type=secret,id=pip_ca \
    if [ -s /run/secrets/pip_ca ]; then export PIP_CERT=/run/secrets/pip_ca; fi \
    && pip install --upgrade 'pip>=25' \
    && pip install ${TORCH_PIP_ARGS} 'torch==2.13.0+cpu' \
    && python -c 'import torch; assert torch.version.cuda is None, torch.__version__'
COPY pyproject.toml README.md /src/
COPY hifirag_core /src/hifirag_core
COPY flows /src/flows
COPY tasks /src/tasks
COPY prompts /src/prompts
COPY warehouse/views /src/warehouse/views
COPY warehouse/examples.sql /src/warehouse/examples.sql
# A wheel install (not editable): the package reads its prompts and SQL from inside itself, and its data
# from the environment variables set below, as any installed copy does (hifirag_core/resources.py).
RUN --mount=type=secret,id=pip_ca \
    if [ -s /run/secrets/pip_ca ]; then export PIP_CERT=/run/secrets/pip_ca; fi \
    && pip install /src \
    && python -c 'import torch; assert torch.version.cuda is None, "a CUDA torch replaced the CPU build"'

FROM ${BASE} AS runtime
ENV DEBIAN_FRONTEND=noninteractive
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --create-home --home-dir /home/hifirag hifirag \
    && mkdir -p /var/lib/hifirag /srv/shared-data /opt/hifirag/models /opt/hifirag/deployments \
    && chown hifirag:hifirag /var/lib/hifirag /opt/hifirag/models
COPY --from=build /opt/hifirag/venv /opt/hifirag/venv
COPY deployments/serve.py /opt/hifirag/deployments/serve.py
# The Prefect server (compose.yaml) writes its UI's files before serving them: into a folder the user owns, as
# the venv is root's (without it the UI answers 404).
ENV PATH=/opt/hifirag/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    HIFIRAG_DATA_ROOT=/var/lib/hifirag \
    HIFIRAG_SHARED_DATA=/srv/shared-data \
    HIFIRAG_MODEL_CACHE=/opt/hifirag/models \
    PREFECT_HOME=/home/hifirag/prefect \
    PREFECT_UI_STATIC_DIRECTORY=/home/hifirag/prefect-ui \
    PREFECT_SERVER_ANALYTICS_ENABLED=false \
    DO_NOT_TRACK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1
USER 10001:10001
WORKDIR /home/hifirag
# MiniLM's ONNX export (the model itself is a registry package, loaded by its local path) and the temporary
# Prefect server's database, made now so that no start pays for them.
RUN hifirag prepare
VOLUME ["/var/lib/hifirag"]
EXPOSE 5010
# /health answers without the token; it says only that the service is alive.
HEALTHCHECK --interval=30s --timeout=5s --start-period=300s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:5010/health', timeout=4)"]
# SIGTERM: no new question; those in flight (at most the deadline, 570 s) are answered and recorded, so
# give `docker stop` a longer grace (-t 630; compose.yaml sets stop_grace_period).
STOPSIGNAL SIGTERM
CMD ["hifirag", "serve", "--host", "0.0.0.0", "--port", "5010", "--profile", "offline"]
