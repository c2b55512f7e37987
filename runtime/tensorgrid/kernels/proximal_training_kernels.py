"""Kernels of FTRL-proximal and proximal Adagrad: the optimizers of TF1's linear models.

They sit apart from ``training_kernels`` (whose locks, scratch buffers and checks they
share) because their step ends in a proximal, L1-thresholding update that drives small
weights to exactly zero: FTRL (McMahan et al., 2013), the wide part of a wide-and-deep
model, solves for each weight in closed form from its ``linear`` and ``accum`` slots;
proximal Adagrad takes Adagrad's step, then FOBOS's shrinkage.

The formulas and their order of operations are TF's (``training_ops.cc``), so float32
results agree with TensorFlow's to rounding. The sparse kernels sum the rows of repeated
indices first, as TF1's optimizers do before applying, check the hyper-parameters as TF's
sparse kernels do (a positive learning rate, non-negative strengths), and touch only the
rows of the batch.
"""

from __future__ import annotations

from typing import Any, Optional

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels import row_writes
from tensorgrid.kernels import training_kernels
from tensorgrid.kernels.registry import register_kernel

row_writes.reports_rows(("SparseApplyFtrl", "SparseApplyFtrlV2"), positions=(0, 1, 2))
row_writes.reports_rows(("SparseApplyProximalAdagrad",), positions=(0, 1))


def _check_hyper_parameters(k: context.KernelContext, positive: dict[str, Any],
                            non_negative: dict[str, Any], non_positive: dict[str, Any]) -> None:
    """TF's checks of a sparse FTRL or proximal Adagrad update (and of the dense proximal Adagrad on CPU)."""
    for kind, scalars in (("positive", positive), ("non-negative", non_negative), ("non-positive", non_positive)):
        for role, value in scalars.items():
            number = float(value)
            valid = number > 0 if kind == "positive" else number >= 0 if kind == "non-negative" else number <= 0
            if not valid:
                raise errors.InvalidArgumentError(
                    None, None, f"{role} must be a {kind} scalar, got {number} (op {k.name})")


def _ftrl_root(k: context.KernelContext, lr_power: Any, always_pow: bool = False) -> Any:
    """``x ** -lr_power`` into ``out``: a square root for TF's default ``lr_power = -0.5``, as TF computes it."""
    xp = k.xp
    if float(lr_power) == -0.5 and not always_pow:
        return lambda x, out=None: xp.sqrt(x, out=out)
    power = -lr_power
    return lambda x, out=None: xp.power(x, power, out=out)


def _ftrl(k: context.KernelContext, var: Any, accum: Any, linear: Any, grad: Any, lr: Any, l1: Any, l2: Any,
          l2_shrinkage: Optional[Any], lr_power: Any) -> Any:
    xp = k.xp
    scalars = {"lr": lr, "l1": l1, "l2": l2, "lr_power": lr_power}
    training_kernels.check_scalars(k, **scalars, **({} if l2_shrinkage is None else {"l2_shrinkage": l2_shrinkage}))
    root = _ftrl_root(k, lr_power)
    with training_kernels.Locks(k.attrs["use_locking"], (var, accum, linear)):
        w, a, lin = var.read(), accum.read(), linear.read()
        training_kernels.check_shapes(k, w, accum=a, linear=lin, grad=grad)
        new_accum, new_root, step = (training_kernels.scratch(k, w) for _ in range(3))
        # new_accum = accum + grad ** 2
        xp.multiply(grad, grad, out=new_accum)
        xp.add(a, new_accum, out=new_accum)
        # sigma * var = (new_accum ** -lr_power - accum ** -lr_power) / lr * var, into accum (rewritten below)
        root(new_accum, out=new_root)
        root(a, out=a)
        xp.subtract(new_root, a, out=a)
        xp.divide(a, lr, out=a)
        xp.multiply(a, w, out=a)
        # linear += grad (+ 2 * l2_shrinkage * var) - sigma * var
        if l2_shrinkage is None:
            xp.subtract(grad, a, out=a)
        else:
            xp.multiply(w, 2 * l2_shrinkage, out=step)
            xp.add(grad, step, out=step)
            xp.subtract(step, a, out=a)
        xp.add(lin, a, out=lin)
        # var = (l1 * sign(linear) - linear) / (new_accum ** -lr_power / lr + 2 * l2) where |linear| > l1, else 0
        xp.divide(new_root, lr, out=new_root)
        xp.add(new_root, 2 * l2, out=new_root)
        xp.sign(lin, out=step)
        xp.multiply(step, l1, out=step)
        xp.subtract(step, lin, out=step)
        xp.divide(step, new_root, out=step)
        xp.abs(lin, out=new_root)
        w[...] = xp.where(xp.greater(new_root, l1), step, 0)
        a[...] = new_accum
        for buffer in (new_accum, new_root, step):
            training_kernels.release(k, buffer)
        var.updates += 1
    return var


@register_kernel("ApplyFtrl")
def _apply_ftrl(k: context.KernelContext, step: context.StepContext, var: Any, accum: Any, linear: Any, grad: Any,
                lr: Any, l1: Any, l2: Any, lr_power: Any) -> Any:
    return _ftrl(k, var, accum, linear, grad, lr, l1, l2, None, lr_power)


@register_kernel("ApplyFtrlV2")
def _apply_ftrl_v2(k: context.KernelContext, step: context.StepContext, var: Any, accum: Any, linear: Any,
                   grad: Any, lr: Any, l1: Any, l2: Any, l2_shrinkage: Any, lr_power: Any) -> Any:
    return _ftrl(k, var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power)


def _sparse_ftrl(k: context.KernelContext, var: Any, accum: Any, linear: Any, grad: Any, indices: Any, lr: Any,
                 l1: Any, l2: Any, l2_shrinkage: Optional[Any], lr_power: Any) -> Any:
    xp = k.xp
    non_negative = {"l1": l1, "l2": l2, **({} if l2_shrinkage is None else {"l2_shrinkage": l2_shrinkage})}
    training_kernels.check_scalars(k, lr=lr, lr_power=lr_power, **non_negative)
    _check_hyper_parameters(k, {"lr": lr}, non_negative, {"lr_power": lr_power})
    with training_kernels.Locks(k.attrs["use_locking"], (var, accum, linear)):
        w, a, lin = var.read(), accum.read(), linear.read()
        training_kernels.check_shapes(k, w, accum=a, linear=lin)
        training_kernels.check_row_indices(k, w, grad, indices)
        rows, g = training_kernels.summed_rows(k, indices, grad)
        backend = k.backend
        w_rows, a_rows, lin_rows = backend.take_rows(w, rows), backend.take_rows(a, rows), backend.take_rows(lin, rows)
        new_accum = a_rows + g * g
        g_linear = g if l2_shrinkage is None else g + (2 * l2_shrinkage) * w_rows
        if w.ndim == 1:
            # TF's kernel for a vector: pow even for lr_power = -0.5, and (linear + grad) - sigma * var.
            power = _ftrl_root(k, lr_power, always_pow=True)
            sigma = (power(new_accum) - power(a_rows)) / lr
            lin_rows = lin_rows + g_linear - sigma * w_rows
        else:
            power = _ftrl_root(k, lr_power)
            lin_rows = lin_rows + (g_linear - (power(new_accum) - power(a_rows)) / lr * w_rows)
        root = _ftrl_root(k, lr_power)
        quadratic = root(new_accum) / lr + 2 * l2
        backend.put_rows(w, rows, (xp.maximum(xp.minimum(lin_rows, l1), -l1) - lin_rows) / quadratic)
        backend.put_rows(a, rows, new_accum)
        backend.put_rows(lin, rows, lin_rows)
        var.updates += 1
        row_writes.wrote_rows(k, rows, var, accum, linear)
    return var


@register_kernel("SparseApplyFtrl")
def _sparse_apply_ftrl(k: context.KernelContext, step: context.StepContext, var: Any, accum: Any, linear: Any,
                       grad: Any, indices: Any, lr: Any, l1: Any, l2: Any, lr_power: Any) -> Any:
    return _sparse_ftrl(k, var, accum, linear, grad, indices, lr, l1, l2, None, lr_power)


@register_kernel("SparseApplyFtrlV2")
def _sparse_apply_ftrl_v2(k: context.KernelContext, step: context.StepContext, var: Any, accum: Any, linear: Any,
                          grad: Any, indices: Any, lr: Any, l1: Any, l2: Any, l2_shrinkage: Any,
                          lr_power: Any) -> Any:
    return _sparse_ftrl(k, var, accum, linear, grad, indices, lr, l1, l2, l2_shrinkage, lr_power)


@register_kernel("ApplyProximalAdagrad")
def _apply_proximal_adagrad(k: context.KernelContext, step: context.StepContext, var: Any, accum: Any, lr: Any,
                            l1: Any, l2: Any, grad: Any) -> Any:
    xp = k.xp
    training_kernels.check_scalars(k, lr=lr, l1=l1, l2=l2)
    _check_hyper_parameters(k, {"lr": lr}, {"l1": l1, "l2": l2}, {})
    with training_kernels.Locks(k.attrs["use_locking"], (var, accum)):
        w, a = var.read(), accum.read()
        training_kernels.check_shapes(k, w, accum=a, grad=grad)
        alpha, tmp = training_kernels.scratch(k, w), training_kernels.scratch(k, w)
        # accum += grad ** 2; alpha = lr / sqrt(accum); var -= alpha * grad
        xp.multiply(grad, grad, out=tmp)
        xp.add(a, tmp, out=a)
        xp.sqrt(a, out=alpha)
        xp.divide(lr, alpha, out=alpha)
        xp.multiply(grad, alpha, out=tmp)
        xp.subtract(w, tmp, out=w)
        if l1 > 0:
            # var = sign(var) * max(|var| - alpha * l1, 0)
            threshold = training_kernels.scratch(k, w)
            xp.multiply(alpha, l1, out=threshold)
            xp.abs(w, out=tmp)
            xp.subtract(tmp, threshold, out=tmp)
            training_kernels.release(k, threshold)
            xp.maximum(tmp, 0, out=tmp)
            xp.sign(w, out=w)
            xp.multiply(w, tmp, out=w)
        # var /= 1 + alpha * l2
        xp.multiply(alpha, l2, out=alpha)
        xp.add(alpha, 1, out=alpha)
        xp.divide(w, alpha, out=w)
        training_kernels.release(k, alpha)
        training_kernels.release(k, tmp)
        var.updates += 1
    return var


@register_kernel("SparseApplyProximalAdagrad")
def _sparse_apply_proximal_adagrad(k: context.KernelContext, step: context.StepContext, var: Any, accum: Any, lr: Any,
                                   l1: Any, l2: Any, grad: Any, indices: Any) -> Any:
    xp = k.xp
    training_kernels.check_scalars(k, lr=lr, l1=l1, l2=l2)
    _check_hyper_parameters(k, {"lr": lr}, {"l1": l1, "l2": l2}, {})
    with training_kernels.Locks(k.attrs["use_locking"], (var, accum)):
        w, a = var.read(), accum.read()
        training_kernels.check_shapes(k, w, accum=a)
        training_kernels.check_row_indices(k, w, grad, indices)
        rows, g = training_kernels.summed_rows(k, indices, grad)
        backend = k.backend
        a_rows = backend.take_rows(a, rows) + g * g
        backend.put_rows(a, rows, a_rows)
        alpha = lr / xp.sqrt(a_rows)
        w_rows = training_kernels.proximal_step(k, backend.take_rows(w, rows) - g * alpha, alpha, l1, l2)
        backend.put_rows(w, rows, w_rows)
        var.updates += 1
        row_writes.wrote_rows(k, rows, var, accum)
    return var
