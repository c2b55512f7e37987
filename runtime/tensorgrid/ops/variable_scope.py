"""``tf.get_variable`` and ``tf.variable_scope``: variables named by scope, shared on request.

Each graph keeps a store of the variables created through ``get_variable`` (keyed by
full name; ``variable_store``) and, per thread, the current ``VariableScope``. A scope carries the
defaults of the variables created inside (initializer, regularizer, dtype, custom
getter) and a reuse flag: with ``reuse=False`` a name may be created only once,
with ``reuse=True`` it must already exist, with ``AUTO_REUSE`` it is created the
first time and shared after. Reuse is inherited by nested scopes and cannot be
turned off inside a reusing scope, exactly as in TF1.

Variable names depend only on the variable scope; op names depend on the name
scope that ``variable_scope`` also opens (so re-entering a scope object puts its
variables back under the original name while new ops get a fresh ``name_1/``).
With a partitioner, ``get_variable`` returns a PartitionedVariable made of the parts
``<name>/part_<i>`` (see ``partitioned_variables``).
"""

from __future__ import annotations

import contextlib
import enum
import functools
import threading
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import tensor_conversion
from tensorgrid.ops import op_util
from tensorgrid.ops import variable_store

GraphKeys = graph_lib.GraphKeys

_VARSTORE_KEY = "__variable_store"
_VARSCOPE_KEY = "__varscope"


class _ReuseMode(enum.Enum):
    """``tf.AUTO_REUSE``: create a variable the first time it is asked for, share it after."""

    AUTO_REUSE = 1


AUTO_REUSE = _ReuseMode.AUTO_REUSE


class VariableScope:
    """The defaults and reuse flag in force for ``get_variable`` calls inside a scope."""

    def __init__(
        self,
        reuse: Any,
        name: str = "",
        initializer: Any = None,
        regularizer: Any = None,
        caching_device: Any = None,
        partitioner: Any = None,
        custom_getter: Any = None,
        name_scope: str = "",
        dtype: Any = dtypes.float32,
        use_resource: Any = None,
        constraint: Any = None,
    ) -> None:
        self._name = name
        self._initializer = initializer
        self._regularizer = regularizer
        self._reuse = reuse
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._name_scope = name_scope
        self._dtype = dtypes.as_dtype(dtype)
        self._use_resource = use_resource
        self._constraint = constraint

    @property
    def name(self) -> str:
        return self._name

    @property
    def original_name_scope(self) -> str:
        """The name scope opened when this scope was first entered (re-enter it exactly)."""
        return self._name_scope

    @property
    def reuse(self) -> Any:
        return self._reuse

    @property
    def initializer(self) -> Any:
        return self._initializer

    @property
    def dtype(self) -> dtypes.DType:
        return self._dtype

    @property
    def use_resource(self) -> Any:
        return self._use_resource

    @property
    def regularizer(self) -> Any:
        return self._regularizer

    @property
    def caching_device(self) -> Any:
        return self._caching_device

    @property
    def partitioner(self) -> Any:
        return self._partitioner

    @property
    def custom_getter(self) -> Any:
        return self._custom_getter

    @property
    def constraint(self) -> Any:
        return self._constraint

    def reuse_variables(self) -> None:
        """From now on, ``get_variable`` in this scope returns existing variables."""
        self._reuse = True

    def set_initializer(self, initializer: Any) -> None:
        self._initializer = initializer

    def set_dtype(self, dtype: Any) -> None:
        self._dtype = dtypes.as_dtype(dtype)

    def set_use_resource(self, use_resource: Any) -> None:
        self._use_resource = use_resource

    def set_regularizer(self, regularizer: Any) -> None:
        self._regularizer = regularizer

    def set_caching_device(self, caching_device: Any) -> None:
        self._caching_device = caching_device

    def set_partitioner(self, partitioner: Any) -> None:
        self._partitioner = partitioner

    def set_custom_getter(self, custom_getter: Any) -> None:
        self._custom_getter = custom_getter

    def get_collection(self, name: str) -> list[Any]:
        scope = self._name + "/" if self._name else ""
        return graph_lib.get_default_graph().get_collection(name, scope)

    def trainable_variables(self) -> list[Any]:
        return self.get_collection(GraphKeys.TRAINABLE_VARIABLES)

    def global_variables(self) -> list[Any]:
        return self.get_collection(GraphKeys.GLOBAL_VARIABLES)

    def local_variables(self) -> list[Any]:
        return self.get_collection(GraphKeys.LOCAL_VARIABLES)

    def get_variable(
        self,
        var_store: "variable_store.VariableStore",
        name: str,
        shape: Any = None,
        dtype: Any = None,
        initializer: Any = None,
        regularizer: Any = None,
        reuse: Any = None,
        trainable: Optional[bool] = None,
        collections: Optional[Sequence[str]] = None,
        caching_device: Any = None,
        partitioner: Any = None,
        validate_shape: bool = True,
        use_resource: Any = None,
        custom_getter: Any = None,
        constraint: Any = None,
        synchronization: Any = None,
        aggregation: Any = None,
    ) -> Any:
        """Gets or creates ``<scope name>/<name>``, filling unset arguments from this scope."""
        initializer = self._initializer if initializer is None else initializer
        regularizer = self._regularizer if regularizer is None else regularizer
        constraint = self._constraint if constraint is None else constraint
        caching_device = self._caching_device if caching_device is None else caching_device
        partitioner = self._partitioner if partitioner is None else partitioner
        custom_getter = self._custom_getter if custom_getter is None else custom_getter
        reuse = self._reuse if reuse is None else reuse
        full_name = f"{self._name}/{name}" if self._name else name
        graph = graph_lib.get_default_graph()
        # Variable names depend only on the variable scope, so the name scope is reset.
        with graph.name_scope(None):
            if dtype is not None and initializer is not None and not callable(initializer):
                init_dtype = _value_dtype(initializer)
                if init_dtype != dtypes.as_dtype(dtype).base_dtype:
                    raise ValueError(
                        f"Initializer type '{init_dtype.name}' and explicit dtype "
                        f"'{dtypes.as_dtype(dtype).base_dtype.name}' don't match."
                    )
            if dtype is None:
                dtype = self._dtype
            return var_store.get_variable(
                full_name, shape=shape, dtype=dtype, initializer=initializer, regularizer=regularizer,
                reuse=reuse, trainable=trainable, collections=collections, caching_device=caching_device,
                partitioner=partitioner, validate_shape=validate_shape, use_resource=use_resource,
                custom_getter=custom_getter, constraint=constraint,
            )


def _value_dtype(value: Any) -> dtypes.DType:
    """The dtype ``value`` would have as a tensor, without adding an op to the graph."""
    if isinstance(value, graph_lib.Tensor) or hasattr(value, "_as_graph_element"):
        return tensor_conversion.convert_to_tensor(value).dtype.base_dtype
    array = np.asarray(value)
    if not isinstance(value, (np.ndarray, np.generic)):
        # Python floats and ints become float32 and int32, as in tf.constant.
        if array.dtype == np.float64:
            return dtypes.float32
        if array.dtype == np.int64:
            return dtypes.int32
    return dtypes.as_dtype(array.dtype)


class _VariableScopeStore(threading.local):
    """Per thread: the current scope, and how often each scope name was opened."""

    def __init__(self) -> None:
        self.current_scope = VariableScope(False)
        self.variable_scopes_count: dict[str, int] = {}

    def open_variable_scope(self, scope_name: str) -> None:
        self.variable_scopes_count[scope_name] = self.variable_scopes_count.get(scope_name, 0) + 1

    def close_variable_subscopes(self, scope_name: Optional[str]) -> None:
        for name in list(self.variable_scopes_count):
            if scope_name is None or name.startswith(scope_name + "/"):
                self.variable_scopes_count[name] = 0

    def variable_scope_count(self, scope_name: str) -> int:
        return self.variable_scopes_count.get(scope_name, 0)


def _singleton(graph: graph_lib.Graph, key: str, factory: Callable[[], Any]) -> Any:
    items = graph.get_collection_ref(key)
    if not items:
        items.append(factory())
    return items[0]


def _scope_store(graph: Optional[graph_lib.Graph] = None) -> _VariableScopeStore:
    return _singleton(graph or graph_lib.get_default_graph(), _VARSCOPE_KEY, _VariableScopeStore)  # type: ignore[no-any-return]


def _get_default_variable_store(graph: Optional[graph_lib.Graph] = None) -> variable_store.VariableStore:
    return _singleton(graph or graph_lib.get_default_graph(), _VARSTORE_KEY, variable_store.VariableStore)  # type: ignore[no-any-return]


def variables_by_name(graph: Optional[graph_lib.Graph] = None) -> dict[str, Any]:
    """Every variable ``get_variable`` made in ``graph`` (the default one) by full name, each part of a
    partitioned one under its own (``emb/part_0``): what ``tf.train.init_from_checkpoint`` looks up."""
    return _get_default_variable_store(graph).variables_by_name()


def get_variable_scope() -> VariableScope:
    """The current variable scope (``tf.get_variable_scope``)."""
    return _scope_store().current_scope


def _get_unique_variable_scope(store: _VariableScopeStore, prefix: str) -> str:
    current = store.current_scope
    name = f"{current.name}/{prefix}" if current.name else prefix
    if store.variable_scope_count(name) == 0:
        return prefix
    index = 1
    while store.variable_scope_count(f"{name}_{index}") > 0:
        index += 1
    return f"{prefix}_{index}"


def _wrap_custom_getter(custom_getter: Any, old_getter: Any) -> Any:
    """Composes getters so that an inner scope's getter calls through the outer one."""
    if old_getter is None:
        return custom_getter

    def wrapped_custom_getter(getter: Any, *args: Any, **kwargs: Any) -> Any:
        return custom_getter(functools.partial(old_getter, getter), *args, **kwargs)

    return wrapped_custom_getter


class variable_scope:  # noqa: N801 - TensorFlow's public name
    """Opens a variable scope (and a name scope) for creating and sharing variables.

    ``name_or_scope`` is a string or a ``VariableScope`` to re-enter; with None, a
    unique scope named after ``default_name`` is made. ``reuse`` is True,
    ``tf.AUTO_REUSE`` or None (inherit); it is inherited by nested scopes.
    """

    def __init__(
        self,
        name_or_scope: Any,
        default_name: Optional[str] = None,
        values: Any = None,
        initializer: Any = None,
        regularizer: Any = None,
        caching_device: Any = None,
        partitioner: Any = None,
        custom_getter: Any = None,
        reuse: Any = None,
        dtype: Any = None,
        use_resource: Any = None,
        constraint: Any = None,
        auxiliary_name_scope: bool = True,
    ) -> None:
        if name_or_scope is None and default_name is None:
            raise TypeError("If default_name is None then name_or_scope is required")
        if name_or_scope is not None and not isinstance(name_or_scope, (VariableScope, str)):
            raise TypeError(
                f"VariableScope: name_or_scope must be a string or VariableScope, got {name_or_scope!r}"
            )
        if reuse not in (None, True, False, AUTO_REUSE):
            raise ValueError(f"reuse must be True, False, None or tf.AUTO_REUSE, got {reuse!r}")
        if not isinstance(auxiliary_name_scope, bool):
            raise TypeError(f"The auxiliary_name_scope must be `True` or `False`, got {auxiliary_name_scope!r}")
        if custom_getter is not None and not callable(custom_getter):
            raise ValueError(f"The custom_getter must be callable, got {custom_getter!r}")
        self._name_or_scope = name_or_scope
        self._default_name = default_name
        self._values = values
        self._initializer = initializer
        self._regularizer = regularizer
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._reuse = reuse
        self._dtype = dtype
        self._use_resource = use_resource
        self._constraint = constraint
        self._auxiliary_name_scope = auxiliary_name_scope
        self._exit_stack: Optional[contextlib.ExitStack] = None

    def __enter__(self) -> VariableScope:
        stack = contextlib.ExitStack()
        try:
            scope = self._enter(stack)
        except BaseException:
            stack.close()
            raise
        self._exit_stack = stack
        return scope

    def __exit__(self, *exc: Any) -> None:
        stack, self._exit_stack = self._exit_stack, None
        if stack is not None:
            stack.__exit__(*exc)

    def _enter(self, stack: contextlib.ExitStack) -> VariableScope:
        graph = op_util.graph_of(*(self._values or []))
        if graph is not graph_lib.get_default_graph():
            stack.enter_context(graph.as_default())
        store = _scope_store(graph)
        current_name_scope: Any = None
        if not self._auxiliary_name_scope:
            existing = graph.get_name_scope()
            current_name_scope = graph.name_scope(existing + "/" if existing else "")
        if self._name_or_scope is not None:
            if isinstance(self._name_or_scope, str):
                scope_name = self._name_or_scope
            else:
                scope_name = self._name_or_scope.name.split("/")[-1]
            if not scope_name and current_name_scope is None:
                # Only the root scope has an empty name: no name scope to open.
                return self._enter_pure(stack, store, old_name_scope=None)
            entered = stack.enter_context(current_name_scope or graph.name_scope(scope_name))
            if isinstance(self._name_or_scope, str):
                old_name_scope = entered
            else:
                old_name_scope = self._name_or_scope.original_name_scope
            return self._enter_pure(stack, store, old_name_scope=old_name_scope)
        if self._reuse:
            raise ValueError("reuse=True cannot be used without a name_or_scope")
        assert self._default_name is not None
        entered = stack.enter_context(current_name_scope or graph.name_scope(self._default_name))
        unique_name = _get_unique_variable_scope(store, self._default_name)
        return self._enter_pure(stack, store, old_name_scope=entered, name=unique_name)

    def _enter_pure(self, stack: contextlib.ExitStack, store: _VariableScopeStore,
                    old_name_scope: Optional[str], name: Optional[str] = None) -> VariableScope:
        """Makes the new VariableScope current (TF's ``_pure_variable_scope``)."""
        old = store.current_scope
        if isinstance(self._name_or_scope, VariableScope):
            source = self._name_or_scope
            new_name = source.name
            scope = VariableScope(
                self._reuse if self._reuse else source.reuse, name=new_name,
                initializer=source.initializer, regularizer=source.regularizer,
                caching_device=source.caching_device, partitioner=source.partitioner,
                custom_getter=source.custom_getter, name_scope=source.original_name_scope,
                dtype=source.dtype, use_resource=source.use_resource, constraint=source.constraint,
            )
            store.open_variable_scope(new_name)
            saved_counts = dict(store.variable_scopes_count)
            previous_getter = source.custom_getter

            def restore() -> None:
                store.current_scope = old
                store.variable_scopes_count = saved_counts
        else:
            relative = name if name is not None else self._name_or_scope
            assert isinstance(relative, str)
            new_name = f"{old.name}/{relative}" if old.name else relative
            reuse = self._reuse or old.reuse  # reuse is inherited by sub-scopes
            scope = VariableScope(
                reuse, name=new_name, initializer=old.initializer, regularizer=old.regularizer,
                caching_device=old.caching_device, partitioner=old.partitioner,
                custom_getter=old.custom_getter,
                name_scope=old_name_scope if old_name_scope is not None else relative,
                dtype=old.dtype, use_resource=old.use_resource, constraint=self._constraint,
            )
            store.open_variable_scope(new_name)
            previous_getter = old.custom_getter

            def restore() -> None:
                store.current_scope = old
                store.close_variable_subscopes(new_name)

        if self._initializer is not None:
            scope.set_initializer(self._initializer)
        if self._regularizer is not None:
            scope.set_regularizer(self._regularizer)
        if self._caching_device is not None:
            scope.set_caching_device(self._caching_device)
        if self._partitioner is not None:
            scope.set_partitioner(self._partitioner)
        if self._custom_getter is not None:
            scope.set_custom_getter(_wrap_custom_getter(self._custom_getter, previous_getter))
        if self._dtype is not None:
            scope.set_dtype(self._dtype)
        if self._use_resource is not None:
            scope.set_use_resource(self._use_resource)
        store.current_scope = scope
        stack.callback(restore)
        return scope


def get_variable(
    name: str,
    shape: Any = None,
    dtype: Any = None,
    initializer: Any = None,
    regularizer: Any = None,
    trainable: Optional[bool] = None,
    collections: Optional[Sequence[str]] = None,
    caching_device: Any = None,
    partitioner: Any = None,
    validate_shape: bool = True,
    use_resource: Any = None,
    custom_getter: Any = None,
    constraint: Any = None,
    synchronization: Any = None,
    aggregation: Any = None,
) -> Any:
    """Gets an existing variable ``<scope>/<name>`` or creates it (``tf.get_variable``).

    Without an initializer, float variables use ``glorot_uniform_initializer`` and
    integer or bool ones start at zero. ``initializer`` may also be a Tensor or value,
    in which case ``shape`` must not be given.
    """
    return get_variable_scope().get_variable(
        _get_default_variable_store(), name, shape=shape, dtype=dtype, initializer=initializer,
        regularizer=regularizer, trainable=trainable, collections=collections, caching_device=caching_device,
        partitioner=partitioner, validate_shape=validate_shape, use_resource=use_resource,
        custom_getter=custom_getter, constraint=constraint,
    )


def get_local_variable(
    name: str,
    shape: Any = None,
    dtype: Any = None,
    initializer: Any = None,
    regularizer: Any = None,
    trainable: bool = False,
    collections: Optional[Sequence[str]] = None,
    caching_device: Any = None,
    partitioner: Any = None,
    validate_shape: bool = True,
    use_resource: Any = None,
    custom_getter: Any = None,
    constraint: Any = None,
    synchronization: Any = None,
    aggregation: Any = None,
) -> Any:
    """Like ``get_variable``, in LOCAL_VARIABLES and never trainable."""
    collections = list(collections or []) + [GraphKeys.LOCAL_VARIABLES]
    return get_variable(
        name, shape=shape, dtype=dtype, initializer=initializer, regularizer=regularizer, trainable=False,
        collections=collections, caching_device=caching_device, partitioner=partitioner,
        validate_shape=validate_shape, use_resource=use_resource, custom_getter=custom_getter,
        constraint=constraint,
    )


def no_regularizer(_: Any) -> None:
    """Use this to turn off a scope's regularizer for one variable."""
    return None
