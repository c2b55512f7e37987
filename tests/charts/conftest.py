"""Chart test fixtures; they live in chart_support.py (importable by the tests, which a conftest is not)."""

from chart_support import controlplane  # noqa: F401
