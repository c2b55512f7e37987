"""Kernels of the fused optimizer updates: TF's formulas, computed in place.

Every update writes the variable and slot buffers with ``xp`` ufuncs and ``out=``,
through one scratch buffer per kernel that is allocated on first use and reused by
later steps, so a step allocates nothing the size of the variable. Scratch buffers
sit in a pool (``list.pop``/``append`` are atomic), so concurrent steps running the
same op never share one. With ``use_locking`` the variable and its slots are locked,
in a fixed order, for the whole update.

The sparse updates first sum the gradient rows that share an index (as TF's
optimizers do), then read, update and write back only those rows: the work is
proportional to the rows in the batch, not to the variable (except Adam's, whose
TF1 formula decays every row of its slots).

The locks, scratch buffers, checks and the summing of rows are public: the kernels of
FTRL and proximal Adagrad (``proximal_training_kernels``) are written with them too.
"""

from __future__ import annotations

from typing import Any

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels import index_ranges
from tensorgrid.kernels import row_writes
from tensorgrid.kernels.registry import register_kernel

# The sparse updates write only their rows of the variable and of its slots (Adam's is not here:
# TF1's formula decays every row of its slots).
row_writes.reports_rows(("SparseApplyMomentum", "SparseApplyAdagrad"), positions=(0, 1))
row_writes.reports_rows(("SparseApplyRMSProp", "SparseApplyAdadelta"), positions=(0, 1, 2))
row_writes.reports_rows(("SparseApplyCenteredRMSProp",), positions=(0, 1, 2, 3))
row_writes.reports_rows(("SparseApplyProximalGradientDescent",), positions=(0,))


class Locks:
    """Holds the locks of several variables, always taken in the same order."""

    def __init__(self, use_locking: bool, variables: tuple[Any, ...]) -> None:
        self._locks = sorted((v.lock for v in variables), key=id) if use_locking else []

    def __enter__(self) -> None:
        for lock in self._locks:
            lock.acquire()

    def __exit__(self, *exc: Any) -> None:
        for lock in reversed(self._locks):
            lock.release()


def scratch(k: context.KernelContext, like: Any) -> Any:
    pool = k.state.setdefault("scratch", [])
    while pool:
        try:
            buffer = pool.pop()
        except IndexError:
            break
        if buffer.shape == like.shape and buffer.dtype == like.dtype and k.backend.is_native(buffer):
            return buffer
    return k.xp.empty_like(like)


def release(k: context.KernelContext, buffer: Any) -> None:
    k.state["scratch"].append(buffer)


def check_shapes(k: context.KernelContext, var: Any, **others: Any) -> None:
    for role, value in others.items():
        if value.shape != var.shape:
            raise errors.InvalidArgumentError(
                None, None,
                f"var and {role} do not have the same shape{list(var.shape)} {list(value.shape)} "
                f"(op {k.name})",
            )


def check_scalars(k: context.KernelContext, **scalars: Any) -> None:
    for role, value in scalars.items():
        if getattr(value, "ndim", 0) != 0:
            raise errors.InvalidArgumentError(None, None, f"{role} is not a scalar: {list(value.shape)} (op {k.name})")


@register_kernel("ApplyGradientDescent")
def _apply_gradient_descent(k: context.KernelContext, step: context.StepContext, var: Any, alpha: Any,
                            delta: Any) -> Any:
    xp = k.xp
    check_scalars(k, alpha=alpha)
    with Locks(k.attrs["use_locking"], (var,)):
        w = var.read()
        check_shapes(k, w, delta=delta)
        tmp = scratch(k, w)
        xp.multiply(delta, alpha, out=tmp)
        xp.subtract(w, tmp, out=w)
        release(k, tmp)
        var.updates += 1
    return var


@register_kernel("ApplyMomentum")
def _apply_momentum(k: context.KernelContext, step: context.StepContext, var: Any, accum: Any, lr: Any, grad: Any,
                    momentum: Any) -> Any:
    xp = k.xp
    check_scalars(k, lr=lr, momentum=momentum)
    with Locks(k.attrs["use_locking"], (var, accum)):
        w, a = var.read(), accum.read()
        check_shapes(k, w, accum=a, grad=grad)
        tmp = scratch(k, w)
        xp.multiply(a, momentum, out=a)
        xp.add(a, grad, out=a)
        if k.attrs["use_nesterov"]:
            # var -= lr * grad + lr * momentum * accum
            xp.multiply(a, momentum, out=tmp)
            xp.add(tmp, grad, out=tmp)
            xp.multiply(tmp, lr, out=tmp)
        else:
            xp.multiply(a, lr, out=tmp)
        xp.subtract(w, tmp, out=w)
        release(k, tmp)
        var.updates += 1
    return var


@register_kernel("ApplyAdagrad")
def _apply_adagrad(k: context.KernelContext, step: context.StepContext, var: Any, accum: Any, lr: Any,
                   grad: Any) -> Any:
    xp = k.xp
    check_scalars(k, lr=lr)
    with Locks(k.attrs["use_locking"], (var, accum)):
        w, a = var.read(), accum.read()
        check_shapes(k, w, accum=a, grad=grad)
        tmp = scratch(k, w)
        if k.attrs["update_slots"]:
            xp.square(grad, out=tmp)
            xp.add(a, tmp, out=a)
        # var -= lr * grad / sqrt(accum)
        xp.sqrt(a, out=tmp)
        xp.divide(grad, tmp, out=tmp)
        xp.multiply(tmp, lr, out=tmp)
        xp.subtract(w, tmp, out=w)
        release(k, tmp)
        var.updates += 1
    return var


@register_kernel("ApplyAdam")
def _apply_adam(k: context.KernelContext, step: context.StepContext, var: Any, m: Any, v: Any, beta1_power: Any,
                beta2_power: Any, lr: Any, beta1: Any, beta2: Any, epsilon: Any, grad: Any) -> Any:
    xp = k.xp
    check_scalars(k, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr, beta1=beta1, beta2=beta2,
                   epsilon=epsilon)
    # Bias correction folded into the step size, computed in the variable's dtype as TF does.
    alpha = lr * xp.sqrt(1 - beta2_power) / (1 - beta1_power)
    with Locks(k.attrs["use_locking"], (var, m, v)):
        w, m_buf, v_buf = var.read(), m.read(), v.read()
        check_shapes(k, w, m=m_buf, v=v_buf, grad=grad)
        tmp = scratch(k, w)
        # m += (grad - m) * (1 - beta1)
        xp.subtract(grad, m_buf, out=tmp)
        xp.multiply(tmp, 1 - beta1, out=tmp)
        xp.add(m_buf, tmp, out=m_buf)
        # v += (grad ** 2 - v) * (1 - beta2)
        xp.square(grad, out=tmp)
        xp.subtract(tmp, v_buf, out=tmp)
        xp.multiply(tmp, 1 - beta2, out=tmp)
        xp.add(v_buf, tmp, out=v_buf)
        if k.attrs["use_nesterov"]:
            # var -= alpha * (grad * (1 - beta1) + beta1 * m) / (sqrt(v) + epsilon)
            denominator = scratch(k, w)
            xp.sqrt(v_buf, out=denominator)
            xp.add(denominator, epsilon, out=denominator)
            xp.subtract(grad, m_buf, out=tmp)
            xp.multiply(tmp, 1 - beta1, out=tmp)
            xp.add(tmp, m_buf, out=tmp)
            xp.divide(tmp, denominator, out=tmp)
            release(k, denominator)
            xp.multiply(tmp, alpha, out=tmp)
            xp.subtract(w, tmp, out=w)
            release(k, tmp)
        else:
            release(k, tmp)
            _adam_step(k, w, m_buf, v_buf, alpha, epsilon)
        var.updates += 1
    return var


def _adam_step(k: context.KernelContext, w: Any, m_buf: Any, v_buf: Any, alpha: Any, epsilon: Any) -> None:
    """``var -= alpha * m / (sqrt(v) + epsilon)`` in place, every row (dense and TF1's sparse Adam)."""
    xp = k.xp
    tmp = scratch(k, w)
    xp.sqrt(v_buf, out=tmp)
    xp.add(tmp, epsilon, out=tmp)
    xp.divide(m_buf, tmp, out=tmp)
    xp.multiply(tmp, alpha, out=tmp)
    xp.subtract(w, tmp, out=w)
    release(k, tmp)


def check_row_indices(k: context.KernelContext, var: Any, grad: Any, indices: Any) -> None:
    if var.ndim < 1:
        raise errors.InvalidArgumentError(None, None, f"var must be at least 1 dimensional (op {k.name})")
    if indices.ndim != 1:
        raise errors.InvalidArgumentError(None, None, f"indices must be one-dimensional, got shape "
                                                      f"{list(indices.shape)} (op {k.name})")
    if grad.shape != indices.shape + var.shape[1:]:
        raise errors.InvalidArgumentError(
            None, None,
            f"grad must hold one row of var {list(var.shape)} per index: grad shape {list(grad.shape)}, "
            f"{indices.shape[0]} indices (op {k.name})",
        )
    bad = index_ranges.first_bad_index(indices, var.shape[0])
    if bad is not None:
        raise errors.InvalidArgumentError(
            None, None, f"Index {bad} in indices is out of range [0, {var.shape[0]}) (op {k.name})")


def summed_rows(k: context.KernelContext, indices: Any, rows: Any) -> tuple[Any, Any]:
    """(unique indices, the sum of the rows of each): repeated indices add up, as TF's optimizers do.
    Both are new arrays: a sparse update may compute in them in place."""
    return k.backend.unique_sums(indices, rows)


@register_kernel("SparseApplyMomentum")
def _sparse_apply_momentum(k: context.KernelContext, step: context.StepContext, var: Any, accum: Any, lr: Any,
                           grad: Any, indices: Any, momentum: Any) -> Any:
    check_scalars(k, lr=lr, momentum=momentum)
    with Locks(k.attrs["use_locking"], (var, accum)):
        w, a = var.read(), accum.read()
        check_shapes(k, w, accum=a)
        check_row_indices(k, w, grad, indices)
        rows, g = summed_rows(k, indices, grad)
        # accum = accum * momentum + g; var -= g * lr + accum * momentum * lr (Nesterov) or accum * lr,
        # on the rows alone, each computed in place in the arrays this update owns.
        xp, backend = k.xp, k.backend
        a_rows = backend.take_rows(a, rows)
        xp.multiply(a_rows, momentum, out=a_rows)
        xp.add(a_rows, g, out=a_rows)
        backend.put_rows(a, rows, a_rows)
        if k.attrs["use_nesterov"]:
            xp.multiply(g, lr, out=g)
            step_rows = xp.multiply(a_rows, momentum)
            xp.multiply(step_rows, lr, out=step_rows)
            xp.add(g, step_rows, out=g)
        else:
            xp.multiply(a_rows, lr, out=g)
        w_rows = backend.take_rows(w, rows)
        xp.subtract(w_rows, g, out=w_rows)
        backend.put_rows(w, rows, w_rows)
        var.updates += 1
        row_writes.wrote_rows(k, rows, var, accum)
    return var


@register_kernel("SparseApplyAdagrad")
def _sparse_apply_adagrad(k: context.KernelContext, step: context.StepContext, var: Any, accum: Any, lr: Any, grad: Any,
                          indices: Any) -> Any:
    check_scalars(k, lr=lr)
    with Locks(k.attrs["use_locking"], (var, accum)):
        w, a = var.read(), accum.read()
        check_shapes(k, w, accum=a)
        check_row_indices(k, w, grad, indices)
        rows, g = summed_rows(k, indices, grad)
        # accum += g * g; var -= g * lr / sqrt(accum), on the rows alone, each computed in place
        # in the arrays this update owns (the summed rows, the gathered rows).
        xp, backend = k.xp, k.backend
        a_rows = backend.take_rows(a, rows)
        if k.attrs["update_slots"]:
            squares = xp.multiply(g, g)
            xp.add(a_rows, squares, out=a_rows)
            backend.put_rows(a, rows, a_rows)
            root = xp.sqrt(a_rows, out=squares)
        else:
            root = xp.sqrt(a_rows)
        xp.multiply(g, lr, out=g)
        xp.divide(g, root, out=g)
        w_rows = backend.take_rows(w, rows)
        xp.subtract(w_rows, g, out=w_rows)
        backend.put_rows(w, rows, w_rows)
        var.updates += 1
        row_writes.wrote_rows(k, rows, var, accum)
    return var


@register_kernel("SparseApplyAdam")
def _sparse_apply_adam(k: context.KernelContext, step: context.StepContext, var: Any, m: Any, v: Any, beta1_power: Any,
                       beta2_power: Any, lr: Any, beta1: Any, beta2: Any, epsilon: Any, grad: Any, indices: Any) -> Any:
    xp = k.xp
    check_scalars(k, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr, beta1=beta1, beta2=beta2,
                   epsilon=epsilon)
    alpha = lr * xp.sqrt(1 - beta2_power) / (1 - beta1_power)
    with Locks(k.attrs["use_locking"], (var, m, v)):
        w, m_buf, v_buf = var.read(), m.read(), v.read()
        check_shapes(k, w, m=m_buf, v=v_buf)
        check_row_indices(k, w, grad, indices)
        rows, g = summed_rows(k, indices, grad)
        # TF1: m = m * beta1, then m[rows] += g * (1 - beta1); the same for v with g * g.
        xp.multiply(m_buf, beta1, out=m_buf)
        m_buf[rows] += g * (1 - beta1)
        xp.multiply(v_buf, beta2, out=v_buf)
        v_buf[rows] += (g * g) * (1 - beta2)
        _adam_step(k, w, m_buf, v_buf, alpha, epsilon)  # every row, as TF1
        var.updates += 1
    return var


def _rms_prop_denominator(k: context.KernelContext, ms: Any, mg: Any, epsilon: Any, out: Any) -> Any:
    """``sqrt(ms + epsilon)``, or centered ``sqrt(ms - mg ** 2 + epsilon)``, into ``out``."""
    xp = k.xp
    if mg is None:
        xp.add(ms, epsilon, out=out)
    else:
        xp.square(mg, out=out)
        xp.subtract(ms, out, out=out)
        xp.add(out, epsilon, out=out)
    return xp.sqrt(out, out=out)


def _rms_prop(k: context.KernelContext, var: Any, mg: Any, ms: Any, mom: Any, lr: Any, rho: Any, momentum: Any,
              epsilon: Any, grad: Any) -> Any:
    xp = k.xp
    check_scalars(k, lr=lr, rho=rho, momentum=momentum, epsilon=epsilon)
    slots = (var, ms, mom) if mg is None else (var, mg, ms, mom)
    with Locks(k.attrs["use_locking"], slots):
        w, ms_buf, mom_buf = var.read(), ms.read(), mom.read()
        mg_buf = None if mg is None else mg.read()
        check_shapes(k, w, ms=ms_buf, mom=mom_buf, grad=grad, **({} if mg_buf is None else {"mg": mg_buf}))
        tmp = scratch(k, w)
        if mg_buf is not None:
            # mg += (grad - mg) * (1 - rho)
            xp.subtract(grad, mg_buf, out=tmp)
            xp.multiply(tmp, 1 - rho, out=tmp)
            xp.add(mg_buf, tmp, out=mg_buf)
        # ms += (grad ** 2 - ms) * (1 - rho)
        xp.square(grad, out=tmp)
        xp.subtract(tmp, ms_buf, out=tmp)
        xp.multiply(tmp, 1 - rho, out=tmp)
        xp.add(ms_buf, tmp, out=ms_buf)
        # mom = mom * momentum + grad * lr / denominator; var -= mom
        denominator = _rms_prop_denominator(k, ms_buf, mg_buf, epsilon, scratch(k, w))
        xp.multiply(grad, lr, out=tmp)
        xp.divide(tmp, denominator, out=tmp)
        release(k, denominator)
        xp.multiply(mom_buf, momentum, out=mom_buf)
        xp.add(mom_buf, tmp, out=mom_buf)
        xp.subtract(w, mom_buf, out=w)
        release(k, tmp)
        var.updates += 1
    return var


@register_kernel("ApplyRMSProp")
def _apply_rms_prop(k: context.KernelContext, step: context.StepContext, var: Any, ms: Any, mom: Any, lr: Any,
                    rho: Any, momentum: Any, epsilon: Any, grad: Any) -> Any:
    return _rms_prop(k, var, None, ms, mom, lr, rho, momentum, epsilon, grad)


@register_kernel("ApplyCenteredRMSProp")
def _apply_centered_rms_prop(k: context.KernelContext, step: context.StepContext, var: Any, mg: Any, ms: Any,
                             mom: Any, lr: Any, rho: Any, momentum: Any, epsilon: Any, grad: Any) -> Any:
    return _rms_prop(k, var, mg, ms, mom, lr, rho, momentum, epsilon, grad)


def _sparse_rms_prop(k: context.KernelContext, var: Any, mg: Any, ms: Any, mom: Any, lr: Any, rho: Any,
                     momentum: Any, epsilon: Any, grad: Any, indices: Any) -> Any:
    xp = k.xp
    check_scalars(k, lr=lr, rho=rho, momentum=momentum, epsilon=epsilon)
    slots = (var, ms, mom) if mg is None else (var, mg, ms, mom)
    with Locks(k.attrs["use_locking"], slots):
        w, ms_buf, mom_buf = var.read(), ms.read(), mom.read()
        mg_buf = None if mg is None else mg.read()
        check_shapes(k, w, ms=ms_buf, mom=mom_buf, **({} if mg_buf is None else {"mg": mg_buf}))
        check_row_indices(k, w, grad, indices)
        rows, g = summed_rows(k, indices, grad)
        ms_rows = ms_buf[rows]
        ms_rows += (g * g - ms_rows) * (1 - rho)
        ms_buf[rows] = ms_rows
        if mg_buf is None:
            denominator = xp.sqrt(ms_rows + epsilon)
        else:
            mg_rows = mg_buf[rows]
            mg_rows += (g - mg_rows) * (1 - rho)
            mg_buf[rows] = mg_rows
            denominator = xp.sqrt(ms_rows - mg_rows * mg_rows + epsilon)
        mom_rows = mom_buf[rows] * momentum + g * lr / denominator
        mom_buf[rows] = mom_rows
        w[rows] -= mom_rows
        var.updates += 1
        row_writes.wrote_rows(k, rows, *slots)
    return var


@register_kernel("SparseApplyRMSProp")
def _sparse_apply_rms_prop(k: context.KernelContext, step: context.StepContext, var: Any, ms: Any, mom: Any, lr: Any,
                           rho: Any, momentum: Any, epsilon: Any, grad: Any, indices: Any) -> Any:
    return _sparse_rms_prop(k, var, None, ms, mom, lr, rho, momentum, epsilon, grad, indices)


@register_kernel("SparseApplyCenteredRMSProp")
def _sparse_apply_centered_rms_prop(k: context.KernelContext, step: context.StepContext, var: Any, mg: Any, ms: Any,
                                    mom: Any, lr: Any, rho: Any, momentum: Any, epsilon: Any, grad: Any,
                                    indices: Any) -> Any:
    return _sparse_rms_prop(k, var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices)


def _adadelta_rows(k: context.KernelContext, w: Any, accum: Any, accum_update: Any, lr: Any, rho: Any, epsilon: Any,
                   grad: Any) -> tuple[Any, Any, Any]:
    """TF's Adadelta step on arrays: the new (var, accum, accum_update), with TF's order of updates."""
    xp = k.xp
    accum = accum * rho + grad * grad * (1 - rho)
    update = xp.sqrt(accum_update + epsilon) / xp.sqrt(accum + epsilon) * grad
    w = w - update * lr
    accum_update = accum_update * rho + update * update * (1 - rho)
    return w, accum, accum_update


@register_kernel("ApplyAdadelta")
def _apply_adadelta(k: context.KernelContext, step: context.StepContext, var: Any, accum: Any, accum_update: Any,
                    lr: Any, rho: Any, epsilon: Any, grad: Any) -> Any:
    xp = k.xp
    check_scalars(k, lr=lr, rho=rho, epsilon=epsilon)
    with Locks(k.attrs["use_locking"], (var, accum, accum_update)):
        w, a, u = var.read(), accum.read(), accum_update.read()
        check_shapes(k, w, accum=a, accum_update=u, grad=grad)
        tmp, update = scratch(k, w), scratch(k, w)
        # accum = accum * rho + grad ** 2 * (1 - rho)
        xp.multiply(a, rho, out=a)
        xp.square(grad, out=tmp)
        xp.multiply(tmp, 1 - rho, out=tmp)
        xp.add(a, tmp, out=a)
        # update = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad
        xp.add(u, epsilon, out=update)
        xp.sqrt(update, out=update)
        xp.add(a, epsilon, out=tmp)
        xp.sqrt(tmp, out=tmp)
        xp.divide(update, tmp, out=update)
        xp.multiply(update, grad, out=update)
        # var -= update * lr; accum_update = accum_update * rho + update ** 2 * (1 - rho)
        xp.multiply(update, lr, out=tmp)
        xp.subtract(w, tmp, out=w)
        xp.square(update, out=tmp)
        xp.multiply(tmp, 1 - rho, out=tmp)
        xp.multiply(u, rho, out=u)
        xp.add(u, tmp, out=u)
        release(k, update)
        release(k, tmp)
        var.updates += 1
    return var


@register_kernel("SparseApplyAdadelta")
def _sparse_apply_adadelta(k: context.KernelContext, step: context.StepContext, var: Any, accum: Any,
                           accum_update: Any, lr: Any, rho: Any, epsilon: Any, grad: Any, indices: Any) -> Any:
    check_scalars(k, lr=lr, rho=rho, epsilon=epsilon)
    with Locks(k.attrs["use_locking"], (var, accum, accum_update)):
        w, a, u = var.read(), accum.read(), accum_update.read()
        check_shapes(k, w, accum=a, accum_update=u)
        check_row_indices(k, w, grad, indices)
        rows, g = summed_rows(k, indices, grad)
        w[rows], a[rows], u[rows] = _adadelta_rows(k, w[rows], a[rows], u[rows], lr, rho, epsilon, g)
        var.updates += 1
        row_writes.wrote_rows(k, rows, var, accum, accum_update)
    return var


def proximal_step(k: context.KernelContext, prox: Any, alpha: Any, l1: Any, l2: Any) -> Any:
    """``sign(prox) * max(|prox| - alpha * l1, 0) / (1 + alpha * l2)`` in place (no shrinkage when l1 <= 0)."""
    xp = k.xp
    if l1 > 0:
        sign = xp.sign(prox)
        xp.abs(prox, out=prox)
        xp.subtract(prox, alpha * l1, out=prox)
        xp.maximum(prox, 0, out=prox)
        xp.multiply(prox, sign, out=prox)
    return xp.divide(prox, 1 + alpha * l2, out=prox)


@register_kernel("ApplyProximalGradientDescent")
def _apply_proximal_gradient_descent(k: context.KernelContext, step: context.StepContext, var: Any, alpha: Any,
                                     l1: Any, l2: Any, delta: Any) -> Any:
    xp = k.xp
    check_scalars(k, alpha=alpha, l1=l1, l2=l2)
    with Locks(k.attrs["use_locking"], (var,)):
        w = var.read()
        check_shapes(k, w, delta=delta)
        tmp = scratch(k, w)
        xp.multiply(delta, alpha, out=tmp)
        xp.subtract(w, tmp, out=w)
        proximal_step(k, w, alpha, l1, l2)
        release(k, tmp)
        var.updates += 1
    return var


@register_kernel("SparseApplyProximalGradientDescent")
def _sparse_apply_proximal_gradient_descent(k: context.KernelContext, step: context.StepContext, var: Any, alpha: Any,
                                            l1: Any, l2: Any, grad: Any, indices: Any) -> Any:
    check_scalars(k, alpha=alpha, l1=l1, l2=l2)
    with Locks(k.attrs["use_locking"], (var,)):
        w = var.read()
        check_row_indices(k, w, grad, indices)
        rows, g = summed_rows(k, indices, grad)
        w[rows] = proximal_step(k, w[rows] - g * alpha, alpha, l1, l2)
        var.updates += 1
        row_writes.wrote_rows(k, rows, var)
    return var
