"""``tf.Variable`` (TF1 reference variables) and the initializer helpers.

A Variable is three ops: the ``VariableV2`` op that owns the buffer, an ``Assign``
from the initial value (its initializer, colocated with it) and an ``Identity``
snapshot named ``<name>/read`` that consumers use. Variables join the global and
trainable collections so that optimizers and savers find them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import op_registry
from tensorgrid.framework import tensor_conversion
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import control_flow_ops
from tensorgrid.ops import op_util
from tensorgrid.ops import state_ops

GraphKeys = graph_lib.GraphKeys


@dataclasses.dataclass
class SaveSliceInfo:
    """Where a variable sits inside a larger logical variable (one part of a partitioned variable)."""

    full_name: str
    """The logical variable's name, e.g. ``emb`` for the part ``emb/part_1``."""
    full_shape: list[int]
    var_offset: list[int]
    """This part's first index along every dimension of the logical variable."""
    var_shape: list[int]


class Variable:
    """A mutable tensor living in a resource container on its device."""

    def __init__(
        self,
        initial_value: Any = None,
        trainable: Optional[bool] = None,
        collections: Optional[Sequence[str]] = None,
        validate_shape: bool = True,
        caching_device: Any = None,
        name: Optional[str] = None,
        variable_def: Any = None,
        dtype: Any = None,
        expected_shape: Any = None,
        import_scope: Any = None,
        constraint: Any = None,
        use_resource: Any = None,
        synchronization: Any = None,
        aggregation: Any = None,
        shape: Any = None,
    ) -> None:
        if variable_def is not None:
            self._init_from_def(variable_def, import_scope)
            return
        if initial_value is None:
            raise ValueError("initial_value must be specified (a value, a Tensor, or a callable returning one)")
        trainable = True if trainable is None else bool(trainable)
        if collections is None:
            collections = [GraphKeys.GLOBAL_VARIABLES]
        collections = list(collections)
        if trainable and GraphKeys.TRAINABLE_VARIABLES not in collections:
            collections.append(GraphKeys.TRAINABLE_VARIABLES)
        init_from_fn = callable(initial_value)
        graph = graph_lib.get_default_graph()
        self._graph = graph
        self._trainable = trainable
        self._constraint = constraint
        with graph.name_scope(name or "Variable") as scope_name:
            initializer_ops: list[graph_lib.Operation] = []
            if init_from_fn:
                first_new_op = len(graph._ops)
                with graph.name_scope("Initializer"), graph.device(None):
                    init = initial_value()
                    self._initial_value = op_util.to_tensor(init, dtype=dtype, name="initial_value")
                initializer_ops = graph._ops[first_new_op:]
            else:
                self._initial_value = op_util.to_tensor(initial_value, dtype=dtype, name="initial_value")
            value_shape = self._initial_value.shape
            if shape is not None:
                value_shape = tensor_shape.as_shape(shape)
            elif not validate_shape:
                value_shape = tensor_shape.unknown_shape()
            if validate_shape and not value_shape.is_fully_defined():
                raise ValueError(
                    f"initial_value of variable {scope_name[:-1]!r} must have a fully defined shape, "
                    f"got {value_shape}; pass validate_shape=False to allow a shape known only at run time"
                )
            self._variable = state_ops.variable_op(
                value_shape, self._initial_value.dtype.base_dtype, name=scope_name,
            )
            # As in TF1, the initializer runs where the variable lives (on its PS), not
            # where the device scope would put it: colocate its device-less ops.
            for op in initializer_ops:
                if not op.device and "_class" not in op._attrs:
                    op._set_attr("_class", [f"loc:@{self._variable.op.name}"])
            with graph.colocate_with(self._variable.op):
                self._initializer_op = state_ops.assign(
                    self._variable, self._initial_value, validate_shape=validate_shape, name="Assign"
                ).op
            with graph.colocate_with(self._variable.op):
                self._snapshot = array_ops.identity(self._variable, name="read")
        graph.add_to_collections(collections, self)
        self._save_slice_info: Optional[SaveSliceInfo] = None

    def _init_from_def(self, variable_def: dict[str, Any], import_scope: Optional[str]) -> None:
        """The Variable whose ops already are in the default graph (``import_meta_graph``)."""
        graph = graph_lib.get_default_graph()
        prefix = f"{import_scope}/" if import_scope else ""
        try:
            self._variable = graph.get_tensor_by_name(prefix + variable_def["variable_name"])
            self._initializer_op = graph.get_operation_by_name(prefix + variable_def["initializer_name"])
            self._snapshot = graph.get_tensor_by_name(prefix + variable_def["snapshot_name"])
            self._initial_value = graph.get_tensor_by_name(prefix + variable_def["initial_value_name"])
        except (KeyError, TypeError) as e:
            raise ValueError(f"variable_def {variable_def!r} does not name ops of the default graph: {e}") from None
        self._graph = graph
        self._trainable = bool(variable_def.get("trainable", True))
        self._constraint = None
        info = variable_def.get("save_slice_info")
        self._save_slice_info = None if info is None else SaveSliceInfo(
            prefix + info["full_name"], list(info["full_shape"]), list(info["var_offset"]), list(info["var_shape"]))

    def to_variable_def(self) -> dict[str, Any]:
        """The names of this variable's ops (TF's ``VariableDef``), for ``export_meta_graph``."""
        info = self._save_slice_info
        return {"variable_name": self._variable.name, "initializer_name": self._initializer_op.name,
                "snapshot_name": self._snapshot.name, "initial_value_name": self._initial_value.name,
                "trainable": self._trainable,
                "save_slice_info": None if info is None else dataclasses.asdict(info)}

    # -------------------------------------------------------------- identity
    @property
    def name(self) -> str:
        return self._variable.name

    @property
    def op(self) -> graph_lib.Operation:
        return self._variable.op

    @property
    def graph(self) -> graph_lib.Graph:
        return self._graph

    @property
    def device(self) -> str:
        return self._variable.device

    @property
    def dtype(self) -> dtypes.DType:
        return self._variable.dtype

    @property
    def shape(self) -> tensor_shape.TensorShape:
        return self._variable.shape

    def get_shape(self) -> tensor_shape.TensorShape:
        return self._variable.shape

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def constraint(self) -> Any:
        return self._constraint

    @property
    def initializer(self) -> graph_lib.Operation:
        return self._initializer_op

    @property
    def initial_value(self) -> graph_lib.Tensor:
        return self._initial_value

    def initialized_value(self) -> graph_lib.Tensor:
        """The value after initialization, for initializing other variables from this one."""
        from tensorgrid.ops import math_ops

        with self._graph.control_dependencies([self._initializer_op]):
            return math_ops.cast(array_ops.identity(self._variable), self.dtype.base_dtype)

    def value(self) -> graph_lib.Tensor:
        return self._snapshot

    def read_value(self) -> graph_lib.Tensor:
        return array_ops.identity(self._variable, name="read")

    def _ref(self) -> graph_lib.Tensor:
        return self._variable

    def _as_graph_element(self) -> graph_lib.Tensor:
        return self._variable

    # -------------------------------------------------------------- updates
    def assign(self, value: Any, use_locking: bool = False, name: Optional[str] = None, read_value: bool = True) -> Any:
        result = state_ops.assign(self._variable, value, use_locking=use_locking, name=name)
        return result if read_value else result.op

    def assign_add(self, delta: Any, use_locking: bool = False, name: Optional[str] = None, read_value: bool = True) -> Any:
        result = state_ops.assign_add(self._variable, delta, use_locking=use_locking, name=name)
        return result if read_value else result.op

    def assign_sub(self, delta: Any, use_locking: bool = False, name: Optional[str] = None, read_value: bool = True) -> Any:
        result = state_ops.assign_sub(self._variable, delta, use_locking=use_locking, name=name)
        return result if read_value else result.op

    def count_up_to(self, limit: int) -> graph_lib.Tensor:
        """Adds one and returns the value before; OutOfRangeError once ``limit`` is reached."""
        return state_ops.count_up_to(self._variable, limit)

    def scatter_add(self, sparse_delta: Any, use_locking: bool = False, name: Optional[str] = None) -> Any:
        """Adds the IndexedSlices ``sparse_delta`` to the rows it names."""
        delta = _as_indexed_slices(sparse_delta, "scatter_add")
        return state_ops.scatter_add(self._variable, delta.indices, delta.values, use_locking=use_locking, name=name)

    def scatter_sub(self, sparse_delta: Any, use_locking: bool = False, name: Optional[str] = None) -> Any:
        """Subtracts the IndexedSlices ``sparse_delta`` from the rows it names."""
        delta = _as_indexed_slices(sparse_delta, "scatter_sub")
        return state_ops.scatter_sub(self._variable, delta.indices, delta.values, use_locking=use_locking, name=name)

    def scatter_update(self, sparse_delta: Any, use_locking: bool = False, name: Optional[str] = None) -> Any:
        """Overwrites the rows named by the IndexedSlices ``sparse_delta`` with its values."""
        delta = _as_indexed_slices(sparse_delta, "scatter_update")
        return state_ops.scatter_update(self._variable, delta.indices, delta.values, use_locking=use_locking,
                                        name=name)

    def _set_save_slice_info(self, save_slice_info: SaveSliceInfo) -> None:
        self._save_slice_info = save_slice_info

    def _get_save_slice_info(self) -> Optional[SaveSliceInfo]:
        return self._save_slice_info

    def eval(self, session: Any = None) -> Any:
        return self._variable.eval(session=session)

    def load(self, value: Any, session: Any = None) -> None:
        """Writes ``value`` into the variable through ``session`` (feeding the initializer)."""
        session = session or graph_lib.get_default_session()
        if session is None:
            raise ValueError("Variable.load needs a session: pass one or use a default session")
        session.run(self._initializer_op, {self._initial_value: value})

    def __repr__(self) -> str:
        return f"<tf.Variable '{self.name}' shape={self.shape} dtype={self.dtype.name}>"

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __iter__(self) -> Any:
        raise TypeError("A tf.Variable is not iterable")

    def __bool__(self) -> bool:
        raise TypeError("Using a tf.Variable as a Python bool is not allowed")


def _as_indexed_slices(value: Any, method: str) -> indexed_slices.IndexedSlices:
    if not isinstance(value, indexed_slices.IndexedSlices):
        raise TypeError(f"Variable.{method} takes a tf.IndexedSlices, got {value!r}")
    return value


def _variable_conversion(value: Variable, dtype: Any = None, name: Optional[str] = None, as_ref: bool = False) -> graph_lib.Tensor:
    return value._ref() if as_ref else value.value()


tensor_conversion.register_tensor_conversion_function(Variable, _variable_conversion)


def _delegate(operator: str) -> Callable[..., Any]:
    def method(self: Variable, *args: Any) -> Any:
        return getattr(self.value(), operator)(*args)

    method.__name__ = operator
    return method


for _operator in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
                  "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__",
                  "__matmul__", "__rmatmul__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__rand__",
                  "__or__", "__ror__", "__neg__", "__abs__", "__invert__", "__getitem__"):
    setattr(Variable, _operator, _delegate(_operator))
Variable.__array_priority__ = 100  # type: ignore[attr-defined]


RefVariable = Variable
Variable.SaveSliceInfo = SaveSliceInfo  # type: ignore[attr-defined] # TF's name for it


# ---------------------------------------------------------------------- collections and initializers

def global_variables(scope: Optional[str] = None) -> list[Variable]:
    return graph_lib.get_default_graph().get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


all_variables = global_variables


def trainable_variables(scope: Optional[str] = None) -> list[Variable]:
    return graph_lib.get_default_graph().get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def local_variables(scope: Optional[str] = None) -> list[Variable]:
    return graph_lib.get_default_graph().get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def model_variables(scope: Optional[str] = None) -> list[Variable]:
    return graph_lib.get_default_graph().get_collection(GraphKeys.MODEL_VARIABLES, scope)


def variables_initializer(var_list: Sequence[Variable], name: str = "init") -> graph_lib.Operation:
    if not var_list:
        return control_flow_ops.no_op(name=name)
    return control_flow_ops.group(*[v.initializer for v in var_list], name=name)


def global_variables_initializer() -> graph_lib.Operation:
    return variables_initializer(global_variables())


initialize_all_variables = global_variables_initializer


def local_variables_initializer() -> graph_lib.Operation:
    return variables_initializer(local_variables(), name="init")


def is_variable_initialized(variable: Variable) -> graph_lib.Tensor:
    return state_ops.is_variable_initialized(variable)


op_registry.register_op("UninitializedVariableNames")
op_registry.NotDifferentiable("UninitializedVariableNames")


def report_uninitialized_variables(var_list: Optional[Sequence[Variable]] = None,
                                   name: str = "report_uninitialized_variables") -> graph_lib.Tensor:
    """A string vector of the names of the variables in ``var_list`` not yet initialized.

    Each check runs next to its variable (on its parameter server); only the booleans
    travel to the task that asks.
    """
    if var_list is None:
        var_list = global_variables() + local_variables()
    graph = graph_lib.get_default_graph()
    with graph.name_scope(name):
        flags = [state_ops.is_variable_initialized(v) for v in var_list]
        names = [v.op.name for v in var_list]
        return op_util.make_tensor("UninitializedVariableNames", flags, dtypes.string, [None], "names",
                                   {"names": names})

