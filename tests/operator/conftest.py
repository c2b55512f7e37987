"""Operator test fixtures: the operator on a thread of the test process, a namespace per test.

They live in operator_cluster.py (importable by the tests, which a conftest is not); the control
plane they run against is the run's one (tests/conftest.py, kube_controlplane.py).
"""

from operator_cluster import namespace, operator  # noqa: F401
