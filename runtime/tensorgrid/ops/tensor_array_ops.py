"""``tf.TensorArray`` with TF1's graph-mode API, and the gradients of its ops side by side.

A TensorArray is a Python object around its ``flow``, a float32 scalar tensor as in TF1,
whose value at run time is the whole array (``kernels/tensor_array_kernels.py``). Every
op takes the flow; an op that changes the array (write, scatter, unstack, split) returns
a new TensorArray carrying the new flow, so the array threads through ``tf.while_loop``
(which passes TensorArrays as their flows) and through ``tf.gradients``: the gradient of a
flow is a gradient array whose writes to one index add up, as TF's TensorArrayGrad.
"""

from __future__ import annotations

import contextlib
from typing import Any, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import op_util

_FLOW = dtypes.float32
"""The flow's dtype in the graph (TF1's); only its run-time value holds the elements."""

for _op_type in ("TensorArrayNew", "TensorArrayWrite", "TensorArrayRead", "TensorArrayGather", "TensorArrayScatter",
                 "TensorArrayConcat", "TensorArraySplit", "TensorArraySize", "TensorArrayWriteGrad",
                 "TensorArrayReadGrad", "TensorArrayGatherGrad", "TensorArrayScatterGrad", "TensorArrayConcatGrad",
                 "TensorArraySplitGrad"):
    op_registry.register_op(_op_type)
op_registry.register_op("TensorArrayClose", stateful=True)
for _op_type in ("TensorArrayNew", "TensorArraySize", "TensorArrayClose", "TensorArrayWriteGrad",
                 "TensorArrayReadGrad", "TensorArrayGatherGrad", "TensorArrayScatterGrad", "TensorArrayConcatGrad",
                 "TensorArraySplitGrad"):
    op_registry.NotDifferentiable(_op_type)


class TensorArray:
    """A list of tensors of one dtype that a graph writes and reads by index (TF1's ``tf.TensorArray``).

    ``write``, ``scatter``, ``unstack`` and ``split`` return a new TensorArray; use it, not
    the old one, for what follows (as in TF1, where the returned flow orders the ops).
    """

    def __init__(self, dtype: Any, size: Any = None, dynamic_size: Optional[bool] = None,
                 clear_after_read: Optional[bool] = None, tensor_array_name: Optional[str] = None,
                 handle: Any = None, flow: Any = None, infer_shape: bool = True, element_shape: Any = None,
                 colocate_with_first_write_call: bool = True, name: Optional[str] = None) -> None:
        self._dtype = dtypes.as_dtype(dtype).base_dtype
        if handle is not None:
            raise ValueError("tensorgrid's TensorArray has no handle: its flow carries the array; pass flow= "
                             "(the flow of another TensorArray of this dtype) instead of handle=")
        self._dynamic_size = bool(dynamic_size)
        self._clear_after_read = True if clear_after_read is None else bool(clear_after_read)
        self._infer_shape = bool(infer_shape)
        self._element_shape = [tensor_shape.as_shape(element_shape) if element_shape is not None
                               else tensor_shape.unknown_shape()]
        """One shape shared by the TensorArrays of one chain, refined by writes when ``infer_shape``."""
        self._creator: Optional[graph_lib.Operation] = None
        """The op that made the array; later ops in its graph run beside it, as TF1 colocates them."""
        if flow is not None:
            if size is not None:
                raise ValueError("Pass either size (a new TensorArray) or flow (an existing one), not both")
            self._flow = op_util.to_tensor(flow)
            if self._flow.dtype.base_dtype != _FLOW or self._flow.op.type not in _FLOW_PRODUCERS:
                raise TypeError(f"flow must be the flow of a TensorArray, got {self._flow!r}")
            return
        if size is None:
            raise ValueError("Size must be provided if handle is not provided")
        size_t = op_util.to_tensor(size, dtype=dtypes.int32, name="size")
        if size_t.shape.ndims not in (None, 0):
            raise ValueError(f"size must be a scalar, got shape {size_t.shape}")
        if tensor_array_name is not None and not isinstance(tensor_array_name, str):
            raise TypeError(f"tensor_array_name must be a string, got {tensor_array_name!r}")
        self._flow = op_util.make_tensor(
            "TensorArrayNew", [size_t], _FLOW, [], name or "TensorArray",
            {"dtype": self._dtype.name, "dynamic_size": self._dynamic_size, "clear_after_read": self._clear_after_read,
             "element_shape": self._element_shape[0].as_tuple_or_none(), "infer_shape": self._infer_shape,
             "tensor_array_name": tensor_array_name or ""})
        self._creator = self._flow.op

    def _beside_creator(self) -> Any:
        """Colocates the ops created inside with the array's creator, when in its graph."""
        if self._creator is None or self._flow.graph is not self._creator.graph:
            return contextlib.nullcontext()
        return self._creator.graph.colocate_with(self._creator)

    @property
    def flow(self) -> graph_lib.Tensor:
        return self._flow

    @property
    def dtype(self) -> dtypes.DType:
        return self._dtype

    @property
    def dynamic_size(self) -> bool:
        return self._dynamic_size

    @property
    def element_shape(self) -> tensor_shape.TensorShape:
        return self._element_shape[0]

    def _merge_element_shape(self, shape: tensor_shape.TensorShape) -> None:
        if not shape.is_compatible_with(self.element_shape):
            raise ValueError(f"Inconsistent shapes: saw {shape} but expected {self.element_shape} "
                             "(consider setting infer_shape=False)")
        if self._infer_shape:
            self._element_shape[0] = self.element_shape.merge_with(shape)

    def _value(self, value: Any, what: str) -> graph_lib.Tensor:
        if op_util.is_tensor_like(value):
            t = op_util.to_tensor(value)
            if t.dtype.base_dtype != self._dtype:
                raise TypeError(f"TensorArray {what}: the value has dtype {t.dtype.base_dtype.name}, but the "
                                f"TensorArray holds {self._dtype.name}")
            return t
        return op_util.to_tensor(value, dtype=self._dtype)

    def _make_op(self, op_type: str, inputs: list[graph_lib.Tensor], specs: list[tuple[dtypes.DType, Any]],
                 name: str) -> graph_lib.Operation:
        with self._beside_creator():
            return op_util.make_op(op_type, inputs, specs, name=name)

    def _make_tensor(self, op_type: str, inputs: list[graph_lib.Tensor], dtype: dtypes.DType, shape: Any,
                     name: str) -> graph_lib.Tensor:
        return self._make_op(op_type, inputs, [(dtype, shape)], name).outputs[0]

    def identity(self) -> "TensorArray":
        return with_flow(self, array_ops.identity(self._flow))

    def read(self, index: Any, name: Optional[str] = None) -> graph_lib.Tensor:
        index_t = op_util.to_tensor(index, dtype=dtypes.int32)
        return self._make_tensor("TensorArrayRead", [self._flow, index_t], self._dtype, self.element_shape,
                                   name or "TensorArrayReadV3")

    def write(self, index: Any, value: Any, name: Optional[str] = None) -> "TensorArray":
        value_t = self._value(value, "write")
        self._merge_element_shape(value_t.shape)
        index_t = op_util.to_tensor(index, dtype=dtypes.int32)
        flow = self._make_tensor("TensorArrayWrite", [self._flow, index_t, value_t], _FLOW, [],
                                   name or "TensorArrayWrite")
        return with_flow(self, flow)

    def gather(self, indices: Any, name: Optional[str] = None) -> graph_lib.Tensor:
        indices_t = op_util.to_tensor(indices, dtype=dtypes.int32)
        if indices_t.shape.ndims not in (None, 1):
            raise ValueError(f"indices must be a vector, got shape {indices_t.shape}")
        count = indices_t.shape[0] if indices_t.shape.ndims == 1 else None
        shape = tensor_shape.TensorShape([count]).concatenate(self.element_shape)
        # The element shape known now gives the shape of an empty result (TF's element_shape attr).
        with self._beside_creator():
            return op_util.make_op("TensorArrayGather", [self._flow, indices_t], [(self._dtype, shape)],
                                   name=name or "TensorArrayGatherV3",
                                   attrs={"element_shape": self.element_shape.as_tuple_or_none()}).outputs[0]

    def stack(self, name: Optional[str] = None) -> graph_lib.Tensor:
        return self.gather(math_ops.range(0, self.size()), name=name or "TensorArrayStack")

    def scatter(self, indices: Any, value: Any, name: Optional[str] = None) -> "TensorArray":
        indices_t = op_util.to_tensor(indices, dtype=dtypes.int32)
        value_t = self._value(value, "scatter")
        if value_t.shape.ndims is not None:
            if value_t.shape.ndims == 0:
                raise ValueError("The value to scatter into a TensorArray must be at least a vector")
            self._merge_element_shape(tensor_shape.TensorShape(value_t.shape.as_list()[1:]))
        flow = self._make_tensor("TensorArrayScatter", [self._flow, indices_t, value_t], _FLOW, [],
                                   name or "TensorArrayScatter")
        return with_flow(self, flow)

    def unstack(self, value: Any, name: Optional[str] = None) -> "TensorArray":
        value_t = self._value(value, "unstack")
        count = indexing_ops.gather(array_ops.shape(value_t), 0)
        return self.scatter(math_ops.range(0, count), value_t, name=name or "TensorArrayUnstack")

    def concat(self, name: Optional[str] = None) -> graph_lib.Tensor:
        shape = tensor_shape.unknown_shape()
        if self.element_shape.ndims is not None and self.element_shape.ndims > 0:
            shape = tensor_shape.TensorShape([None]).concatenate(self.element_shape.as_list()[1:])
        op = self._make_op("TensorArrayConcat", [self._flow], [(self._dtype, shape), (dtypes.int64, [None])],
                             name=name or "TensorArrayConcat")
        return op.outputs[0]

    def split(self, value: Any, lengths: Any, name: Optional[str] = None) -> "TensorArray":
        value_t = self._value(value, "split")
        lengths_t = op_util.to_tensor(lengths, dtype=dtypes.int64)
        if value_t.shape.ndims is not None and value_t.shape.ndims > 0:
            self._merge_element_shape(tensor_shape.TensorShape([None] + value_t.shape.as_list()[1:]))
        flow = self._make_tensor("TensorArraySplit", [self._flow, value_t, lengths_t], _FLOW, [],
                                   name or "TensorArraySplit")
        return with_flow(self, flow)

    def size(self, name: Optional[str] = None) -> graph_lib.Tensor:
        return self._make_tensor("TensorArraySize", [self._flow], dtypes.int32, [], name or "TensorArraySizeV3")

    def close(self, name: Optional[str] = None) -> graph_lib.Operation:
        return self._make_op("TensorArrayClose", [self._flow], [], name=name or "TensorArrayCloseV3")

    def __repr__(self) -> str:
        return f"<tf.TensorArray {self._flow.op.name} dtype={self._dtype.name}>"


def with_flow(array: TensorArray, flow: graph_lib.Tensor) -> TensorArray:
    """``array`` at a later flow (a loop's output, a function's argument); the two share the
    inferred element shape."""
    result = TensorArray.__new__(TensorArray)
    result.__dict__.update(array.__dict__)
    result._flow = flow
    return result


_FLOW_PRODUCERS = frozenset({"TensorArrayNew", "TensorArrayWrite", "TensorArrayScatter", "TensorArraySplit",
                             "Identity", "While", "If", "_Arg"})
"""Op types whose float32 output may be a TensorArray's flow (checked when a flow is passed in)."""


def _grad_op(op_type: str, inputs: list[graph_lib.Tensor], specs: list[tuple[dtypes.DType, Any]],
             op: graph_lib.Operation) -> graph_lib.Operation:
    with op.graph.colocate_with(op):  # beside the array, like the forward op
        return op_util.make_op(op_type, inputs, specs, name=op_type, graph=op.graph)


@op_registry.RegisterGradient("TensorArrayWrite")
def _write_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    _, index, value = op.inputs
    g = _grad_op("TensorArrayWriteGrad", [grad, index, value], [(_FLOW, []), (value.dtype.base_dtype, value.shape)], op)
    return [g.outputs[0], None, g.outputs[1]]


@op_registry.RegisterGradient("TensorArrayRead")
def _read_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    flow, index = op.inputs
    return [_grad_op("TensorArrayReadGrad", [flow, index, grad], [(_FLOW, [])], op).outputs[0], None]


@op_registry.RegisterGradient("TensorArrayGather")
def _gather_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    flow, indices = op.inputs
    return [_grad_op("TensorArrayGatherGrad", [flow, indices, grad], [(_FLOW, [])], op).outputs[0], None]


@op_registry.RegisterGradient("TensorArrayScatter")
def _scatter_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    _, indices, value = op.inputs
    g = _grad_op("TensorArrayScatterGrad", [grad, indices, value],
                 [(_FLOW, []), (value.dtype.base_dtype, value.shape)], op)
    return [g.outputs[0], None, g.outputs[1]]


@op_registry.RegisterGradient("TensorArrayConcat")
def _concat_grad(op: graph_lib.Operation, grad: Any, lengths_grad: Any) -> list[Any]:
    flow = op.inputs[0]
    return [_grad_op("TensorArrayConcatGrad", [flow, op.outputs[1], grad], [(_FLOW, [])], op).outputs[0]]


@op_registry.RegisterGradient("TensorArraySplit")
def _split_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    _, value, lengths = op.inputs
    g = _grad_op("TensorArraySplitGrad", [grad, value, lengths],
                 [(_FLOW, []), (value.dtype.base_dtype, value.shape)], op)
    return [g.outputs[0], g.outputs[1], None]
