"""Operator test fixtures: the operator on a thread of the test process, a namespace per test.

The tests are laid out like the operator: ``reconcile/`` (the pure decisions of a pass, as
tables), ``resources/`` (the objects a job owns), ``controlplane/`` (the operator against a
real API server, with the controller's few tests that need none) and ``integrations/``
(Kueue, gang schedulers, cert-manager). What a test needs is said by its markers, not its
name: ``controlplane`` (the run's kube-apiserver), ``kwok`` (simulated nodes),
``third_party`` (scheduler-plugins', cert-manager's or Kueue's controllers).

The harness modules (the operator on a thread, the simulated cluster of the pure tests, KWOK,
the gang scheduler, Kueue and cert-manager's controllers, the CRDs they need) are in
``support/``, put on ``sys.path`` here so that every test imports them by name, as it imports
kube_controlplane.py (tests/conftest.py). The fixtures live in support/operator_cluster.py
(importable by the tests, which a conftest is not); the control plane they run against is the
run's one.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "support"))

from operator_cluster import namespace, operator  # noqa: F401
