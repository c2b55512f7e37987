"""Fused optimizer updates: one op per variable and step that updates it (and its slots) in place.

Each op takes the variable and its slot variables by reference (so the kernel writes
their buffers directly, on the device that holds them: the PS in distributed
training), the hyper-parameters as scalars and the gradient as a value, and outputs
the variable reference, as TF's ``Apply*`` ops do. ``use_locking`` makes the update
atomic with respect to other locking updates of the same variables.

The ``SparseApply*`` ops take a gradient as the rows ``grad`` at ``indices`` (an
IndexedSlices) and move only those rows of the variable and its slots; repeated
indices are summed first, as TF's optimizers do before applying (TF composes Adam's
sparse step from several ops: here it is one op, with the same arithmetic).
"""

from __future__ import annotations

from typing import Any, Optional

from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.ops import op_util

op_registry.register_op("ApplyGradientDescent", stateful=True, ref_inputs=(0,), ref_outputs=(0,))
op_registry.register_op("ApplyMomentum", stateful=True, ref_inputs=(0, 1), ref_outputs=(0,))
op_registry.register_op("ApplyAdagrad", stateful=True, ref_inputs=(0, 1), ref_outputs=(0,))
op_registry.register_op("ApplyAdam", stateful=True, ref_inputs=(0, 1, 2), ref_outputs=(0,))
op_registry.register_op("SparseApplyMomentum", stateful=True, ref_inputs=(0, 1), ref_outputs=(0,))
op_registry.register_op("SparseApplyAdagrad", stateful=True, ref_inputs=(0, 1), ref_outputs=(0,))
op_registry.register_op("SparseApplyAdam", stateful=True, ref_inputs=(0, 1, 2), ref_outputs=(0,))
op_registry.register_op("ApplyRMSProp", stateful=True, ref_inputs=(0, 1, 2), ref_outputs=(0,))
op_registry.register_op("ApplyCenteredRMSProp", stateful=True, ref_inputs=(0, 1, 2, 3), ref_outputs=(0,))
op_registry.register_op("ApplyAdadelta", stateful=True, ref_inputs=(0, 1, 2), ref_outputs=(0,))
op_registry.register_op("ApplyProximalGradientDescent", stateful=True, ref_inputs=(0,), ref_outputs=(0,))
op_registry.register_op("SparseApplyRMSProp", stateful=True, ref_inputs=(0, 1, 2), ref_outputs=(0,))
op_registry.register_op("SparseApplyCenteredRMSProp", stateful=True, ref_inputs=(0, 1, 2, 3), ref_outputs=(0,))
op_registry.register_op("SparseApplyAdadelta", stateful=True, ref_inputs=(0, 1, 2), ref_outputs=(0,))
op_registry.register_op("SparseApplyProximalGradientDescent", stateful=True, ref_inputs=(0,), ref_outputs=(0,))
_FTRL_AND_PROXIMAL_ADAGRAD = {"ApplyFtrl": (0, 1, 2), "ApplyFtrlV2": (0, 1, 2), "SparseApplyFtrl": (0, 1, 2),
                              "SparseApplyFtrlV2": (0, 1, 2), "ApplyProximalAdagrad": (0, 1),
                              "SparseApplyProximalAdagrad": (0, 1)}
for _op_type, _refs in _FTRL_AND_PROXIMAL_ADAGRAD.items():
    op_registry.register_op(_op_type, stateful=True, ref_inputs=_refs, ref_outputs=(0,))
for _op_type in ("ApplyGradientDescent", "ApplyMomentum", "ApplyAdagrad", "ApplyAdam", "SparseApplyMomentum",
                 "SparseApplyAdagrad", "SparseApplyAdam", "ApplyRMSProp", "ApplyCenteredRMSProp", "ApplyAdadelta",
                 "ApplyProximalGradientDescent", "SparseApplyRMSProp", "SparseApplyCenteredRMSProp",
                 "SparseApplyAdadelta", "SparseApplyProximalGradientDescent", *_FTRL_AND_PROXIMAL_ADAGRAD):
    op_registry.NotDifferentiable(_op_type)


def _ref(value: Any, op_type: str, role: str) -> graph_lib.Tensor:
    as_ref = getattr(value, "_ref", None)
    t = as_ref() if callable(as_ref) else value
    if not isinstance(t, graph_lib.Tensor) or not t.dtype.is_ref_dtype:
        raise TypeError(f"{op_type}: {role} must be a variable (a reference tensor), got {value!r}")
    return t


def _build(op_type: str, refs: list[tuple[str, Any]], scalars: list[tuple[str, Any]], grad: Any,
           grad_position: int, use_locking: bool, name: Optional[str],
           extra_attrs: Optional[dict[str, Any]] = None, indices: Any = None) -> graph_lib.Tensor:
    """Checks dtypes and shapes at graph construction, then adds the op colocated with the variable.

    With ``indices`` the gradient is rows of the variable, and the indices follow it.
    """
    ref_tensors = [_ref(value, op_type, role) for role, value in refs]
    var = ref_tensors[0]
    dtype = var.dtype.base_dtype
    for (role, _), t in zip(refs[1:], ref_tensors[1:]):
        if t.dtype.base_dtype != dtype:
            raise TypeError(f"{op_type}: {role} {t.op.name} has dtype {t.dtype.base_dtype.name}, var {var.op.name} has {dtype.name}")
        if not t.shape.is_compatible_with(var.shape):
            raise ValueError(f"{op_type}: var {var.op.name} {var.shape} and {role} {t.op.name} {t.shape} must have the same shape")
    scalar_tensors = []
    for role, value in scalars:
        t = op_util.to_tensor(value, dtype=dtype)
        if t.shape.ndims not in (None, 0):
            raise ValueError(f"{op_type}: {role} must be a scalar, got {t.name} with shape {t.shape}")
        scalar_tensors.append(t)
    g = op_util.to_tensor(grad, dtype=dtype)
    if indices is None and not g.shape.is_compatible_with(var.shape):
        raise ValueError(f"{op_type}: var {var.op.name} {var.shape} and grad {g.name} {g.shape} must have the same shape")
    inputs: list[graph_lib.Tensor] = ref_tensors + scalar_tensors
    inputs.insert(grad_position, g)
    if indices is not None:
        inputs.insert(grad_position + 1, _check_rows(op_type, var, g, indices))
    attrs = {"use_locking": bool(use_locking)}
    attrs.update(extra_attrs or {})
    with var.graph.colocate_with(var.op):
        return op_util.make_tensor(op_type, inputs, var.dtype, var.shape, name or op_type, attrs)


def _check_rows(op_type: str, var: graph_lib.Tensor, grad: graph_lib.Tensor, indices: Any) -> graph_lib.Tensor:
    """The indices of a sparse update, checked against the variable and the gradient rows."""
    i = op_util.to_tensor(indices, dtype=None if op_util.is_tensor_like(indices) else "int32")
    op_util.check_dtype_in(op_type, i, op_util.INDICES)
    if i.shape.ndims not in (None, 1):
        raise ValueError(f"{op_type}: indices {i.name} must be a vector, got shape {i.shape}")
    if var.shape.ndims == 0:
        raise ValueError(f"{op_type}: var {var.op.name} must be at least 1-dimensional, got a scalar")
    if var.shape.ndims is not None and grad.shape.ndims is not None:
        rows = i.shape.with_rank(1).concatenate(var.shape[1:])
        if not grad.shape.is_compatible_with(rows):
            raise ValueError(
                f"{op_type}: grad {grad.name} with shape {grad.shape} must hold one row of var {var.op.name} "
                f"{var.shape} per index of {i.name} {i.shape}: shape {rows}"
            )
    return i


def apply_gradient_descent(var: Any, alpha: Any, delta: Any, use_locking: bool = False,
                           name: Optional[str] = None) -> graph_lib.Tensor:
    """``var -= alpha * delta``."""
    return _build("ApplyGradientDescent", [("var", var)], [("alpha", alpha)], delta, 2, use_locking, name)


def apply_momentum(var: Any, accum: Any, lr: Any, grad: Any, momentum: Any, use_locking: bool = False,
                   name: Optional[str] = None, use_nesterov: bool = False) -> graph_lib.Tensor:
    """``accum = accum * momentum + grad``; ``var -= lr * accum``.

    With Nesterov momentum: ``var -= lr * grad + lr * momentum * accum``.
    """
    return _build("ApplyMomentum", [("var", var), ("accum", accum)], [("lr", lr), ("momentum", momentum)], grad,
                  3, use_locking, name, {"use_nesterov": bool(use_nesterov)})


def apply_adagrad(var: Any, accum: Any, lr: Any, grad: Any, use_locking: bool = False, name: Optional[str] = None,
                  update_slots: bool = True) -> graph_lib.Tensor:
    """``accum += grad ** 2``; ``var -= lr * grad / sqrt(accum)``."""
    return _build("ApplyAdagrad", [("var", var), ("accum", accum)], [("lr", lr)], grad, 3, use_locking, name,
                  {"update_slots": bool(update_slots)})


def apply_adam(var: Any, m: Any, v: Any, beta1_power: Any, beta2_power: Any, lr: Any, beta1: Any, beta2: Any,
               epsilon: Any, grad: Any, use_locking: bool = False, use_nesterov: bool = False,
               name: Optional[str] = None) -> graph_lib.Tensor:
    """Adam with bias correction folded into the step size.

    ``lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)``;
    ``m = beta1 * m + (1 - beta1) * grad``; ``v = beta2 * v + (1 - beta2) * grad ** 2``;
    ``var -= lr_t * m / (sqrt(v) + epsilon)``.
    """
    scalars = [("beta1_power", beta1_power), ("beta2_power", beta2_power), ("lr", lr), ("beta1", beta1),
               ("beta2", beta2), ("epsilon", epsilon)]
    return _build("ApplyAdam", [("var", var), ("m", m), ("v", v)], scalars, grad, 9, use_locking, name,
                  {"use_nesterov": bool(use_nesterov)})


def sparse_apply_momentum(var: Any, accum: Any, lr: Any, grad: Any, indices: Any, momentum: Any,
                          use_locking: bool = False, name: Optional[str] = None,
                          use_nesterov: bool = False) -> graph_lib.Tensor:
    """``apply_momentum`` on the rows ``indices`` only: other rows of var and accum do not move."""
    return _build("SparseApplyMomentum", [("var", var), ("accum", accum)], [("lr", lr), ("momentum", momentum)],
                  grad, 3, use_locking, name, {"use_nesterov": bool(use_nesterov)}, indices=indices)


def sparse_apply_adagrad(var: Any, accum: Any, lr: Any, grad: Any, indices: Any, use_locking: bool = False,
                         name: Optional[str] = None, update_slots: bool = True) -> graph_lib.Tensor:
    """``apply_adagrad`` on the rows ``indices`` only."""
    return _build("SparseApplyAdagrad", [("var", var), ("accum", accum)], [("lr", lr)], grad, 3, use_locking,
                  name, {"update_slots": bool(update_slots)}, indices=indices)


def sparse_apply_adam(var: Any, m: Any, v: Any, beta1_power: Any, beta2_power: Any, lr: Any, beta1: Any,
                      beta2: Any, epsilon: Any, grad: Any, indices: Any, use_locking: bool = False,
                      name: Optional[str] = None) -> graph_lib.Tensor:
    """TF1's sparse Adam step (``AdamOptimizer._apply_sparse``), fused.

    Every row of ``m`` and ``v`` decays (``m *= beta1``, ``v *= beta2``), the gradient rows
    are added at ``indices`` (``m[i] += (1 - beta1) * g``, ``v[i] += (1 - beta2) * g ** 2``),
    and every row of ``var`` moves by ``lr_t * m / (sqrt(v) + epsilon)``.
    """
    scalars = [("beta1_power", beta1_power), ("beta2_power", beta2_power), ("lr", lr), ("beta1", beta1),
               ("beta2", beta2), ("epsilon", epsilon)]
    return _build("SparseApplyAdam", [("var", var), ("m", m), ("v", v)], scalars, grad, 9, use_locking, name,
                  indices=indices)


def apply_rms_prop(var: Any, ms: Any, mom: Any, lr: Any, rho: Any, momentum: Any, epsilon: Any, grad: Any,
                   use_locking: bool = False, name: Optional[str] = None) -> graph_lib.Tensor:
    """``ms += (grad ** 2 - ms) * (1 - rho)``; ``mom = mom * momentum + lr * grad / sqrt(ms + epsilon)``;
    ``var -= mom``."""
    scalars = [("lr", lr), ("rho", rho), ("momentum", momentum), ("epsilon", epsilon)]
    return _build("ApplyRMSProp", [("var", var), ("ms", ms), ("mom", mom)], scalars, grad, 7, use_locking, name)


def apply_centered_rms_prop(var: Any, mg: Any, ms: Any, mom: Any, lr: Any, rho: Any, momentum: Any, epsilon: Any,
                            grad: Any, use_locking: bool = False, name: Optional[str] = None) -> graph_lib.Tensor:
    """RMSProp normalized by the variance: ``mg += (grad - mg) * (1 - rho)``, and the step divides by
    ``sqrt(ms - mg ** 2 + epsilon)``."""
    scalars = [("lr", lr), ("rho", rho), ("momentum", momentum), ("epsilon", epsilon)]
    return _build("ApplyCenteredRMSProp", [("var", var), ("mg", mg), ("ms", ms), ("mom", mom)], scalars, grad, 8,
                  use_locking, name)


def apply_adadelta(var: Any, accum: Any, accum_update: Any, lr: Any, rho: Any, epsilon: Any, grad: Any,
                   use_locking: bool = False, name: Optional[str] = None) -> graph_lib.Tensor:
    """``accum = rho * accum + (1 - rho) * grad ** 2``;
    ``update = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad``; ``var -= lr * update``;
    ``accum_update = rho * accum_update + (1 - rho) * update ** 2``."""
    return _build("ApplyAdadelta", [("var", var), ("accum", accum), ("accum_update", accum_update)],
                  [("lr", lr), ("rho", rho), ("epsilon", epsilon)], grad, 6, use_locking, name)


def apply_proximal_gradient_descent(var: Any, alpha: Any, l1: Any, l2: Any, delta: Any, use_locking: bool = False,
                                    name: Optional[str] = None) -> graph_lib.Tensor:
    """``prox = var - alpha * delta``; ``var = sign(prox) * max(|prox| - alpha * l1, 0) / (1 + alpha * l2)``."""
    return _build("ApplyProximalGradientDescent", [("var", var)], [("alpha", alpha), ("l1", l1), ("l2", l2)], delta,
                  4, use_locking, name)


def sparse_apply_rms_prop(var: Any, ms: Any, mom: Any, lr: Any, rho: Any, momentum: Any, epsilon: Any, grad: Any,
                          indices: Any, use_locking: bool = False, name: Optional[str] = None) -> graph_lib.Tensor:
    """``apply_rms_prop`` on the rows ``indices`` only."""
    scalars = [("lr", lr), ("rho", rho), ("momentum", momentum), ("epsilon", epsilon)]
    return _build("SparseApplyRMSProp", [("var", var), ("ms", ms), ("mom", mom)], scalars, grad, 7, use_locking, name,
                  indices=indices)


def sparse_apply_centered_rms_prop(var: Any, mg: Any, ms: Any, mom: Any, lr: Any, rho: Any, momentum: Any,
                                   epsilon: Any, grad: Any, indices: Any, use_locking: bool = False,
                                   name: Optional[str] = None) -> graph_lib.Tensor:
    """``apply_centered_rms_prop`` on the rows ``indices`` only."""
    scalars = [("lr", lr), ("rho", rho), ("momentum", momentum), ("epsilon", epsilon)]
    return _build("SparseApplyCenteredRMSProp", [("var", var), ("mg", mg), ("ms", ms), ("mom", mom)], scalars, grad,
                  8, use_locking, name, indices=indices)


def sparse_apply_adadelta(var: Any, accum: Any, accum_update: Any, lr: Any, rho: Any, epsilon: Any, grad: Any,
                          indices: Any, use_locking: bool = False, name: Optional[str] = None) -> graph_lib.Tensor:
    """``apply_adadelta`` on the rows ``indices`` only."""
    return _build("SparseApplyAdadelta", [("var", var), ("accum", accum), ("accum_update", accum_update)],
                  [("lr", lr), ("rho", rho), ("epsilon", epsilon)], grad, 6, use_locking, name, indices=indices)


def sparse_apply_proximal_gradient_descent(var: Any, alpha: Any, l1: Any, l2: Any, grad: Any, indices: Any,
                                           use_locking: bool = False, name: Optional[str] = None) -> graph_lib.Tensor:
    """``apply_proximal_gradient_descent`` on the rows ``indices`` only."""
    return _build("SparseApplyProximalGradientDescent", [("var", var)], [("alpha", alpha), ("l1", l1), ("l2", l2)],
                  grad, 4, use_locking, name, indices=indices)


def apply_ftrl(var: Any, accum: Any, linear: Any, grad: Any, lr: Any, l1: Any, l2: Any, lr_power: Any,
               use_locking: bool = False, name: Optional[str] = None) -> graph_lib.Tensor:
    """FTRL-proximal (McMahan et al., 2013), TF's ``ApplyFtrl``.

    ``new_accum = accum + grad ** 2``;
    ``linear += grad - (new_accum ** -lr_power - accum ** -lr_power) / lr * var``;
    ``var = (sign(linear) * l1 - linear) / (new_accum ** -lr_power / lr + 2 * l2)`` where ``|linear| > l1``,
    else 0; ``accum = new_accum``.
    """
    return _build("ApplyFtrl", [("var", var), ("accum", accum), ("linear", linear)],
                  [("lr", lr), ("l1", l1), ("l2", l2), ("lr_power", lr_power)], grad, 3, use_locking, name)


def apply_ftrl_v2(var: Any, accum: Any, linear: Any, grad: Any, lr: Any, l1: Any, l2: Any, l2_shrinkage: Any,
                  lr_power: Any, use_locking: bool = False, name: Optional[str] = None) -> graph_lib.Tensor:
    """``apply_ftrl`` with a magnitude (shrinkage) L2 penalty: ``linear`` takes ``grad + 2 * l2_shrinkage * var``
    where ``apply_ftrl`` takes ``grad``; the accumulator still sums ``grad ** 2``."""
    return _build("ApplyFtrlV2", [("var", var), ("accum", accum), ("linear", linear)],
                  [("lr", lr), ("l1", l1), ("l2", l2), ("l2_shrinkage", l2_shrinkage), ("lr_power", lr_power)],
                  grad, 3, use_locking, name)


def sparse_apply_ftrl(var: Any, accum: Any, linear: Any, grad: Any, indices: Any, lr: Any, l1: Any, l2: Any,
                      lr_power: Any, use_locking: bool = False, name: Optional[str] = None) -> graph_lib.Tensor:
    """``apply_ftrl`` on the rows ``indices`` only."""
    return _build("SparseApplyFtrl", [("var", var), ("accum", accum), ("linear", linear)],
                  [("lr", lr), ("l1", l1), ("l2", l2), ("lr_power", lr_power)], grad, 3, use_locking, name,
                  indices=indices)


def sparse_apply_ftrl_v2(var: Any, accum: Any, linear: Any, grad: Any, indices: Any, lr: Any, l1: Any, l2: Any,
                         l2_shrinkage: Any, lr_power: Any, use_locking: bool = False,
                         name: Optional[str] = None) -> graph_lib.Tensor:
    """``apply_ftrl_v2`` on the rows ``indices`` only: only those rows shrink."""
    return _build("SparseApplyFtrlV2", [("var", var), ("accum", accum), ("linear", linear)],
                  [("lr", lr), ("l1", l1), ("l2", l2), ("l2_shrinkage", l2_shrinkage), ("lr_power", lr_power)],
                  grad, 3, use_locking, name, indices=indices)


def apply_proximal_adagrad(var: Any, accum: Any, lr: Any, l1: Any, l2: Any, grad: Any, use_locking: bool = False,
                           name: Optional[str] = None) -> graph_lib.Tensor:
    """Adagrad's step size, then the proximal step: ``accum += grad ** 2``; ``alpha = lr / sqrt(accum)``;
    ``prox = var - alpha * grad``; ``var = sign(prox) * max(|prox| - alpha * l1, 0) / (1 + alpha * l2)``."""
    return _build("ApplyProximalAdagrad", [("var", var), ("accum", accum)], [("lr", lr), ("l1", l1), ("l2", l2)],
                  grad, 5, use_locking, name)


def sparse_apply_proximal_adagrad(var: Any, accum: Any, lr: Any, l1: Any, l2: Any, grad: Any, indices: Any,
                                  use_locking: bool = False, name: Optional[str] = None) -> graph_lib.Tensor:
    """``apply_proximal_adagrad`` on the rows ``indices`` only."""
    return _build("SparseApplyProximalAdagrad", [("var", var), ("accum", accum)],
                  [("lr", lr), ("l1", l1), ("l2", l2)], grad, 5, use_locking, name, indices=indices)
