# The tensorgrid runtime image: `tensorgrid server` as entrypoint (a ps or worker task
# configured by TF_CONFIG), the example programs in /app/examples, a non-root user.
#
# CPU (default, on python:3.11-slim):
#   docker build -f docker/runtime.Dockerfile -t tensorgrid:latest .
# CUDA (cupy through the [gpu] extra, on NVIDIA's CUDA 12 runtime image; run with a GPU:
# `docker run --gpus all ...`, or an nvidia.com/gpu limit in Kubernetes; inside, the
# command `tensorgrid devices` lists the GPUs a server would use, or says why there is none):
#   docker build -f docker/runtime.Dockerfile -t tensorgrid:latest-cuda \
#     --build-arg VARIANT=cuda --build-arg BASE_IMAGE=nvidia/cuda:12.6.3-runtime-ubuntu24.04 .
# CUDA 13 (the [gpu-cuda13] extra, cupy-cuda13x; NVIDIA driver >= 580 on the nodes):
#   docker build -f docker/runtime.Dockerfile -t tensorgrid:latest-cuda13 \
#     --build-arg VARIANT=cuda13 --build-arg BASE_IMAGE=nvidia/cuda:13.0.0-runtime-ubuntu24.04 .
#
# Build arguments:
#   BASE_IMAGE  any Debian or Ubuntu image; it gets python3 from apt if it has none
#               (NVIDIA's images have none)
#   VARIANT     cpu | cuda | cuda13: cuda adds the [gpu] extra (cupy-cuda12x), cuda13
#               the [gpu-cuda13] extra (cupy-cuda13x)
#   EXTRAS      extras of the tensorgrid package to install (default: data, the digits
#               data set the examples train on, and tensorboard, which the operator runs
#               a job's TensorBoard with; empty for the smallest image)
#
# Run one task of a cluster (TF_CONFIG names this task and its peers):
#   docker run -e TF_CONFIG='{"cluster": {...}, "task": {"type": "ps", "index": 0}}' tensorgrid:latest
# Run a program instead: docker run --entrypoint python tensorgrid:latest /app/examples/distributed_digits.py
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS base
# python:3.11-slim has Python; NVIDIA's CUDA images and bare Debian/Ubuntu take the
# distribution's python3 (3.11 on bookworm, 3.12 on Ubuntu 24.04).
RUN if ! command -v python3 > /dev/null; then \
      apt-get update \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 \
      && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin; \
    fi
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# Builds tensorgrid's wheel and installs it with its dependencies into /opt/venv,
# which is all the final stage takes from here.
FROM base AS builder
ARG VARIANT=cpu
ARG EXTRAS=data,tensorboard
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# Debian's and Ubuntu's python3 create virtual environments only with python3-venv.
RUN if ! python3 -c 'import ensurepip' 2> /dev/null; then \
      apt-get update \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv; \
    fi \
    && python3 -m venv /opt/venv
# Dependencies first, from the project metadata alone (empty packages stand in for
# the sources, and are removed with setuptools' build/ so the real build cannot
# reuse them), so editing the sources does not download them again.
COPY pyproject.toml README.md /src/
RUN case "$VARIANT" in \
      cpu) extras="$EXTRAS" ;; \
      cuda) extras="${EXTRAS:+$EXTRAS,}gpu" ;; \
      cuda13) extras="${EXTRAS:+$EXTRAS,}gpu-cuda13" ;; \
      *) echo "VARIANT must be cpu, cuda or cuda13, not '$VARIANT'" >&2; exit 2 ;; \
    esac \
    && mkdir -p /src/runtime/tensorgrid /src/operator/tensorgrid_operator \
    && touch /src/runtime/tensorgrid/__init__.py /src/operator/tensorgrid_operator/__init__.py \
    && /opt/venv/bin/pip install "/src${extras:+[$extras]}" \
    && /opt/venv/bin/pip uninstall -y tensorgrid \
    && rm -rf /src/build /src/runtime /src/operator /src/*.egg-info
COPY runtime /src/runtime
COPY operator /src/operator
# Installers are not needed at run time, nor the dependencies' own test suites
# (about 60 MB, mostly scipy's and scikit-learn's).
RUN /opt/venv/bin/pip install --no-deps /src \
    && /opt/venv/bin/pip uninstall -y pip setuptools wheel \
    && find /opt/venv/lib/python3*/site-packages -mindepth 2 -type d -name tests -prune -exec rm -rf {} + \
    && /opt/venv/bin/tensorgrid --help > /dev/null \
    && /opt/venv/bin/python -c 'import tensorgrid as tf; tf.Session, tf.train.Server' \
    && if [ -e /opt/venv/bin/tensorboard ]; then /opt/venv/bin/tensorboard --version_tb > /dev/null; fi \
    && /opt/venv/bin/python -c 'import importlib.util; from tensorgrid import data; importlib.util.find_spec("sklearn") and data.load_digits()'

FROM base AS runtime
# A fixed numeric uid, so Kubernetes can check runAsNonRoot, with a home directory for
# programs that expect one.
RUN groupadd --gid 10001 tensorgrid \
    && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/tensorgrid --shell /usr/sbin/nologin tensorgrid
COPY --from=builder /opt/venv /opt/venv
COPY examples /app/examples
COPY docker/runtime-healthcheck.py /usr/local/lib/tensorgrid/healthcheck.py
# cupy creates its kernel cache (default ~/.cupy) as soon as it is imported: /tmp stays
# writable under a read-only root file system (mount an emptyDir there in Kubernetes).
ENV PATH=/opt/venv/bin:$PATH \
    HOME=/home/tensorgrid \
    CUPY_CACHE_DIR=/tmp/cupy-kernel-cache
WORKDIR /app
USER 10001:10001
# 2222: the task's gRPC server (TF_CONFIG); 9090: Prometheus metrics when TENSORGRID_METRICS_PORT is set.
EXPOSE 2222 9090
# Healthy while this task's server accepts connections on its TF_CONFIG port (always
# healthy without TF_CONFIG). Kubernetes ignores it; the operator's pods need no probe.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "/usr/local/lib/tensorgrid/healthcheck.py"]
# Last, so that new values (the build time changes every build) invalidate no cached layer.
# Set by hack/build-images.sh from git; plain builds keep the defaults.
ARG VARIANT=cpu
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="tensorgrid" \
      org.opencontainers.image.description="TensorFlow 1.x-style parameter-server training runtime (tensorgrid server), ${VARIANT}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      io.tensorgrid.variant="${VARIANT}"
ENTRYPOINT ["tensorgrid"]
CMD ["server"]
