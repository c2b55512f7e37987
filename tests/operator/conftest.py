"""Operator test fixtures: the real control plane, the operator on a thread of the test process, a namespace per test.

They live in operator_cluster.py (importable by the tests, which a conftest is not).
"""

from operator_cluster import controlplane, namespace, operator  # noqa: F401
