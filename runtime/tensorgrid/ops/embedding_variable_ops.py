"""DeepRec's embedding variables: ``tf.get_embedding_variable`` and its options, in the graph.

An ``EmbeddingVariable`` is a hash table of rows keyed by 64-bit ids (no vocabulary size, no
modulo, no collisions), a resource op (``KvVarHandleOp``) on the device it is created under,
like a ``tf.lookup`` table; the kernels (``kernels/embedding_variable_kernels.py``) keep the
rows, slots, frequencies and versions per key. Every op on it is colocated with it, so under
``replica_device_setter`` the table lives on a PS like a variable.

``tf.nn.embedding_lookup(ev, ids)`` is a ``KvResourceGather``; its gradient is an
``IndexedSlices`` keyed by the ids themselves, which the optimizers apply with the
``KvResourceSparseApply*`` ops. The names and arguments are DeepRec's
(``EmbeddingVariableOption``, ``CounterFilter``, ``CBFFilter``, ``GlobalStepEvict``, ``L2WeightEvict``,
``InitializerOption``), so DeepRec programs run unchanged for what is implemented here.

A table of ``key_dtype=tf.string`` keys its rows by each string's 64-bit FarmHash
``Fingerprint64`` (``KvStringToKey``, run where the lookup is built, so only int64 keys travel to
the PS): the string is hashed once, with no modulo, and the table, its gradients and its
checkpoints hold the hashed keys.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import op_registry
from tensorgrid.framework import tensor_conversion
from tensorgrid.framework import tensor_shape
from tensorgrid.kernels import counting_bloom_filter
from tensorgrid.ops import array_ops
from tensorgrid.ops import init_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import op_util
from tensorgrid.ops import variable_scope

GraphKeys = graph_lib.GraphKeys

_STORE_KEY = "__embedding_variables"
_KEY_DTYPES = (dtypes.int64, dtypes.int32)
_TABLE_KEY_DTYPES = (dtypes.int64, dtypes.int32, dtypes.string)

_SPARSE_APPLY_OPS = ("KvResourceSparseApplyGradientDescent", "KvResourceSparseApplyAdagrad",
                     "KvResourceSparseApplyAdam", "KvResourceSparseApplyFtrl")
for _op_type in ("KvVarHandleOp", "InitializeKvVariableOp", "KvResourceGather", "KvVariableSize",
                 "KvResourceExport", "KvResourceImport", "KvResourceChangedKeys", *_SPARSE_APPLY_OPS):
    op_registry.register_op(_op_type, stateful=True)
op_registry.register_op("KvPartitionOfKeys")
op_registry.register_op("KvStringToKey")
for _op_type in ("KvVarHandleOp", "InitializeKvVariableOp", "KvVariableSize", "KvResourceExport", "KvResourceImport",
                 "KvResourceChangedKeys", "KvPartitionOfKeys", "KvStringToKey", *_SPARSE_APPLY_OPS):
    op_registry.NotDifferentiable(_op_type)


class CounterFilter:
    """Admission by count: a key is stored once it has been looked up ``filter_freq`` times."""

    def __init__(self, filter_freq: int = 0) -> None:
        if not isinstance(filter_freq, int) or filter_freq < 0:
            raise ValueError(f"CounterFilter: filter_freq must be an int >= 0, got {filter_freq!r}")
        self.filter_freq = filter_freq


class CBFFilter:
    """Admission by count, the counts kept in a counting Bloom filter of fixed size (DeepRec's ``CBFFilter``).

    A key is stored once its estimated count reaches ``filter_freq``. The filter holds
    ``max_element_size`` distinct keys (per part of a partitioned table) at ``false_positive_probability``
    (the chance that a key's estimate counts other keys' lookups too) with counters of
    ``counter_type``. With DeepRec's defaults (no size, probability -1.0) it is a counter filter."""

    def __init__(self, filter_freq: int = 0, max_element_size: int = 0, false_positive_probability: float = -1.0,
                 counter_type: Any = dtypes.uint64) -> None:
        if isinstance(filter_freq, bool) or not isinstance(filter_freq, int) or filter_freq < 0:
            raise ValueError(f"CBFFilter: filter_freq must be an int >= 0, got {filter_freq!r}")
        if isinstance(max_element_size, bool) or not isinstance(max_element_size, int) or max_element_size < 0:
            raise ValueError(f"CBFFilter: max_element_size must be an int >= 0, got {max_element_size!r}")
        if not isinstance(false_positive_probability, (int, float)) or isinstance(false_positive_probability, bool):
            raise ValueError(f"CBFFilter: false_positive_probability must be a number, got "
                             f"{false_positive_probability!r}")
        if false_positive_probability != -1.0:
            if not 0.0 < false_positive_probability < 1.0:
                raise ValueError("CBFFilter: false_positive_probability must be in (0, 1), or -1.0 for no Bloom "
                                 f"filter, got {false_positive_probability!r}")
            if max_element_size <= 0:
                raise ValueError(f"CBFFilter: max_element_size must be > 0 when false_positive_probability is set "
                                 f"({false_positive_probability}), got {max_element_size}")
        elif max_element_size != 0:
            raise ValueError(f"CBFFilter: max_element_size={max_element_size} needs a false_positive_probability "
                             "in (0, 1) (it is -1.0: no Bloom filter)")
        try:
            counter_dtype = dtypes.as_dtype(counter_type)
        except TypeError:
            counter_dtype = None
        if counter_dtype is None or counter_dtype.name not in counting_bloom_filter.COUNTER_TYPES:
            raise ValueError(f"CBFFilter: counter_type must be one of tf.{', tf.'.join(counting_bloom_filter.COUNTER_TYPES)}"
                             f", got {counter_type!r}")
        self.filter_freq = filter_freq
        self.max_element_size = max_element_size
        self.false_positive_probability = float(false_positive_probability)
        self.counter_type = counter_dtype

    def filter_attrs(self) -> dict[str, Any]:
        """The table's Bloom filter attributes: counters, hash functions, counter type (0, 0, "": none)."""
        if self.false_positive_probability == -1.0 or self.filter_freq == 0:
            return {"cbf_num_counters": 0, "cbf_num_hash_functions": 0, "cbf_counter_type": ""}
        return {"cbf_num_counters": counting_bloom_filter.counter_count(self.max_element_size,
                                                                        self.false_positive_probability),
                "cbf_num_hash_functions": counting_bloom_filter.hash_function_count(self.false_positive_probability),
                "cbf_counter_type": self.counter_type.name}


class GlobalStepEvict:
    """Eviction at checkpoint time of keys not updated in more than ``steps_to_live`` global steps."""

    def __init__(self, steps_to_live: Optional[int] = None) -> None:
        if steps_to_live is not None and (not isinstance(steps_to_live, int) or steps_to_live < 0):
            raise ValueError(f"GlobalStepEvict: steps_to_live must be None or an int >= 0, got {steps_to_live!r}")
        self.steps_to_live = steps_to_live


class L2WeightEvict:
    """Eviction at checkpoint time of keys whose row's L2 norm is below ``l2_weight_threshold``."""

    def __init__(self, l2_weight_threshold: float = -1.0) -> None:
        if not isinstance(l2_weight_threshold, (int, float)):
            raise ValueError(f"L2WeightEvict: l2_weight_threshold must be a number, got {l2_weight_threshold!r}")
        self.l2_weight_threshold = float(l2_weight_threshold)


class InitializerOption:
    """Where new rows start: ``default_value_dim`` rows of ``initializer``, row ``key % default_value_dim``;
    a key not yet admitted looks up ``default_value_no_permission`` everywhere."""

    def __init__(self, initializer: Any = None, default_value_dim: int = 4096,
                 default_value_no_permission: float = 0.0) -> None:
        if not isinstance(default_value_dim, int) or default_value_dim <= 0:
            raise ValueError(f"InitializerOption: default_value_dim must be an int > 0, got {default_value_dim!r}")
        self.initializer = initializer
        self.default_value_dim = default_value_dim
        self.default_value_no_permission = float(default_value_no_permission)


class EmbeddingVariableOption:
    """The options of an embedding variable (DeepRec's): admission, eviction and initial rows."""

    def __init__(self, ht_type: str = "", ht_partition_num: int = 1000, evict_option: Any = None,
                 ckpt: Any = None, filter_option: Any = None, storage_option: Any = None,
                 init_option: Any = None, max_entries: Optional[int] = None,
                 evict_every_n_steps: Optional[int] = None) -> None:
        if filter_option is not None and not isinstance(filter_option, (CounterFilter, CBFFilter)):
            raise ValueError(f"EmbeddingVariableOption: filter_option must be a tf.CounterFilter or tf.CBFFilter, "
                             f"got {filter_option!r}")
        if evict_option is not None and not isinstance(evict_option, (GlobalStepEvict, L2WeightEvict)):
            raise ValueError("EmbeddingVariableOption: evict_option must be a tf.GlobalStepEvict or "
                             f"tf.L2WeightEvict, got {evict_option!r}")
        if storage_option is not None:
            raise ValueError("EmbeddingVariableOption: storage_option (DeepRec's multi-tier storage) is not "
                             "supported; rows live in the memory of the task holding the table")
        if init_option is not None and not isinstance(init_option, InitializerOption):
            raise ValueError(f"EmbeddingVariableOption: init_option must be a tf.InitializerOption, got {init_option!r}")
        if max_entries is not None and (not isinstance(max_entries, int) or max_entries <= 0):
            raise ValueError(f"EmbeddingVariableOption: max_entries must be None or an int > 0, got {max_entries!r}")
        if evict_every_n_steps is not None and (isinstance(evict_every_n_steps, bool) or
                                                not isinstance(evict_every_n_steps, int) or evict_every_n_steps <= 0):
            raise ValueError("EmbeddingVariableOption: evict_every_n_steps must be None or an int > 0, got "
                             f"{evict_every_n_steps!r}")
        if evict_every_n_steps is not None and evict_option is None:
            raise ValueError(f"EmbeddingVariableOption: evict_every_n_steps={evict_every_n_steps} needs an "
                             "evict_option (tf.GlobalStepEvict or tf.L2WeightEvict) saying what to evict")
        self.ht_type = ht_type
        self.max_entries = max_entries
        """tensorgrid's bound on the keys a table (each part of a partitioned one) stores: past it, the
        least recently updated keys are evicted (None: no bound)."""
        self.evict_every_n_steps = evict_every_n_steps
        """tensorgrid's: besides at every checkpoint save, the PS evicts (by ``evict_option``) on the first
        update at least this many global steps after its previous eviction (None: only at saves)."""
        self.ht_partition_num = ht_partition_num
        self.evict = evict_option
        self.ckpt = ckpt
        self.filter_option = filter_option
        self.init = init_option or InitializerOption()


@dataclasses.dataclass(frozen=True)
class SlotSpec:
    """A per-key optimizer slot kept in the table: its checkpoint suffix and the value new keys start at."""

    name: str
    initial_value: float


@dataclasses.dataclass(frozen=True)
class PartInfo:
    """Part ``index`` of the ``count`` parts of the partitioned embedding variable ``full_name``."""

    full_name: str
    index: int
    count: int


class EmbeddingVariable:
    """A hash-table variable of ``embedding_dim``-wide rows keyed by ids (DeepRec's EmbeddingVariable)."""

    def __init__(self, name: str, embedding_dim: int, key_dtype: dtypes.DType, value_dtype: dtypes.DType,
                 initializer: Any, ev_option: EmbeddingVariableOption, trainable: bool,
                 partition_info: Optional[PartInfo] = None) -> None:
        self._name = name
        self.partition_info = partition_info
        """Which part of a partitioned embedding variable this table is (None: it is the whole table)."""
        self.embedding_dim = embedding_dim
        self.key_dtype = key_dtype
        self._dtype = value_dtype
        self.trainable = trainable
        self.ev_option = ev_option
        self.constraint = None
        self.slots: list[SlotSpec] = []
        filter_option = ev_option.filter_option
        self.bloom_filter_counters = filter_option.filter_attrs()["cbf_num_counters"] \
            if isinstance(filter_option, CBFFilter) else 0
        """How many counters the table's Bloom filter has (0: it has none)."""
        evict = ev_option.evict
        attrs = {
            "container": "", "shared_name": name, "embedding_dim": embedding_dim, "value_dtype": value_dtype.name,
            "filter_freq": ev_option.filter_option.filter_freq if ev_option.filter_option else 0,
            "steps_to_live": (evict.steps_to_live or 0) if isinstance(evict, GlobalStepEvict) else 0,
            "l2_weight_threshold": evict.l2_weight_threshold if isinstance(evict, L2WeightEvict) else -1.0,
            "default_value_no_permission": ev_option.init.default_value_no_permission,
            "max_entries": ev_option.max_entries or 0,
            "evict_every_n_steps": ev_option.evict_every_n_steps or 0,
            "cbf_num_counters": 0, "cbf_num_hash_functions": 0, "cbf_counter_type": "",
        }
        if isinstance(ev_option.filter_option, CBFFilter):
            attrs.update(ev_option.filter_option.filter_attrs())
        graph = graph_lib.get_default_graph()
        with graph.name_scope(None):
            self._handle = op_util.make_tensor("KvVarHandleOp", [], dtypes.resource, [], name, attrs)
        with graph.name_scope(name + "/"), graph.colocate_with(self._handle.op), graph.control_dependencies(None):
            defaults = initializer([ev_option.init.default_value_dim, embedding_dim], dtype=value_dtype)
            defaults = tensor_conversion.convert_to_tensor(defaults, dtype=value_dtype)
            self.initial_rows = defaults
            """The initializer's rows new keys start from (row ``key % default_value_dim``)."""
            self.initializer = op_util.make_op("InitializeKvVariableOp", [self._handle, defaults], [],
                                               "InitializeKvVariableOp")

    @property
    def name(self) -> str:
        return self._name + ":0"

    @property
    def op(self) -> graph_lib.Operation:
        return self._handle.op

    @property
    def graph(self) -> graph_lib.Graph:
        return self._handle.graph

    @property
    def device(self) -> str:
        return self._handle.device

    @property
    def dtype(self) -> dtypes.DType:
        return self._dtype

    @property
    def handle(self) -> graph_lib.Tensor:
        return self._handle

    def _ref(self) -> graph_lib.Tensor:
        """The table's handle: what gradients are taken with respect to."""
        return self._handle

    def get_shape(self) -> tensor_shape.TensorShape:
        return tensor_shape.TensorShape([None, self.embedding_dim])

    shape = property(get_shape)

    def __repr__(self) -> str:
        return f"<tf.EmbeddingVariable '{self.name}' embedding_dim={self.embedding_dim} key_dtype={self.key_dtype.name}>"

    def keys_of(self, ids: Any) -> graph_lib.Tensor:
        """``ids`` as the table's int64 keys: int32 ids cast, strings (a ``tf.string`` table) hashed to
        their 64-bit ``Fingerprint64``, where the caller builds them (not on the table's task)."""
        id_tensor = tensor_conversion.convert_to_tensor(ids, name="ids")
        id_dtype = id_tensor.dtype.base_dtype
        if self.key_dtype == dtypes.string:
            if id_dtype != dtypes.string:
                raise TypeError(f"Embedding variable {self._name} has key_dtype string: its ids must be strings, "
                                f"got {id_dtype.name}")
            return string_keys(id_tensor)
        if id_dtype not in _KEY_DTYPES:
            raise TypeError(f"Embedding variable {self._name}: ids must be int64 or int32, got {id_dtype.name}")
        return id_tensor if id_dtype == dtypes.int64 else math_ops.cast(id_tensor, dtypes.int64)

    def gather_keys(self, keys: graph_lib.Tensor, name: Optional[str] = None, counts: bool = True) -> graph_lib.Tensor:
        """The rows of the int64 ``keys`` (from ``keys_of``), looked up next to the table; counts each lookup."""
        shape = keys.shape.concatenate([self.embedding_dim])
        with self.graph.colocate_with(self._handle.op):
            return op_util.make_tensor("KvResourceGather", [self._handle, keys], self._dtype, shape,
                                       name or "KvResourceGather", {"counts": counts})

    def sparse_read(self, ids: Any, name: Optional[str] = None, counts: bool = True) -> graph_lib.Tensor:
        """The rows of ``ids`` (shape ``ids.shape + [embedding_dim]``); counts each id's lookup."""
        return self.gather_keys(self.keys_of(ids), name, counts)

    def total_count(self) -> graph_lib.Tensor:
        """How many keys the table stores (DeepRec's ``ev.total_count()`` counts only these)."""
        with self.graph.colocate_with(self._handle.op):
            return op_util.make_tensor("KvVariableSize", [self._handle], dtypes.int64, [], "KvVariableSize")

    def add_slot(self, slot_name: str, initial_value: float) -> SlotSpec:
        """Registers the per-key slot an optimizer keeps in the table (once per name)."""
        for spec in self.slots:
            if spec.name == slot_name:
                return spec
        spec = SlotSpec(slot_name, float(initial_value))
        self.slots.append(spec)
        return spec


class PartitionedEmbeddingVariable:
    """An embedding variable split over ``len(parts)`` tables by a hash of the id (DeepRec's ``partitioner=``).

    Id ``k`` lives in part ``partition_of_keys(k) % len(parts)`` (``kernels/embedding_variable_kernels.py``):
    a hash, so ids that share a stride (all even, all multiples of the part count) still spread
    evenly. Each part is an ``EmbeddingVariable`` named ``<name>/part_<i>``, placed like a variable
    (under ``replica_device_setter``, round robin over the PS tasks); ``tf.nn.embedding_lookup``
    sends each id to its part and only that part's ids travel to its task."""

    def __init__(self, name: str, parts: list[EmbeddingVariable]) -> None:
        self._name = name
        self.parts = parts

    @property
    def name(self) -> str:
        return self._name

    @property
    def embedding_dim(self) -> int:
        return self.parts[0].embedding_dim

    @property
    def dtype(self) -> dtypes.DType:
        return self.parts[0].dtype

    @property
    def graph(self) -> graph_lib.Graph:
        return self.parts[0].graph

    def __iter__(self) -> Any:
        return iter(self.parts)

    def __len__(self) -> int:
        return len(self.parts)

    def _get_variable_list(self) -> list[EmbeddingVariable]:
        return list(self.parts)

    def get_shape(self) -> tensor_shape.TensorShape:
        return tensor_shape.TensorShape([None, self.embedding_dim])

    shape = property(get_shape)

    def __repr__(self) -> str:
        return f"<tf.PartitionedEmbeddingVariable '{self._name}' parts={len(self.parts)} " \
               f"embedding_dim={self.embedding_dim}>"

    def total_count(self) -> graph_lib.Tensor:
        """How many keys all the parts store together."""
        return math_ops.add_n([part.total_count() for part in self.parts])


def string_keys(strings: graph_lib.Tensor) -> graph_lib.Tensor:
    """Each string's table key (int64, same shape): its FarmHash ``Fingerprint64``, all 64 bits, as
    ``tf.bitcast`` of ``tf.fingerprint`` gives it in TensorFlow; no modulo."""
    return op_util.make_tensor("KvStringToKey", [strings], dtypes.int64, strings.shape, "KvStringToKey")


def partition_of_ids(ids: graph_lib.Tensor, num_partitions: int) -> graph_lib.Tensor:
    """The part (int32) each int64 id of ``ids`` belongs to among ``num_partitions`` (same shape)."""
    return op_util.make_tensor("KvPartitionOfKeys", [ids], dtypes.int32, ids.shape, "KvPartitionOfKeys",
                               {"num_partitions": num_partitions})


def _part_count(partitioner: Any, embedding_dim: int, value_dtype: dtypes.DType, name: str) -> int:
    """How many parts ``partitioner`` asks for. A table has no row count, so it is asked about the
    widest one (2**31 - 1 rows): ``tf.fixed_size_partitioner(N)`` gives N."""
    partitions = list(partitioner(shape=tensor_shape.TensorShape([2**31 - 1, embedding_dim]), dtype=value_dtype))
    if len(partitions) != 2 or partitions[1] != 1 or not isinstance(partitions[0], int) or partitions[0] < 1:
        raise ValueError(f"get_embedding_variable: the partitioner of {name} must split the ids (axis 0) into "
                         f"N >= 1 parts, as tf.fixed_size_partitioner(N) does; it gave {partitions}")
    return partitions[0]


@op_registry.RegisterGradient("KvResourceGather")
def _gather_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    handle, ids = op.inputs
    dim = op.outputs[0].shape[-1].value
    values = array_ops.reshape(grad, [-1, dim])
    return [indexed_slices.IndexedSlices(values, array_ops.reshape(ids, [-1])), None]


def get_embedding_variable(name: str, embedding_dim: int, key_dtype: Any = dtypes.int64, value_dtype: Any = None,
                           initializer: Any = None, trainable: bool = True,
                           collections: Optional[Sequence[str]] = None, partitioner: Any = None,
                           custom_getter: Any = None, steps_to_live: Optional[int] = None,
                           ev_option: Optional[EmbeddingVariableOption] = None) -> Any:
    """DeepRec's ``tf.get_embedding_variable``: ``<scope>/<name>``, made or shared as ``get_variable`` does.

    Without an initializer new rows start from ``tf.truncated_normal_initializer()`` (DeepRec's default).
    With a ``partitioner`` (``tf.fixed_size_partitioner(N)``) it is a ``PartitionedEmbeddingVariable``
    of N parts, ids routed to parts by hash."""
    if not isinstance(embedding_dim, int) or embedding_dim <= 0:
        raise ValueError(f"get_embedding_variable: embedding_dim must be an int > 0, got {embedding_dim!r}")
    key_dtype = dtypes.as_dtype(key_dtype)
    if key_dtype not in _TABLE_KEY_DTYPES:
        raise ValueError(f"get_embedding_variable: key_dtype must be tf.int64, tf.int32 or tf.string, got "
                         f"{key_dtype.name}")
    value_dtype = dtypes.float32 if value_dtype is None else dtypes.as_dtype(value_dtype)
    if not value_dtype.is_floating:
        raise ValueError(f"get_embedding_variable: value_dtype must be a float type, got {value_dtype.name}")
    if custom_getter is not None:
        raise ValueError("get_embedding_variable: custom_getter is not supported")
    ev_option = ev_option or EmbeddingVariableOption()
    if steps_to_live is not None:
        ev_option.evict = GlobalStepEvict(steps_to_live)
    scope = variable_scope.get_variable_scope()
    full_name = f"{scope.name}/{name}" if scope.name else name
    graph = graph_lib.get_default_graph()
    store: dict[str, Any] = _store(graph)
    existing = store.get(full_name)
    if existing is not None:
        if scope.reuse is False or scope.reuse is None:
            raise ValueError(f"Variable {full_name} already exists, disallowed. Did you mean to set reuse=True or "
                             "reuse=tf.AUTO_REUSE in VarScope?")
        if existing.embedding_dim != embedding_dim:
            raise ValueError(f"Trying to share embedding variable {full_name}, but specified embedding_dim "
                             f"{embedding_dim} and found {existing.embedding_dim}.")
        return existing
    if scope.reuse is True:
        raise ValueError(f"Variable {full_name} does not exist, or was not created with tf.get_embedding_variable(). "
                         "Did you mean to set reuse=tf.AUTO_REUSE in VarScope?")
    initializer = ev_option.init.initializer or initializer or init_ops.truncated_normal_initializer()
    if partitioner is None:
        tables = [EmbeddingVariable(full_name, embedding_dim, key_dtype, value_dtype, initializer, ev_option,
                                    trainable)]
        made: Any = tables[0]
    else:
        count = _part_count(partitioner, embedding_dim, value_dtype, full_name)
        tables = [EmbeddingVariable(f"{full_name}/part_{index}", embedding_dim, key_dtype, value_dtype, initializer,
                                    ev_option, trainable, PartInfo(full_name, index, count)) for index in range(count)]
        made = PartitionedEmbeddingVariable(full_name, tables)
    store[full_name] = made
    for key in list(collections or [GraphKeys.GLOBAL_VARIABLES]) + ([GraphKeys.TRAINABLE_VARIABLES] if trainable else []):
        for table in tables:
            if table not in graph.get_collection(key):
                graph.add_to_collection(key, table)
    return made


def _store(graph: graph_lib.Graph) -> Any:
    found = graph.get_collection_ref(_STORE_KEY)
    if not found:
        found.append({})
    return found[0]


def embedding_variables(graph: Optional[graph_lib.Graph] = None) -> list[EmbeddingVariable]:
    """The embedding variables (each part of a partitioned one) of ``graph`` (the default graph), in order of creation."""
    found: list[EmbeddingVariable] = []
    for made in _store(graph or graph_lib.get_default_graph()).values():
        found.extend(made.parts if isinstance(made, PartitionedEmbeddingVariable) else [made])
    return found


def sparse_apply(ev: EmbeddingVariable, op_type: str, learning_rate: Any, grad: indexed_slices.IndexedSlices,
                 global_step: Any, attrs: Optional[dict[str, Any]] = None,
                 hyper_parameters: Sequence[Any] = ()) -> graph_lib.Operation:
    """One ``KvResourceSparseApply*`` update of the rows of ``grad.indices`` (repeated ids are summed),
    stamping them with the global step's value (their version; -1 without a global step).

    ``hyper_parameters`` (scalars, cast to the table's dtype) follow the version among the op's inputs."""
    if not isinstance(grad, indexed_slices.IndexedSlices):
        raise TypeError(f"Embedding variable {ev._name} takes sparse gradients (IndexedSlices, from "
                        f"tf.nn.embedding_lookup), got {grad!r}")
    graph = ev.graph
    with graph.colocate_with(ev.op):
        if global_step is None:
            version = array_ops.constant(-1, dtype=dtypes.int64)
        else:
            version = math_ops.cast(tensor_conversion.convert_to_tensor(global_step), dtypes.int64)
        rate = math_ops.cast(tensor_conversion.convert_to_tensor(learning_rate), ev.dtype)
        ids = math_ops.cast(grad.indices, dtypes.int64)
        extra = [math_ops.cast(tensor_conversion.convert_to_tensor(value), ev.dtype) for value in hyper_parameters]
        return op_util.make_op(op_type, [ev.handle, rate, grad.values, ids, version, *extra], [], op_type,
                               attrs or {})
