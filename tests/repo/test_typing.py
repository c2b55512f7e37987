"""Both packages type-check with mypy --strict (configured in pyproject.toml)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.timeout(900)
def test_mypy_strict_passes():
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]


def test_every_kernel_is_typed_against_the_kernel_contract():
    """mypy checks a kernel only as far as its parameters are typed: ``k`` and ``step`` must be
    the contexts of kernels/context.py, never ``Any``."""
    import inspect
    import typing

    from tensorgrid.kernels import context, registry

    untyped = []
    for op_type, kernel in sorted(registry.all_kernels().items()):
        hints = typing.get_type_hints(kernel)
        k, step = list(inspect.signature(kernel).parameters)[:2]
        if (hints.get(k), hints.get(step)) != (context.KernelContext, context.StepContext):
            untyped.append(op_type)
    assert not untyped, f"kernels whose k and step are not typed as kernels/context.py's contexts: {untyped}"
