"""The sparse gradient accumulator that synchronous training uses for embedding tables.

``tf.SparseConditionalAccumulator`` is the IndexedSlices twin of the dense
ConditionalAccumulator: replicas apply ``(indices, values)`` pairs tagged with the
step they were computed at, stale ones are dropped, and a take hands back the rows
touched since the last take, sorted by index, each averaged over the gradients that
touched it (TF's per-row mean). TF merges each gradient into the sorted rows assuming
its indices are sorted and distinct (a gather's gradient often is neither, and then a
row can come back twice, each part divided by its own count); here a gradient's
indices may come in any order, repeated ones summed first. Only those rows are ever held,
so a 1,000,000-row table costs the PS what the batches touched, not the table.
Blocking and cancellation follow the dense accumulator (``data_flow_kernels``).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels import data_flow_kernels
from tensorgrid.kernels.registry import register_kernel

Shape = Optional[tuple[Optional[int], ...]]


class SparseConditionalAccumulator(data_flow_kernels.GradientAccumulator):
    """Rows of IndexedSlices gradients for the current global step; stale gradients are dropped."""

    def __init__(self, name: str, shape: Shape, reduction: str, indices_are_keys: bool = False) -> None:
        super().__init__(name, shape, reduction)
        self.indices_are_keys = indices_are_keys
        """The indices are an embedding variable's ids (any int64), not rows: no range to check."""
        self._parts: list[tuple[Any, Any]] = []
        self._row_shape: Optional[tuple[int, ...]] = None

    def _check(self, indices: Any, values: Any, dense_shape: Optional[Any]) -> None:
        def fail(message: str) -> None:
            raise errors.InvalidArgumentError(None, None, f"Accumulator {self.name}: {message}")

        if indices.ndim != 1:
            fail(f"indices must be a vector, got shape {list(indices.shape)}")
        if values.ndim < 1 or values.shape[0] != indices.shape[0]:
            fail(f"values must have one row per index: {indices.shape[0]} indices, values of shape "
                 f"{list(values.shape)}")
        if indices.size and int(indices.min()) < 0 and not self.indices_are_keys:
            fail(f"indices must be >= 0, got {int(indices.min())}")
        expected = self.shape
        if dense_shape is not None:
            given = tuple(int(d) for d in dense_shape)
            if expected is not None and len(expected) > 0 and (
                    len(given) != len(expected) or any(e is not None and e != g for e, g in zip(expected, given))):
                fail(f"the gradient's shape {list(given)} does not match the accumulator's {list(expected)}")
            if len(given) != values.ndim or tuple(given[1:]) != tuple(values.shape[1:]):
                fail(f"values of shape {list(values.shape)} do not fit the gradient's shape {list(given)}")
            expected = given
        if expected is not None and len(expected) > 0:
            if len(expected) != values.ndim or any(
                    e is not None and e != v for e, v in zip(expected[1:], values.shape[1:])):
                fail(f"values of shape {list(values.shape)} do not fit the accumulator's shape {list(expected)}")
            rows = expected[0]
            if rows is not None and indices.size and int(indices.max()) >= rows and not self.indices_are_keys:
                fail(f"index {int(indices.max())} is out of range for {rows} rows")
        if self._row_shape is not None and tuple(values.shape[1:]) != self._row_shape:
            fail(f"rows of shape {list(values.shape[1:])} after rows of shape {list(self._row_shape)} this step")

    def apply_grad(self, local_step: int, indices: Any, values: Any, dense_shape: Optional[Any]) -> None:
        self._check(indices, values, dense_shape)
        self._apply(local_step, (indices, values))

    def _add(self, gradient: Any) -> None:
        indices, values = gradient
        self._parts.append(_coalesced(indices.astype(numpy.int64, copy=False), values))
        self._row_shape = tuple(values.shape[1:])

    def _take(self) -> Any:
        value = self._aggregate()
        self._parts = []
        self._row_shape = None
        return value

    def _aggregate(self) -> tuple[Any, Any, Any]:
        """(indices, values, dense shape) of the rows since the last take, each summed or averaged."""
        indices, values = _coalesced(numpy.concatenate([i for i, _ in self._parts]),
                                     numpy.concatenate([v for _, v in self._parts]))
        if self.reduction == "MEAN":
            # Each part's indices are distinct, so a row's count is the number of gradients that touched it;
            # ``numpy.unique`` sorts as ``_coalesced`` does, so the counts line up with ``indices``.
            _, counts = numpy.unique(numpy.concatenate([i for i, _ in self._parts]), return_counts=True)
            divisor = counts.astype(values.dtype).reshape((-1,) + (1,) * (values.ndim - 1))
            values = values / divisor
        rows: list[int] = [-1, *values.shape[1:]]
        if self.shape is not None and len(self.shape) == values.ndim:
            rows = [-1 if d is None else d for d in self.shape]
        return indices, values.astype(self._parts[0][1].dtype, copy=False), numpy.asarray(rows, numpy.int64)


def _coalesced(indices: Any, values: Any) -> tuple[Any, Any]:
    """Sorts by index and sums the rows of repeated indices."""
    if indices.shape[0] == 0:
        return indices, values
    order = numpy.argsort(indices, kind="stable")
    ordered = indices[order]
    starts = numpy.flatnonzero(numpy.concatenate([[True], ordered[1:] != ordered[:-1]]))
    if starts.shape[0] == ordered.shape[0]:
        return ordered, values[order]
    return ordered[starts], numpy.add.reduceat(values[order], starts, axis=0)


@register_kernel("SparseConditionalAccumulator", host_only=True)
def _sparse_accumulator(k: context.KernelContext, step: context.StepContext) -> Any:
    name = k.attrs["shared_name"] or k.name
    return step.resources.lookup_or_create(
        k.attrs["container"], name, SparseConditionalAccumulator,
        lambda: SparseConditionalAccumulator(name, k.attrs["shape"], k.attrs["reduction_type"],
                                             k.attrs.get("indices_are_keys", False)))


@register_kernel("SparseAccumulatorApplyGradient", host_only=True)
def _sparse_apply_grad(k: context.KernelContext, step: context.StepContext, accumulator: SparseConditionalAccumulator,
                       local_step: Any, indices: Any, values: Any, *dense_shape: Any) -> None:
    accumulator.apply_grad(int(local_step), numpy.asarray(indices), numpy.asarray(values),
                           dense_shape[0] if k.attrs["has_known_shape"] else None)


@register_kernel("SparseAccumulatorTakeGradient", is_async=True, host_only=True)
def _sparse_take_grad(k: context.KernelContext, step: context.StepContext, done: data_flow_kernels.Done,
                      accumulator: SparseConditionalAccumulator, num_required: Any) -> None:
    accumulator.take_grad_async(int(num_required), done, step.cancelled.is_set)
