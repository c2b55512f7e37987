"""The dataflow graph: ``Graph``, ``Operation`` and ``Tensor``, with TF1's scopes.

A Graph owns its operations in creation order and the construction-time context
that TF1 programs rely on: name scopes with unique names, device scopes (strings or
functions, merged innermost first), ``colocate_with``, ``container``,
``control_dependencies``, collections, and the graph-level random seed.

Turning Python values into Tensors lives in ``tensor_conversion``, rebuilding a graph
from a GraphDef in ``graph_rebuild``.
"""

from __future__ import annotations

import contextlib
import re
import threading
from typing import Any, Callable, Iterator, Optional, Sequence

from tensorgrid.framework import device as device_lib
from tensorgrid.framework import dtypes
from tensorgrid.framework import graph_def as graph_def_lib
from tensorgrid.framework import op_registry
from tensorgrid.framework import tensor_shape

_VALID_OP_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$")
_VALID_SCOPE_NAME = re.compile(r"^[A-Za-z0-9_.\-/>]*$")


class GraphKeys:
    """Standard collection names (``tf.GraphKeys``)."""

    GLOBAL_VARIABLES = "variables"
    LOCAL_VARIABLES = "local_variables"
    METRIC_VARIABLES = "metric_variables"
    MODEL_VARIABLES = "model_variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    SUMMARIES = "summaries"
    QUEUE_RUNNERS = "queue_runners"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    REGULARIZATION_LOSSES = "regularization_losses"
    LOSSES = "losses"
    SAVERS = "savers"
    GLOBAL_STEP = "global_step"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
    SUMMARY_OP = "summary_op"
    TRAIN_OP = "train_op"
    UPDATE_OPS = "update_ops"
    TABLE_INITIALIZERS = "table_initializer"
    ASSET_FILEPATHS = "asset_filepaths"
    # Backwards-compatible alias, as in TF1.
    VARIABLES = GLOBAL_VARIABLES


class Tensor:
    """One output of an Operation: a symbolic value with a dtype and a static shape."""

    # Keep numpy from treating a Tensor as an array when it is on the right of an operator.
    __array_priority__ = 100

    def __init__(self, op: "Operation", value_index: int, dtype: dtypes.DType, shape: Any) -> None:
        self._op = op
        self._value_index = value_index
        self._dtype = dtype
        self._shape = tensor_shape.as_shape(shape)
        self._consumers: list[Operation] = []

    @property
    def op(self) -> "Operation":
        return self._op

    @property
    def graph(self) -> "Graph":
        return self._op.graph

    @property
    def value_index(self) -> int:
        return self._value_index

    @property
    def dtype(self) -> dtypes.DType:
        return self._dtype

    @property
    def name(self) -> str:
        return f"{self._op.name}:{self._value_index}"

    @property
    def device(self) -> str:
        return self._op.device

    @property
    def shape(self) -> tensor_shape.TensorShape:
        return self._shape

    def get_shape(self) -> tensor_shape.TensorShape:
        return self._shape

    def set_shape(self, shape: Any) -> None:
        """Refines the static shape; raises ValueError if it contradicts what is known."""
        new_shape = tensor_shape.as_shape(shape)
        if not self._shape.is_compatible_with(new_shape):
            raise ValueError(f"Tensor {self.name} has shape {self._shape}, incompatible with {new_shape}")
        self._shape = self._shape.merge_with(new_shape)

    def consumers(self) -> list["Operation"]:
        return list(self._consumers)

    def eval(self, feed_dict: Any = None, session: Any = None) -> Any:
        session = session or get_default_session()
        if session is None:
            raise ValueError("Cannot evaluate tensor using `eval()`: no default session is registered")
        return session.run(self, feed_dict)

    def _as_node_input(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<tf.Tensor '{self.name}' shape={self._shape} dtype={self._dtype.name}>"

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __bool__(self) -> bool:
        raise TypeError(
            "Using a tf.Tensor as a Python bool is not allowed; use `if t is not None:` "
            "to test for existence, or run the graph to get its value"
        )

    def __iter__(self) -> Iterator["Tensor"]:
        raise TypeError("A tf.Tensor is not iterable while the graph is being built")

    @classmethod
    def _override_operator(cls, operator: str, func: Callable[..., Any]) -> None:
        """Lets the ops layer give tensors ``+``, ``*``, ``@`` ... without a layering cycle."""
        setattr(cls, operator, func)


class Operation:
    """A node of the graph: an op type, its inputs, attributes and device."""

    def __init__(
        self,
        graph: "Graph",
        op_type: str,
        name: str,
        inputs: Sequence[Tensor],
        output_specs: Sequence[tuple[dtypes.DType, Any]],
        attrs: Optional[dict[str, Any]] = None,
        control_inputs: Sequence["Operation"] = (),
        device: str = "",
    ) -> None:
        self._graph = graph
        self._type = op_type
        self._name = name
        self._op_def = op_registry.get_op_def(op_type)
        self._inputs = list(inputs)
        self._control_inputs: list[Operation] = []
        for c in control_inputs:
            if c not in self._control_inputs:
                self._control_inputs.append(c)
        self._attrs = dict(attrs or {})
        self._device = device_lib.canonical_name(device)
        self._outputs = [Tensor(self, i, dt, shape) for i, (dt, shape) in enumerate(output_specs)]
        self._control_outputs: list[Operation] = []
        self._id = graph._next_id()
        for t in self._inputs:
            t._consumers.append(self)
        for c in self._control_inputs:
            c._control_outputs.append(self)

    @property
    def graph(self) -> "Graph":
        return self._graph

    @property
    def name(self) -> str:
        return self._name

    @property
    def type(self) -> str:
        return self._type

    @property
    def op_def(self) -> op_registry.OpDef:
        return self._op_def

    @property
    def inputs(self) -> list[Tensor]:
        return list(self._inputs)

    @property
    def outputs(self) -> list[Tensor]:
        return list(self._outputs)

    @property
    def control_inputs(self) -> list["Operation"]:
        return list(self._control_inputs)

    @property
    def device(self) -> str:
        return self._device

    def _set_device(self, device: Any) -> None:
        self._device = device_lib.canonical_name(device)

    def _add_control_input(self, op: "Operation") -> None:
        if op not in self._control_inputs:
            self._control_inputs.append(op)
            op._control_outputs.append(self)
            self._graph._version += 1

    def _add_control_inputs(self, ops: Sequence["Operation"]) -> None:
        for op in ops:
            self._add_control_input(op)

    @property
    def node_def(self) -> graph_def_lib.NodeDef:
        inputs = [t.name for t in self._inputs] + [f"^{c.name}" for c in self._control_inputs]
        return graph_def_lib.NodeDef(
            name=self._name,
            op=self._type,
            inputs=inputs,
            device=self._device,
            attrs=dict(self._attrs),
            output_dtypes=[t.dtype.name for t in self._outputs],
            output_shapes=[t.shape.as_tuple_or_none() for t in self._outputs],
        )

    def get_attr(self, name: str) -> Any:
        try:
            return self._attrs[name]
        except KeyError:
            raise ValueError(f"Operation {self._name!r} ({self._type}) has no attr named {name!r}") from None

    def _set_attr(self, name: str, value: Any) -> None:
        self._attrs[name] = value

    @property
    def attrs(self) -> dict[str, Any]:
        return dict(self._attrs)

    def colocation_groups(self) -> list[str]:
        groups = self._attrs.get("_class")
        return list(groups) if groups else [f"loc:@{self._name}"]

    def run(self, feed_dict: Any = None, session: Any = None) -> None:
        session = session or get_default_session()
        if session is None:
            raise ValueError("Cannot run operation using `run()`: no default session is registered")
        session.run(self, feed_dict)

    def __repr__(self) -> str:
        return f"<tf.Operation '{self._name}' type={self._type}>"


class Graph:
    """A TF1 graph: operations plus the scopes in force while they are created."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._ops_by_name: dict[str, Operation] = {}
        self._ops: list[Operation] = []
        self._names_in_use: dict[str, int] = {}
        self._name_stack = ""
        self._device_function_stack: list[Any] = []
        self._colocation_stack: list[Operation] = []
        self._control_dependencies_stack: list[list[Operation]] = []
        self._container = ""
        self._collections: dict[str, list[Any]] = {}
        self._last_id = 0
        self._version = 0
        self._finalized = False
        self.seed: Optional[int] = None
        self._gradient_override_map: dict[str, str] = {}

    # ------------------------------------------------------------------ identity
    def _next_id(self) -> int:
        self._last_id += 1
        return self._last_id

    @property
    def version(self) -> int:
        """Changes whenever an op is added or rewired; sessions use it to refresh plans."""
        return self._version

    @property
    def finalized(self) -> bool:
        return self._finalized

    def finalize(self) -> None:
        """Makes the graph read-only, as MonitoredTrainingSession does."""
        self._finalized = True

    def _unsafe_unfinalize(self) -> None:
        self._finalized = False

    @contextlib.contextmanager
    def as_default(self) -> Iterator["Graph"]:
        _default_graph_stack.append(self)
        try:
            yield self
        finally:
            _default_graph_stack.remove(self)

    # ------------------------------------------------------------------ op creation
    def create_op(
        self,
        op_type: str,
        inputs: Sequence[Tensor],
        output_specs: Sequence[tuple[dtypes.DType, Any]],
        name: Optional[str] = None,
        attrs: Optional[dict[str, Any]] = None,
        compute_device: bool = True,
    ) -> Operation:
        """Adds an op, applying the name, control-dependency, device and colocation scopes."""
        with self._lock:
            if self._finalized:
                raise RuntimeError("Graph is finalized and cannot be modified.")
            for t in inputs:
                if not isinstance(t, Tensor):
                    raise TypeError(f"Input to op {op_type} must be a Tensor, got {t!r}")
                if t.graph is not self:
                    raise ValueError(f"Tensor {t.name} must be from the same graph as op {op_type}")
            name = self._exact_or_unique_name(name or op_type)
            control_inputs = self._current_control_dependencies(inputs)
            op = Operation(self, op_type, name, inputs, output_specs, attrs, control_inputs)
            if op_type in self._gradient_override_map:
                # Recorded on the op: the override applies to ops created inside the context.
                op._set_attr("_gradient_op_type", self._gradient_override_map[op_type])
            self._add_op(op)
            if compute_device:
                self._apply_device_functions(op)
            if self._colocation_stack:
                groups: list[str] = []
                for colocation_op in reversed(self._colocation_stack):
                    groups.extend(colocation_op.colocation_groups())
                op._set_attr("_class", sorted(set(groups)))
                leader = self._colocation_stack[-1]
                if leader.device:
                    op._set_device(leader.device)
            return op

    def _exact_or_unique_name(self, name: str) -> str:
        """A name ending in '/' (a scope's own name) is used exactly, as TF1 does for variables."""
        if name.endswith("/"):
            exact = name[:-1]
            if exact in self._ops_by_name:
                raise ValueError(f"Duplicate op name {exact!r} in graph")
            self._names_in_use.setdefault(exact.lower(), 1)
            return exact
        return self.unique_name(name)

    def _add_op(self, op: Operation) -> None:
        if op.name in self._ops_by_name:
            raise ValueError(f"Duplicate op name {op.name!r} in graph")
        self._ops_by_name[op.name] = op
        self._ops.append(op)
        self._version += 1

    def _apply_device_functions(self, op: Operation) -> None:
        # Innermost scope first: it sets the fields it names, enclosing scopes fill in
        # the rest, and a ``device(None)`` stops the walk (TF1 semantics).
        for device_fn in reversed(self._device_function_stack):
            if device_fn is None:
                break
            if isinstance(device_fn, str) and not device_fn:
                continue
            device_string = device_fn(op) if callable(device_fn) else device_fn
            if isinstance(device_string, device_lib.DeviceSpec):
                device_string = device_string.to_string()
            if not callable(device_fn):
                merged = device_lib.DeviceSpec.from_string(device_string)
                merged.merge_from(device_lib.DeviceSpec.from_string(op.device))
                device_string = merged.to_string()
            op._set_device(device_string or "")

    def _current_control_dependencies(self, inputs: Sequence[Tensor]) -> list[Operation]:
        result: list[Operation] = []
        input_ops = {t.op for t in inputs}
        for frame in self._control_dependencies_stack:
            for op in frame:
                if op not in input_ops and op not in result:
                    result.append(op)
        return result

    # ------------------------------------------------------------------ lookup
    def get_operations(self) -> list[Operation]:
        return list(self._ops)

    def get_operation_by_name(self, name: str) -> Operation:
        if not isinstance(name, str):
            raise TypeError(f"Operation names are strings, got {name!r}")
        try:
            return self._ops_by_name[name]
        except KeyError:
            raise KeyError(f"The name {name!r} refers to an Operation not in the graph.") from None

    def get_tensor_by_name(self, name: str) -> Tensor:
        element = self.as_graph_element(name, allow_tensor=True, allow_operation=False)
        assert isinstance(element, Tensor)
        return element

    def as_graph_element(self, obj: Any, allow_tensor: bool = True, allow_operation: bool = True) -> Any:
        """Resolves a Tensor, Operation, Variable or name into an element of this graph."""
        conversion = getattr(obj, "_as_graph_element", None)
        if conversion is not None and callable(conversion):
            obj = conversion()
        if isinstance(obj, str):
            if ":" in obj:
                if not allow_tensor:
                    raise ValueError(f"Name {obj!r} names a Tensor, but an Operation is expected here")
                op_name, _, index_text = obj.rpartition(":")
                if not index_text.isdigit():
                    raise ValueError(f"The name {obj!r} looks like a Tensor name but its output index is not a number")
                op = self._ops_by_name.get(op_name)
                if op is None:
                    raise KeyError(
                        f"The name {obj!r} refers to a Tensor which does not exist. "
                        f"The operation, {op_name!r}, does not exist in the graph."
                    )
                index = int(index_text)
                if index >= len(op.outputs):
                    raise KeyError(
                        f"The name {obj!r} refers to a Tensor which does not exist. "
                        f"The operation, {op_name!r}, exists but only has {len(op.outputs)} outputs."
                    )
                return op.outputs[index]
            if not allow_operation:
                hint = f" Did you mean {obj + ':0'!r}?" if obj in self._ops_by_name else ""
                raise ValueError(f"The name {obj!r} names an Operation, not a Tensor.{hint}")
            op = self._ops_by_name.get(obj)
            if op is None:
                raise KeyError(f"The name {obj!r} refers to an Operation not in the graph.")
            return op
        if isinstance(obj, Tensor):
            if not allow_tensor:
                raise TypeError(f"Can not convert a Tensor into an Operation: {obj.name}")
            if obj.graph is not self:
                raise ValueError(f"Tensor {obj.name} is not an element of this graph.")
            return obj
        if isinstance(obj, Operation):
            if not allow_operation:
                raise TypeError(f"Can not convert an Operation into a Tensor: {obj.name}")
            if obj.graph is not self:
                raise ValueError(f"Operation {obj.name} is not an element of this graph.")
            return obj
        allowed = " or ".join(k for k, ok in (("Tensor", allow_tensor), ("Operation", allow_operation)) if ok)
        raise TypeError(f"Can not convert a {type(obj).__name__} into a {allowed}: {obj!r}")

    # ------------------------------------------------------------------ names
    def get_name_scope(self) -> str:
        return self._name_stack

    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        """``name`` prefixed by the current scope and suffixed ``_N`` if already taken."""
        if self._name_stack:
            name = f"{self._name_stack}/{name}"
        key = name.lower()
        count = self._names_in_use.get(key, 0)
        if mark_as_used:
            self._names_in_use[key] = count + 1
        if count > 0:
            base = name
            while True:
                name = f"{base}_{count}"
                if name.lower() not in self._names_in_use:
                    break
                count += 1
            if mark_as_used:
                self._names_in_use[name.lower()] = 1
        return name

    @contextlib.contextmanager
    def name_scope(self, name: Optional[str]) -> Iterator[str]:
        """Opens a name scope; a name ending in '/' re-enters that exact scope."""
        old_stack = self._name_stack
        if not name:
            new_stack = ""
        elif name.endswith("/"):
            if not _VALID_SCOPE_NAME.match(name):
                raise ValueError(f"{name!r} is not a valid scope name")
            new_stack = name[:-1]
        else:
            if not _VALID_OP_NAME.match(name):
                raise ValueError(
                    f"{name!r} is not a valid scope name: use letters, digits, '.', '_', '-', '/'"
                )
            new_stack = self.unique_name(name)
        self._name_stack = new_stack
        try:
            yield (new_stack + "/") if new_stack else ""
        finally:
            self._name_stack = old_stack

    # ------------------------------------------------------------------ scopes
    @contextlib.contextmanager
    def device(self, device_name_or_function: Any) -> Iterator[None]:
        """Pins ops created inside to a device (string, DeviceSpec, function or None)."""
        entry = device_name_or_function
        if isinstance(entry, device_lib.DeviceSpec):
            entry = entry.to_string()
        if isinstance(entry, str):
            entry = device_lib.canonical_name(entry)
        elif entry is not None and not callable(entry):
            raise TypeError(
                f"device() takes a device string, DeviceSpec, function or None, got {device_name_or_function!r}"
            )
        self._device_function_stack.append(entry)
        try:
            yield
        finally:
            self._device_function_stack.pop()

    @contextlib.contextmanager
    def colocate_with(self, op: Any, ignore_existing: bool = False) -> Iterator[None]:
        """Ops created inside share ``op``'s device; enclosing device scopes are ignored."""
        if op is None:
            old_stack = self._colocation_stack
            self._colocation_stack = []
            try:
                yield
            finally:
                self._colocation_stack = old_stack
            return
        target = _as_operation(op)
        old_devices = self._device_function_stack
        old_colocation = self._colocation_stack
        self._device_function_stack = []
        if ignore_existing:
            self._colocation_stack = []
        self._colocation_stack = self._colocation_stack + [target]
        try:
            yield
        finally:
            self._device_function_stack = old_devices
            self._colocation_stack = old_colocation

    @contextlib.contextmanager
    def container(self, container_name: str) -> Iterator[str]:
        """Stateful ops created inside keep their state in the named resource container."""
        if not isinstance(container_name, str):
            raise TypeError(f"Container names are strings, got {container_name!r}")
        old = self._container
        self._container = container_name
        try:
            yield container_name
        finally:
            self._container = old

    @property
    def current_container(self) -> str:
        return self._container

    @contextlib.contextmanager
    def control_dependencies(self, control_inputs: Optional[Sequence[Any]]) -> Iterator[None]:
        """Ops created inside run only after ``control_inputs``; None clears the outer ones."""
        if control_inputs is None:
            old = self._control_dependencies_stack
            self._control_dependencies_stack = []
            try:
                yield
            finally:
                self._control_dependencies_stack = old
            return
        ops: list[Operation] = []
        for c in control_inputs:
            resolved = self.as_graph_element(c)
            ops.append(resolved.op if isinstance(resolved, Tensor) else resolved)
        self._control_dependencies_stack.append(ops)
        try:
            yield
        finally:
            self._control_dependencies_stack.pop()

    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map: dict[str, str]) -> Iterator[None]:
        old = dict(self._gradient_override_map)
        self._gradient_override_map.update(op_type_map)
        try:
            yield
        finally:
            self._gradient_override_map = old

    # ------------------------------------------------------------------ collections
    def add_to_collection(self, name: str, value: Any) -> None:
        self._collections.setdefault(name, []).append(value)

    def add_to_collections(self, names: Any, value: Any) -> None:
        names = (names,) if isinstance(names, str) else set(names)
        for name in names:
            self.add_to_collection(name, value)

    def get_collection_ref(self, name: str) -> list[Any]:
        return self._collections.setdefault(name, [])

    def get_collection(self, name: str, scope: Optional[str] = None) -> list[Any]:
        items = self._collections.get(name, [])
        if scope is None:
            return list(items)
        pattern = re.compile(scope)
        return [item for item in items if pattern.match(getattr(item, "name", "") or "")]

    def get_all_collection_keys(self) -> list[str]:
        return [k for k, v in self._collections.items() if v]

    def clear_collection(self, name: str) -> None:
        self._collections.pop(name, None)

    # ------------------------------------------------------------------ serialization
    def as_graph_def(self, from_version: int = 0) -> graph_def_lib.GraphDef:
        """The graph's nodes in creation order (ops with id > ``from_version`` only)."""
        nodes = [op.node_def for op in self._ops if op._id > from_version]
        return graph_def_lib.GraphDef(nodes=nodes, version=self._last_id)


def _as_operation(obj: Any) -> Operation:
    conversion = getattr(obj, "_as_graph_element", None)
    if conversion is not None and callable(conversion):
        obj = conversion()
    if isinstance(obj, Tensor):
        return obj.op
    if isinstance(obj, Operation):
        return obj
    raise TypeError(f"Expected an Operation, Tensor or Variable, got {obj!r}")


# ---------------------------------------------------------------------- default graph

_default_graph_stack: list[Graph] = []
_global_default_graph: Optional[Graph] = None
_default_session_stack: list[Any] = []


def get_default_graph() -> Graph:
    global _global_default_graph
    if _default_graph_stack:
        return _default_graph_stack[-1]
    if _global_default_graph is None:
        _global_default_graph = Graph()
    return _global_default_graph


def reset_default_graph() -> None:
    """Replaces the global default graph; not allowed inside a ``with g.as_default()``."""
    global _global_default_graph
    if _default_graph_stack:
        raise AssertionError("Do not use tf.reset_default_graph() inside a graph context")
    _global_default_graph = Graph()


def get_default_session() -> Any:
    return _default_session_stack[-1] if _default_session_stack else None


@contextlib.contextmanager
def default_session(session: Any) -> Iterator[Any]:
    _default_session_stack.append(session)
    try:
        yield session
    finally:
        _default_session_stack.remove(session)
