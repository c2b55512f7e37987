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

.PHONY: run test venv lint clean

# Kubernetes 1.34 binaries (built from the Go module proxy, cached outside the repo) and
# `make controlplane` / `make controlplane-down` for a local control plane.
include Makefile.controlplane.mk

$(VENV)/.installed-$(EXTRAS): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$(EXTRAS)]'
	@rm -f $(VENV)/.installed-*
	@touch $@

venv: $(VENV)/.installed-$(EXTRAS)

run: venv
	$(VENV)/bin/tensorgrid local --ps 1 --workers 2 -- $(PY) examples/distributed_digits.py

# The operator's tests start a real etcd + kube-apiserver + controller-manager + scheduler.
test: venv kubernetes-binaries
	$(PY) -m pytest $(PYTEST_ARGS)

lint: venv
	$(PY) -m mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
