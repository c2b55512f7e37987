"""Every registered op type can run and be differentiated, or says why not.

An op type registered in ``framework.op_registry`` needs a kernel (kernels are written
once against the backend's array module, so one kernel serves numpy and cupy) and
either a gradient rule or an explicit ``NotDifferentiable`` declaration: without one,
``tf.gradients`` through the op fails with "No gradient defined" far from where the
op was added.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import tensorgrid
from tensorgrid.framework import op_registry
from tensorgrid.kernels import registry as kernel_registry


def _registered_op_types() -> list[str]:
    # Some op types are registered by modules that ``import tensorgrid`` does not load
    # (the distributed layer's Send/Recv); import every module so that all are seen,
    # except the generated protos and ``__main__`` (which runs the command line).
    for module in pkgutil.walk_packages(tensorgrid.__path__, "tensorgrid."):
        if not module.name.startswith("tensorgrid.v1") and not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    return op_registry.registered_op_types()


OP_TYPES = _registered_op_types()


def test_the_registry_is_populated() -> None:
    assert {"MatMul", "MaxPoolGrad", "VariableV2", "Placeholder"} <= set(OP_TYPES)


@pytest.mark.parametrize("op_type", OP_TYPES)
def test_op_type_has_a_kernel(op_type: str) -> None:
    assert kernel_registry.has_kernel(op_type), f"op type {op_type!r} is registered but has no kernel"


@pytest.mark.parametrize("op_type", OP_TYPES)
def test_op_type_has_a_gradient_or_is_declared_not_differentiable(op_type: str) -> None:
    try:
        op_registry.gradient_function(op_type)
    except LookupError:
        pytest.fail(
            f"op type {op_type!r} has neither a gradient rule (op_registry.RegisterGradient) "
            "nor a NotDifferentiable declaration"
        )
