"""Kernels of ``tf.TensorArray``: the array is an immutable value carried by its flow.

TF1 keeps a TensorArray as a resource that ops mutate through a handle, and threads a
float "flow" scalar through them only to order the ops. Here the flow carries the array
itself (a ``TensorArrayValue``): a write returns a new value, so a TensorArray passes
through the functional While and If ops and their gradients like any other loop variable,
and the While gradient's replay of the loop sees the same elements as the forward pass.

The gradient of a flow is a ``TensorArrayValue`` too, one whose writes to the same index
add up (TF's TensorArrayGrad semantics); a zero gradient arrives as a 0-d array (what
ZerosLike makes of a flow) and means "no element has a gradient".
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels.registry import register_kernel

Shape = Optional[tuple[Optional[int], ...]]
"""An element shape: None when unknown, else one size (or None) per dimension."""


def _shown(shape: Shape) -> str:
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _compatible(known: Shape, actual: tuple[int, ...]) -> bool:
    return known is None or (len(known) == len(actual) and all(d is None or d == a for d, a in zip(known, actual)))


def _fully_defined(shape: Shape) -> bool:
    return shape is not None and all(d is not None for d in shape)


def _sizes(shape: Shape) -> list[int]:
    """A fully defined shape's sizes."""
    return [int(d) for d in shape or () if d is not None]


class TensorArrayValue:
    """The elements of one TensorArray (None where not written) and how it may change."""

    shape = ()
    """The flow is a float32 scalar in the graph, as in TF1; loops check loop variables' shapes."""
    stays_on_host = True
    """The executor hands it to a kernel as it is, never copied to a device (it holds host arrays)."""

    def __init__(self, name: str, dtype: Any, elements: Sequence[Optional[Any]], dynamic_size: bool,
                 element_shape: Shape, infer_shape: bool, aggregate: bool = False,
                 clear_after_read: bool = False, cleared: frozenset[int] = frozenset()) -> None:
        self.name = name
        self.dtype = np.dtype(dtype)
        self.elements = tuple(elements)
        self.dynamic_size = dynamic_size
        self.element_shape = element_shape
        self.infer_shape = infer_shape
        self.aggregate = aggregate
        """A gradient array: a second write to an index adds to it instead of failing."""
        self.clear_after_read = clear_after_read
        self.cleared = set(cleared)
        """Indices read once already (``clear_after_read``): a second read or a write fails, as in TF1.
        The only state a read changes; a gradient pass's recomputing reads leave it alone."""

    def _replace(self, elements: Sequence[Optional[Any]], element_shape: Shape) -> "TensorArrayValue":
        return TensorArrayValue(self.name, self.dtype, elements, self.dynamic_size, element_shape,
                                self.infer_shape, self.aggregate, self.clear_after_read, frozenset(self.cleared))

    @property
    def size(self) -> int:
        return len(self.elements)

    def written(self, values: dict[int, Any], what: str = "write to") -> "TensorArrayValue":
        """A new value with ``values`` (index -> array) written."""
        elements = list(self.elements)
        shape = self.element_shape
        for index, value in values.items():
            if index < 0 or (index >= len(elements) and not self.dynamic_size):
                raise errors.InvalidArgumentError(
                    None, None, f"TensorArray {self.name}: Tried to {what} index {index} but array is not "
                    f"resizeable and size is: {len(elements)}")
            if index >= len(elements):
                elements.extend([None] * (index + 1 - len(elements)))
            array = np.asarray(value)
            if array.dtype != self.dtype:
                raise errors.InvalidArgumentError(
                    None, None, f"TensorArray {self.name}: Could not write to TensorArray index {index} because "
                    f"the value dtype is {array.dtype.name} but the TensorArray dtype is {self.dtype.name}")
            if self.infer_shape or self.element_shape is not None:
                if not _compatible(shape, array.shape):
                    raise errors.InvalidArgumentError(
                        None, None, f"TensorArray {self.name}: Could not write to TensorArray index {index} "
                        f"because the value shape is {_shown(array.shape)} which is incompatible with the "
                        f"TensorArray's inferred element shape: {_shown(shape)} (consider setting "
                        "infer_shape=False).")
                if self.infer_shape:
                    shape = tuple(array.shape)
            if index in self.cleared:
                raise errors.InvalidArgumentError(
                    None, None, f"TensorArray {self.name}: Could not write to TensorArray index {index} because "
                    "it has already been read.")
            previous = elements[index]
            if previous is not None:
                if not self.aggregate:
                    raise errors.InvalidArgumentError(
                        None, None, f"TensorArray {self.name}: Could not write to TensorArray index {index} "
                        "because it has already been written to.")
                array = previous + array
            elements[index] = array
        return self._replace(elements, shape)

    def without(self, indices: Sequence[int]) -> "TensorArrayValue":
        """A new value with the elements at ``indices`` unwritten (a write's gradient passed on)."""
        elements = list(self.elements)
        for index in indices:
            if 0 <= index < len(elements):
                elements[index] = None
        return self._replace(elements, self.element_shape)

    def element(self, index: int, clear: bool = False) -> Any:
        """The element at ``index``; zeros when not written and its shape is known (as TF1).
        ``clear``: a forward read of a ``clear_after_read`` array, after which the element is gone."""
        if index < 0 or index >= len(self.elements):
            raise errors.InvalidArgumentError(
                None, None, f"Tried to read from index {index} but array size is: {len(self.elements)}")
        if index in self.cleared and clear:
            raise errors.InvalidArgumentError(
                None, None, f"TensorArray {self.name}: Could not read index {index} twice because it was cleared "
                "after a previous read (perhaps try setting clear_after_read = false?).")
        if clear and self.clear_after_read:
            self.cleared.add(index)
        value = self.elements[index]
        if value is not None:
            return value
        if not _fully_defined(self.element_shape):
            raise errors.InvalidArgumentError(
                None, None, f"TensorArray {self.name}: Could not read from TensorArray index {index}.  "
                f"Furthermore, the element shape is not fully defined: {_shown(self.element_shape)}.  "
                "If you set the full element_shape property on the forward TensorArray, the proper all-zeros "
                "tensor will be returned instead of incurring this error.")
        return np.zeros(_sizes(self.element_shape), dtype=self.dtype)

    def stacked(self, indices: Sequence[int], clear: bool = False, static_shape: Shape = None) -> Any:
        """The elements at ``indices`` stacked on a new first axis (gather, stack); with none, an
        empty array of the element shape, or else of ``static_shape`` (known when the op was built)."""
        if not indices:
            shape = self.element_shape if _fully_defined(self.element_shape) else static_shape
            if not _fully_defined(shape):
                raise errors.UnimplementedError(
                    None, None, f"TensorArray has size zero, but element shape {_shown(self.element_shape)} is "
                    "not fully defined. Currently only static shapes are supported when packing zero-size "
                    "TensorArrays.")
            return np.zeros([0, *_sizes(shape)], dtype=self.dtype)
        values = [self.element(i, clear) for i in indices]
        for i, value in zip(indices[1:], values[1:]):
            if value.shape != values[0].shape:
                raise errors.InvalidArgumentError(
                    None, None, f"TensorArray has inconsistent shapes.  Index {indices[0]} has shape: "
                    f"{_shown(values[0].shape)} but index {i} has shape: {_shown(value.shape)}")
        return np.stack(values)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """``zero + value`` (numpy's or a device's zero, the gradient ZerosLike gives a flow) is ``value``."""
        if ufunc is np.add and method == "__call__" and len(inputs) == 2 and not kwargs:
            return inputs[0] + inputs[1] if isinstance(inputs[0], TensorArrayValue) else inputs[1] + inputs[0]
        return NotImplemented

    def __add__(self, other: Any) -> "TensorArrayValue":
        """The sum of two gradients of one flow (``tf.gradients`` adds partial gradients)."""
        if not isinstance(other, TensorArrayValue):
            if getattr(other, "shape", None) == ():
                return self  # only a zero gradient of a flow is a scalar: ZerosLike's
            return NotImplemented
        total = TensorArrayValue(self.name, self.dtype, [], True, self.element_shape, False, aggregate=True)
        for value in (self, other):
            total = total.written({i: e for i, e in enumerate(value.elements) if e is not None})
        if total.size < max(self.size, other.size):
            total = total._replace([*total.elements, *[None] * (max(self.size, other.size) - total.size)],
                                   total.element_shape)
        return total

    __radd__ = __add__

    def __repr__(self) -> str:
        return f"TensorArrayValue({self.name!r}, size={self.size}, dtype={self.dtype.name})"


def gradient_of(value: Any, like: TensorArrayValue) -> TensorArrayValue:
    """``value`` (a flow's gradient: a TensorArrayValue or a zero) as a gradient array sized as ``like``."""
    if isinstance(value, TensorArrayValue):
        return value
    return TensorArrayValue(like.name + "_grad", like.dtype, [None] * like.size, True, like.element_shape,
                            False, aggregate=True)


def _forward(k: context.KernelContext, value: Any) -> TensorArrayValue:
    if not isinstance(value, TensorArrayValue):
        raise errors.InvalidArgumentError(
            None, None, f"{k.name}: expected the flow of a TensorArray, got {type(value).__name__}")
    return value


def _index(value: Any) -> int:
    return int(np.asarray(value))


def _indices(value: Any) -> list[int]:
    array = np.asarray(value)
    if array.ndim != 1:
        raise errors.InvalidArgumentError(None, None, f"indices must be a vector, got shape {_shown(array.shape)}")
    return [int(i) for i in array]


@register_kernel("TensorArrayNew", host_only=True)
def _new(k: context.KernelContext, step: context.StepContext, size: Any) -> Any:
    count = _index(size)
    if count < 0:
        raise errors.InvalidArgumentError(None, None, f"TensorArray size must be >= 0, got {count}")
    shape = k.attrs["element_shape"]
    return TensorArrayValue(k.attrs["tensor_array_name"] or k.name, dtypes.as_dtype(k.attrs["dtype"]).as_numpy_dtype,
                            [None] * count, k.attrs["dynamic_size"], None if shape is None else tuple(shape),
                            k.attrs["infer_shape"], clear_after_read=k.attrs["clear_after_read"])


@register_kernel("TensorArrayWrite", host_only=True)
def _write(k: context.KernelContext, step: context.StepContext, flow: Any, index: Any, value: Any) -> Any:
    return _forward(k, flow).written({_index(index): value})


def _clears(step: context.StepContext) -> bool:
    """Whether reads in this step clear what they read: not when a gradient pass recomputes them."""
    return not step.recompute


@register_kernel("TensorArrayRead", host_only=True)
def _read(k: context.KernelContext, step: context.StepContext, flow: Any, index: Any) -> Any:
    return _forward(k, flow).element(_index(index), _clears(step))


@register_kernel("TensorArrayGather", host_only=True)
def _gather(k: context.KernelContext, step: context.StepContext, flow: Any, indices: Any) -> Any:
    return _forward(k, flow).stacked(_indices(indices), _clears(step), k.attrs.get("element_shape"))


@register_kernel("TensorArrayScatter", host_only=True)
def _scatter(k: context.KernelContext, step: context.StepContext, flow: Any, indices: Any, value: Any) -> Any:
    array = _forward(k, flow)
    where = _indices(indices)
    value = np.asarray(value)
    if value.ndim == 0 or value.shape[0] != len(where):
        raise errors.InvalidArgumentError(
            None, None, f"Expected len(indices) == values.shape[0], but saw: {len(where)} vs. "
            f"{value.shape[0] if value.ndim else 'a scalar'}")
    if where and not array.dynamic_size and max(where) >= array.size:
        raise errors.InvalidArgumentError(
            None, None, f"Max scatter index must be < array size ({max(where)} vs. {array.size})")
    return array.written({i: value[n] for n, i in enumerate(where)}, what="scatter to")


@register_kernel("TensorArrayConcat", host_only=True)
def _concat(k: context.KernelContext, step: context.StepContext, flow: Any) -> Any:
    array = _forward(k, flow)
    values = [array.element(i, _clears(step)) for i in range(array.size)]
    for i, value in enumerate(values):
        if value.ndim == 0:
            raise errors.InvalidArgumentError(
                None, None, f"Concat saw a scalar shape at index {i} but requires at least vectors.")
        if value.shape[1:] != values[0].shape[1:]:
            raise errors.InvalidArgumentError(
                None, None, f"TensorArray has inconsistent shapes.  Index 0 has (excepting dimension 0) shape: "
                f"{_shown(values[0].shape[1:])} but index {i} has (excepting dimension 0) shape: "
                f"{_shown(value.shape[1:])}")
    lengths = np.array([v.shape[0] for v in values], dtype=np.int64)
    if not values:
        shape = array.element_shape
        if shape is None or len(shape) < 1 or not _fully_defined(shape[1:]):
            raise errors.UnimplementedError(
                None, None, f"TensorArray has size zero, but element shape {_shown(shape)} is not fully defined. "
                "Currently only static shapes are supported when concatenating zero-size TensorArrays.")
        return np.zeros([0, *_sizes(shape[1:])], dtype=array.dtype), lengths
    return np.concatenate(values), lengths


def _split_points(value: Any, lengths: Any) -> list[int]:
    sizes = [int(n) for n in np.asarray(lengths).reshape(-1)]
    if value.ndim == 0:
        raise errors.InvalidArgumentError(None, None, "Expected value to be at least a vector, but received shape: []")
    if any(n < 0 for n in sizes) or sum(sizes) != value.shape[0]:
        raise errors.InvalidArgumentError(
            None, None, f"Expected sum of lengths to be equal to values.shape[0], but sum of lengths is "
            f"{sum(sizes)} and value's shape is: {_shown(value.shape)}")
    return sizes


@register_kernel("TensorArraySplit", host_only=True)
def _split(k: context.KernelContext, step: context.StepContext, flow: Any, value: Any, lengths: Any) -> Any:
    array = _forward(k, flow)
    value = np.asarray(value)
    sizes = _split_points(value, lengths)
    if len(sizes) != array.size and not array.dynamic_size:
        raise errors.InvalidArgumentError(
            None, None, f"TensorArray's size is not equal to the size of lengths ({array.size} vs. {len(sizes)}), "
            "and the TensorArray is not marked as dynamically resizeable")
    starts = np.cumsum([0, *sizes])
    return array.written({i: value[starts[i]:starts[i + 1]] for i in range(len(sizes))})


@register_kernel("TensorArraySize", host_only=True)
def _size(k: context.KernelContext, step: context.StepContext, flow: Any) -> Any:
    return np.asarray(_forward(k, flow).size, dtype=np.int32)


@register_kernel("TensorArrayClose", host_only=True)
def _close(k: context.KernelContext, step: context.StepContext, flow: Any) -> Any:
    _forward(k, flow)
    return None


# ---------------------------------------------------------------- gradients

def _part(grad: Any, index: int, like: Any) -> Any:
    """The gradient of element ``index``: what ``grad`` holds there, else zeros shaped as ``like``."""
    if isinstance(grad, TensorArrayValue) and 0 <= index < grad.size and grad.elements[index] is not None:
        return grad.elements[index]
    return np.zeros(np.shape(like), dtype=np.asarray(like).dtype)


def _passed_on(grad: Any, indices: Sequence[int]) -> Any:
    return grad.without(indices) if isinstance(grad, TensorArrayValue) else grad


@register_kernel("TensorArrayWriteGrad", host_only=True)
def _write_grad(k: context.KernelContext, step: context.StepContext, grad: Any, index: Any, value: Any) -> Any:
    i = _index(index)
    return _passed_on(grad, [i]), _part(grad, i, value)


@register_kernel("TensorArrayReadGrad", host_only=True)
def _read_grad(k: context.KernelContext, step: context.StepContext, flow: Any, index: Any, grad: Any) -> Any:
    array = _forward(k, flow)
    return gradient_of(None, array).written({_index(index): np.asarray(grad, dtype=array.dtype)})


@register_kernel("TensorArrayGatherGrad", host_only=True)
def _gather_grad(k: context.KernelContext, step: context.StepContext, flow: Any, indices: Any, grad: Any) -> Any:
    array = _forward(k, flow)
    result = gradient_of(None, array)
    grad = np.asarray(grad, dtype=array.dtype)
    for n, i in enumerate(_indices(indices)):
        result = result.written({i: grad[n]})
    return result


@register_kernel("TensorArrayScatterGrad", host_only=True)
def _scatter_grad(k: context.KernelContext, step: context.StepContext, grad: Any, indices: Any, value: Any) -> Any:
    where = _indices(indices)
    value = np.asarray(value)
    parts = [_part(grad, i, value[n]) for n, i in enumerate(where)]
    stacked = np.stack(parts) if parts else np.zeros_like(value)
    return _passed_on(grad, where), stacked


@register_kernel("TensorArrayConcatGrad", host_only=True)
def _concat_grad(k: context.KernelContext, step: context.StepContext, flow: Any, lengths: Any, grad: Any) -> Any:
    array = _forward(k, flow)
    grad = np.asarray(grad, dtype=array.dtype)
    starts = np.cumsum([0, *[int(n) for n in np.asarray(lengths)]])
    return gradient_of(None, array).written({i: grad[starts[i]:starts[i + 1]] for i in range(len(starts) - 1)})


@register_kernel("TensorArraySplitGrad", host_only=True)
def _split_grad(k: context.KernelContext, step: context.StepContext, grad: Any, value: Any, lengths: Any) -> Any:
    value = np.asarray(value)
    sizes = [int(n) for n in np.asarray(lengths).reshape(-1)]
    starts = np.cumsum([0, *sizes])
    parts = [_part(grad, i, value[starts[i]:starts[i + 1]]) for i in range(len(sizes))]
    return _passed_on(grad, range(len(sizes))), np.concatenate(parts) if parts else np.zeros_like(value)
