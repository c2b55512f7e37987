"""What every test directory shares: one real Kubernetes control plane per run (``controlplane``),
started only when a test asks for it (tests/operator, tests/charts).

It lives in kube_controlplane.py (importable by the tests, which a conftest is not). The
runtime's fixtures are in tests/runtime/conftest.py.
"""

from kube_controlplane import controlplane  # noqa: F401
