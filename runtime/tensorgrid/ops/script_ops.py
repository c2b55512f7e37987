"""``tf.py_func`` and ``tf.numpy_function``: an op that calls a Python function on numpy arrays.

The function stays in this process (``framework/python_callables.py``); the op holds its
token, this process's id and the output dtypes (``Tout``). Its kernel runs on the CPU of
the task it is placed on, which must be served by this process: a task elsewhere refuses
the partition when it is registered, naming the op and itself (TensorFlow has the same
limit, found later, when the op runs). The outputs' shapes are unknown, as in TF1, and
the op has no gradient. ``stateful=False`` makes a ``PyFuncStateless`` op.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.framework import python_callables
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import op_util

op_registry.register_op("PyFunc", stateful=True)
op_registry.register_op("PyFuncStateless", stateful=False)
op_registry.NotDifferentiable("PyFunc")
op_registry.NotDifferentiable("PyFuncStateless")


def py_func(func: Callable[..., Any], inp: Any, Tout: Any, stateful: bool = True,  # noqa: N803 (TF's name)
            name: Optional[str] = None) -> Union[graph_lib.Tensor, list[graph_lib.Tensor], graph_lib.Operation]:
    """Calls ``func`` on the numpy values of ``inp`` when the op runs, in this process.

    ``Tout`` is a dtype (the result is one tensor) or a list or tuple of dtypes (a list of
    tensors; an empty one gives the op). ``func`` returns one array-like per output (a tuple
    or list of them for several): each must already have its output's dtype (a Python float
    is float64), else the step fails with InvalidArgumentError, as in TensorFlow.
    """
    if not callable(func):
        raise TypeError(f"py_func: func must be callable, got {func!r}")
    if not isinstance(inp, (list, tuple)):
        raise TypeError(f"py_func: inp must be a list or tuple of tensors, got {inp!r}")
    many = isinstance(Tout, (list, tuple))
    out_dtypes = [dtypes.as_dtype(t).base_dtype for t in (Tout if many else [Tout])]
    inputs = [op_util.to_tensor(x) for x in inp]
    attrs = {"token": python_callables.register(func), python_callables.PROCESS_ATTR: python_callables.PROCESS,
             "Tout": [t.name for t in out_dtypes]}
    op_type = "PyFunc" if stateful else "PyFuncStateless"
    graph = op_util.graph_of(*inputs) if inputs else graph_lib.get_default_graph()
    op = op_util.make_op(op_type, inputs, [(t, tensor_shape.unknown_shape()) for t in out_dtypes], name or op_type,
                         attrs, graph=graph)
    if not many:
        return op.outputs[0]
    return list(op.outputs) if out_dtypes else op


def numpy_function(func: Callable[..., Any], inp: Any, Tout: Any, stateful: bool = True,  # noqa: N803
                   name: Optional[str] = None) -> Union[graph_lib.Tensor, list[graph_lib.Tensor], graph_lib.Operation]:
    """``py_func`` under TensorFlow 2's name (``tf.compat.v1.numpy_function``): the same op."""
    return py_func(func, inp, Tout, stateful=stateful, name=name)
