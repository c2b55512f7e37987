# tensorgrid: the two commands a new user types are `make run` and `make test`.
# Everything they need (a virtualenv with the package and its test extras) is set up here.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# TensorFlow is the oracle of the model tests; set ORACLE=0 to skip installing it (outside CI).
ORACLE ?= 1
comma := ,
EXTRAS := dev$(if $(filter 1,$(ORACLE)),$(comma)oracle)
PYTEST_ARGS ?=

.PHONY: estimator-oracle run test test-fast test-runtime test-strict-gpu fuzz venv lint clean bench bench-operator tools images images-smoke images-push e2e e2e-up e2e-down

# Kubernetes 1.34 binaries (built from the Go module proxy, cached outside the repo) and
# `make controlplane` / `make controlplane-down` for a local control plane.
include Makefile.controlplane.mk

# The test and lint tools (and, unless ORACLE=0, TensorFlow): `make test` and `make lint`.
# Their extras include the data extra, so the stamp of `make run`'s lighter install is renewed too.
$(VENV)/.installed-$(EXTRAS): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$(EXTRAS)]'
	$(if $(filter 1,$(ORACLE)),$(PY) -m pip install --quiet --no-deps 'tf-keras==2.21.*')
	@rm -f $(VENV)/.installed-*
	@touch $@ $(VENV)/.installed-run

venv: $(VENV)/.installed-$(EXTRAS)

# The oracle of tf.estimator (tests marked estimator_oracle): TensorFlow removed Estimators in 2.16,
# so TensorFlow 2.15.1 and tensorflow-estimator 2.15.0 (the estimator-oracle extra) live in a
# virtualenv of their own, on Python 3.11, which the tests call as a subprocess
# (tests/runtime/support/estimator_oracle.py). Off with ORACLE=0, as the main oracle.
ESTIMATOR_ORACLE_PYTHON ?= python3.11
ESTIMATOR_ORACLE_VENV ?= .venv-estimator-oracle
ESTIMATOR_ORACLE_PACKAGES := $(shell sed -n 's/^estimator-oracle = \[\(.*\)\]$$/\1/p' pyproject.toml | tr -d '",')
$(ESTIMATOR_ORACLE_VENV)/.installed: pyproject.toml
	@test -x $(ESTIMATOR_ORACLE_VENV)/bin/python || $(ESTIMATOR_ORACLE_PYTHON) -m venv $(ESTIMATOR_ORACLE_VENV)
	$(ESTIMATOR_ORACLE_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(ESTIMATOR_ORACLE_VENV)/bin/python -m pip install --quiet $(ESTIMATOR_ORACLE_PACKAGES)
	@touch $@

estimator-oracle: $(if $(filter 1,$(ORACLE)),$(ESTIMATOR_ORACLE_VENV)/.installed)

# `make run` needs the package and the digits data set (the data extra: scikit-learn), none of
# the test tools: on a fresh machine it installs about a tenth of what `make test` does.
$(VENV)/.installed-run: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[data]'
	@touch $@

run: $(VENV)/.installed-run
	$(VENV)/bin/tensorgrid local --ps 1 --workers 2 -- $(PY) examples/distributed_digits.py

# Every test. The operator's and the chart's tests start a real etcd + kube-apiserver +
# controller-manager + scheduler (binaries built from source) and need helm (hack/tools.sh).
# pytest markers (pyproject.toml, docs/architecture.md) say what a test needs beyond the
# virtualenv: controlplane, kwok, third_party (Kubernetes), cluster (e2e/), oracle (TensorFlow),
# gpu_node (run a second time as on a GPU node); select with PYTEST_ARGS='-m "..."'.
# Two runs: the tests that share the control plane first, then the rest, so that the control
# plane (and the operator the tests leave running on it) stops with its tests instead of taking
# about a third of a 2-core machine through the runtime's half hour of tests.
KUBERNETES_TESTS := tests/operator tests/charts
test: venv estimator-oracle kubernetes-binaries tools
	@status=0; for selection in "$(KUBERNETES_TESTS)" "$(addprefix --ignore=,$(KUBERNETES_TESTS))"; do \
	  $(PY) -m pytest $$selection $(PYTEST_ARGS) || { code=$$?; [ $$code -eq 5 ] || status=$$code; }; \
	done; exit $$status  # 5: a selection (-m ...) left nothing in one of the runs

# The fast loop: every test that needs no Kubernetes (the kwok and third-party tests run on the
# control plane too, so they are left out as well): the runtime's tests, the repository's checks
# (tests/repo), the operator's tests that need no cluster, the images' static checks. Only the virtualenv.
test-fast: venv estimator-oracle
	$(PY) -m pytest -m "not controlplane and not kwok and not third_party" $(PYTEST_ARGS)

# The runtime's tests alone (tests/runtime/, a folder per layer): only the virtualenv, no
# Kubernetes binaries and no helm. The repository's checks (tests/repo/: ruff, mypy, import
# contracts, line budget, fresh protos) are not among them: `make test-fast` and `make test` run them.
RUNTIME_TESTS := tests/runtime
test-runtime: venv estimator-oracle
	$(PY) -m pytest $(RUNTIME_TESTS) $(PYTEST_ARGS)

# The runtime's tests as on a GPU node, without a GPU: every task process and the test process
# see one GPU, the strict cupy stand-in (tests/runtime/support/strict_cupy.py), whose arrays
# refuse implicit conversion to numpy as cupy's do. `make test` already runs the tests marked
# gpu_node this way (their [strict-gpu] ids); this runs every runtime test so.
test-strict-gpu: venv
	TENSORGRID_FAKE_GPU=strict $(PY) -m pytest $(RUNTIME_TESTS) $(PYTEST_ARGS)

# Coverage-guided fuzzing (atheris) of every parser of bytes from the network
# (tests/runtime/support/fuzz/targets.py), FUZZ_SECONDS per target; `make test` runs each for a bounded
# number of inputs (tests/runtime/distributed/test_fuzz.py). A finding prints the input and its traceback.
FUZZ_SECONDS ?= 300
FUZZ_TARGETS := header_bundle frames data_channel servicer
fuzz: venv
	@for target in $(FUZZ_TARGETS); do \
	  $(PY) tests/runtime/support/fuzz/run.py $$target -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done

# helm for the chart tests, kwok for the operator's tests on simulated nodes, scheduler-plugins
# for its gang scheduling tests, cert-manager's controllers for its cert-manager mode, Kueue's
# manager for queued jobs (go install / go build, cached in ~/.cache/tensorgrid/bin); Debian's
# chromium and prometheus (promtool) for the TensorBoard browser test and the dashboard queries' test.
tools:
	hack/tools.sh --with-kwok --with-gang-scheduler --with-cert-manager --with-kueue

# Container images of docker/ (docs/images.md): installs and starts Docker's engine when
# needed (hack/docker-engine.sh) and builds FROM the standard bases (python:3.11-slim, NVIDIA's
# CUDA image), pulled from Docker Hub. OFFLINE_BASES=1 (or TENSORGRID_OFFLINE_BASES=1) builds
# FROM local Debian bases made with debootstrap instead (hack/base-images.sh), for a machine
# that reaches no registry; CI sets it.
OFFLINE_BASES ?= $(TENSORGRID_OFFLINE_BASES)
images:
	TENSORGRID_OFFLINE_BASES=$(OFFLINE_BASES) hack/build-images.sh

# Builds the images and pushes them to REGISTRY (a registry host with an optional path, the
# chart's image.registry): multi-arch (PLATFORMS, default linux/amd64,linux/arm64) with docker
# buildx where it is available, else `make images` then docker tag and push (hack/push-images.sh,
# docs/images.md). `docker login` first.
REGISTRY ?=
images-push:
	@test -n "$(REGISTRY)" || { echo "make images-push needs REGISTRY=<registry>, e.g. REGISTRY=registry.example.com/ml" >&2; exit 2; }
	REGISTRY=$(REGISTRY) TENSORGRID_OFFLINE_BASES=$(OFFLINE_BASES) hack/push-images.sh

# Runs the images: a 1 PS + 1 worker training over a Docker network, the operator
# image against a local control plane.
images-smoke: images kubernetes-binaries
	TENSORGRID_OFFLINE_BASES=$(OFFLINE_BASES) hack/smoke-images.sh

# The end-to-end suite (e2e/) on a kind cluster: `make e2e` creates the cluster (kind v0.30,
# Kubernetes 1.34 on a node image assembled here, e2e/node-image/), builds and loads the images,
# `helm install`s the chart, runs the suite and deletes the cluster. `make e2e-up` leaves the
# cluster running (kubeconfig: .cache/e2e/kubeconfig); `make e2e-down` deletes it.
E2E_ARGS ?=
e2e: venv
	@e2e/cluster.sh up || { e2e/cluster.sh down; exit 1; }
	@status=0; $(PY) -m pytest e2e -p no:cacheprovider --timeout=1800 $(E2E_ARGS) || status=$$?; \
	  e2e/cluster.sh down; exit $$status

e2e-up: venv
	e2e/cluster.sh up

e2e-down:
	e2e/cluster.sh down

# Benchmarks of the runtime against TensorFlow 2.21 (the oracle extra, installed here only
# for them and the tests): a table each, JSON in bench/results/. About 25 minutes on 2 cores.
bench:
	$(MAKE) venv ORACLE=1
	$(PY) bench/transport.py
	$(PY) bench/latency.py
	$(PY) bench/training.py

# The operator's scale benchmark (100 TrainingJobs on a real control plane).
bench-operator: venv kubernetes-binaries tools
	$(PY) bench/operator_scale.py

# Static checks: ruff (rules in pyproject.toml), mypy --strict, the import-linter contracts.
lint: venv
	$(VENV)/bin/ruff check .
	$(PY) -m mypy
	PYTHONPATH=runtime:operator $(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) $(ESTIMATOR_ORACLE_VENV) .pytest_cache .mypy_cache
