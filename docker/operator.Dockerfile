# The tensorgrid operator image: `tensorgrid-operator` (kopf) as a non-root user, with
# only the operator's dependencies (kopf, kubernetes, prometheus-client).
#
#   docker build -f docker/operator.Dockerfile -t tensorgrid-operator:latest .
#   docker run --network host -v $HOME/.kube/config:/kubeconfig:ro \
#     tensorgrid-operator:latest --kubeconfig /kubeconfig --standalone
# In a cluster it runs with its service account: install charts/tensorgrid-operator.
#
# Build arguments:
#   BASE_IMAGE  a Debian or Ubuntu image with python3 >= 3.11, or without Python (then
#               python3 comes from apt)
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS base
RUN if ! command -v python3 > /dev/null; then \
      apt-get update \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 \
      && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin; \
    fi
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# Builds tensorgrid's wheel and installs it into /opt/venv without the runtime's
# dependencies; the final stage takes only /opt/venv.
FROM base AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN if ! python3 -c 'import ensurepip' 2> /dev/null; then \
      apt-get update \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv; \
    fi \
    && python3 -m venv /opt/venv
# Dependencies first (from the project metadata alone), so editing the sources does
# not download them again.
COPY pyproject.toml README.md /src/
COPY docker/operator-requirements.py /src/docker/
RUN python3 /src/docker/operator-requirements.py /src/pyproject.toml > /src/operator-requirements.txt \
    && /opt/venv/bin/pip install -r /src/operator-requirements.txt
COPY runtime /src/runtime
COPY operator /src/operator
# The distribution also carries the runtime package (about 1 MB, unused here: its
# dependencies are not installed, so its `tensorgrid` command does not work in this image).
# Also dropped: installers, and the kubernetes client's asyncio copy (kubernetes.aio,
# about 70 MB), which nothing here imports (the operator uses the synchronous
# client, kopf its own aiohttp calls).
RUN /opt/venv/bin/pip install --no-deps /src \
    && /opt/venv/bin/pip uninstall -y pip setuptools wheel \
    && rm -rf /opt/venv/lib/python3*/site-packages/kubernetes/aio \
    && find /opt/venv/lib/python3*/site-packages -mindepth 2 -type d -name tests -prune -exec rm -rf {} + \
    && /opt/venv/bin/python -c 'import kubernetes.client, kubernetes.config, tensorgrid_operator.controller.registrations'

FROM base AS operator
# A fixed numeric uid, so Kubernetes can check runAsNonRoot.
RUN groupadd --gid 10001 tensorgrid \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin tensorgrid
COPY --from=builder /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    HOME=/tmp
USER 10001:10001
# 8080: Prometheus /metrics; 8081: kopf's liveness endpoint /healthz (--metrics-port, --liveness-port).
EXPOSE 8080 8081
# kopf answers /healthz once it runs and its last activity was recent. With another
# --liveness-port, override this (Kubernetes uses the chart's probes instead).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8081/healthz', timeout=4)"]
# Last, so that new values (the build time changes every build) invalidate no cached layer.
# Set by hack/build-images.sh from git; plain builds keep the defaults.
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="tensorgrid-operator" \
      org.opencontainers.image.description="Kubernetes operator for tensorgrid TrainingJobs (tensorgrid.io/v1)" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"
ENTRYPOINT ["tensorgrid-operator"]
