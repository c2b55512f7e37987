"""``tf.lookup``: vocabulary tables, as TensorFlow's ``lookup_ops`` builds them.

A ``StaticHashTable`` is a resource op (``HashTableV2``) on the device it is created under,
filled by its initializer's op (``LookupTableImportV2`` from tensors,
``InitializeTableFromTextFileV2`` from a vocabulary file), which goes into
``GraphKeys.TABLE_INITIALIZERS`` for ``tf.tables_initializer()``. Every op on a table is
colocated with it, so a table on a PS is filled and looked up there.

``index_table_from_tensor`` / ``index_table_from_file`` (the vocabulary tables of feature
columns) are built as TensorFlow builds them: keys out of the vocabulary fall into
``num_oov_buckets`` buckets after it, by the string hash of the key (an integer key by the
hash of its decimal string), so the ids agree with TensorFlow's. Table names follow
TensorFlow's: a table without a file has a unique shared name, one from a file a name made of
the file and its columns, so tables read from the same file are one table per task.
"""

from __future__ import annotations

import collections
import uuid
from typing import Any, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.framework import sparse_tensor
from tensorgrid.ops import array_ops
from tensorgrid.ops import control_flow_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import op_util
from tensorgrid.ops import string_ops

for _op_type in ("HashTableV2", "LookupTableImportV2", "InitializeTableFromTextFileV2", "LookupTableFindV2",
                 "LookupTableSizeV2"):
    op_registry.register_op(_op_type, stateful=True)
    op_registry.NotDifferentiable(_op_type)


def tables_initializer(name: str = "init_all_tables") -> graph_lib.Operation:
    """One op running every table initializer of the default graph (a NoOp when there is none)."""
    initializers = graph_lib.get_default_graph().get_collection(graph_lib.GraphKeys.TABLE_INITIALIZERS)
    if initializers:
        return control_flow_ops.group(*initializers, name=name)
    return control_flow_ops.no_op(name=name)


initialize_all_tables = tables_initializer


def _check_table_dtypes(table: "LookupInterface", key_dtype: dtypes.DType, value_dtype: dtypes.DType) -> None:
    if key_dtype.base_dtype != table.key_dtype:
        raise TypeError(f"Invalid key dtype for table, expected {table.key_dtype} but got {key_dtype}.")
    if value_dtype.base_dtype != table.value_dtype:
        raise TypeError(f"Invalid value dtype for table, expected {table.value_dtype} but got {value_dtype}.")


class TableInitializerBase:
    """What fills a table: its key and value dtypes and the op that fills it."""

    def __init__(self, key_dtype: Any, value_dtype: Any) -> None:
        self._key_dtype = dtypes.as_dtype(key_dtype)
        self._value_dtype = dtypes.as_dtype(value_dtype)

    @property
    def key_dtype(self) -> dtypes.DType:
        return self._key_dtype

    @property
    def value_dtype(self) -> dtypes.DType:
        return self._value_dtype

    def initialize(self, table: "InitializableLookupTableBase") -> graph_lib.Operation:
        raise NotImplementedError(f"{type(self).__name__} does not say how it fills a table")

    @property
    def _shared_name(self) -> str:
        return ""


class KeyValueTensorInitializer(TableInitializerBase):
    """Fills a table from a tensor of keys and a tensor of values of the same shape."""

    def __init__(self, keys: Any, values: Any, key_dtype: Any = None, value_dtype: Any = None,
                 name: Optional[str] = None) -> None:
        self._keys = op_util.to_tensor(keys, dtype=key_dtype, name="keys")
        self._values = op_util.to_tensor(values, dtype=value_dtype, name="values")
        self._name = name if name is not None else "key_value_init"
        super().__init__(self._keys.dtype, self._values.dtype)

    def initialize(self, table: "InitializableLookupTableBase") -> graph_lib.Operation:
        _check_table_dtypes(table, self._keys.dtype, self._values.dtype)
        graph = table.resource_handle.graph
        with graph.name_scope(self._name), graph.colocate_with(table.resource_handle.op):
            init_op = op_util.make_op("LookupTableImportV2", [table.resource_handle, self._keys, self._values], [],
                                      "LookupTableImportV2")
        graph.add_to_collection(graph_lib.GraphKeys.TABLE_INITIALIZERS, init_op)
        return init_op


class TextFileIndex:
    """Which part of a vocabulary file's line is a key or value: a column (>= 0) or these."""

    WHOLE_LINE = -2
    LINE_NUMBER = -1


class TextFileInitializer(TableInitializerBase):
    """Fills a table from a text file, one entry per line: the key and the value are a column
    split by ``delimiter`` (``None``: any whitespace), the whole line or the line number."""

    def __init__(self, filename: Any, key_dtype: Any, key_index: int, value_dtype: Any, value_index: int,
                 vocab_size: Optional[int] = None, delimiter: str = "\t", name: Optional[str] = None,
                 value_index_offset: int = 0) -> None:
        if not isinstance(filename, graph_lib.Tensor) and not filename:
            raise ValueError("`filename` argument required for tf.lookup.TextFileInitializer")
        key_dtype, value_dtype = dtypes.as_dtype(key_dtype), dtypes.as_dtype(value_dtype)
        for what, index, dtype in (("key", key_index, key_dtype), ("value", value_index, value_dtype)):
            if index < -2:
                raise ValueError(f"`{what}_index` should be >= -2, received: {index}.")
            if index == TextFileIndex.LINE_NUMBER and dtype != dtypes.int64:
                raise ValueError(f"`{what}_dtype` must be int64 if `{what}_index` is {TextFileIndex.LINE_NUMBER}, "
                                 f"received: {dtype}")
            if index == TextFileIndex.WHOLE_LINE and not dtype.is_integer and dtype != dtypes.string:
                raise ValueError(f"`{what}_dtype` should be either integer or string for `{what}_index` "
                                 f"{TextFileIndex.WHOLE_LINE}, received: {dtype}")
        if vocab_size is not None and vocab_size <= 0:
            raise ValueError(f"`vocab_size` should be > 0, received: {vocab_size}")
        self._filename = filename
        self._key_index = key_index
        self._value_index = value_index
        self._vocab_size = vocab_size
        self._delimiter = delimiter
        self._name = name
        self._offset = value_index_offset
        super().__init__(key_dtype, value_dtype)

    def initialize(self, table: "InitializableLookupTableBase") -> graph_lib.Operation:
        _check_table_dtypes(table, self.key_dtype, self.value_dtype)
        graph = table.resource_handle.graph
        with graph.name_scope(self._name or "text_file_init"), graph.colocate_with(table.resource_handle.op):
            filename = op_util.to_tensor(self._filename, dtype=dtypes.string, name="asset_filepath")
            init_op = op_util.make_op(
                "InitializeTableFromTextFileV2", [table.resource_handle, filename], [],
                "InitializeTableFromTextFileV2",
                {"key_index": int(self._key_index), "value_index": int(self._value_index),
                 "vocab_size": -1 if self._vocab_size is None else int(self._vocab_size),
                 "delimiter": "" if self._delimiter is None else str(self._delimiter), "offset": int(self._offset)})
        graph.add_to_collection(graph_lib.GraphKeys.TABLE_INITIALIZERS, init_op)
        if op_util.static_value(filename) is not None:
            graph.add_to_collection(graph_lib.GraphKeys.ASSET_FILEPATHS, filename)
        return init_op

    @property
    def _shared_name(self) -> str:
        parts = [str(self._filename)]
        if self._vocab_size:
            parts.append(str(self._vocab_size))
        parts += [str(self._key_index), str(self._value_index)]
        if self._offset:
            parts.append(str(self._offset))
        return "hash_table_" + "_".join(parts)


class TextFileStringTableInitializer(TextFileInitializer):
    """A text file initializer from line numbers (int64) to the lines (strings)."""

    def __init__(self, filename: Any, key_column_index: int = TextFileIndex.LINE_NUMBER,
                 value_column_index: int = TextFileIndex.WHOLE_LINE, vocab_size: Optional[int] = None,
                 delimiter: str = "\t", name: str = "text_file_string_table_init") -> None:
        super().__init__(filename, dtypes.int64, key_column_index, dtypes.string, value_column_index,
                         vocab_size=vocab_size, delimiter=delimiter, name=name)


class TextFileIdTableInitializer(TextFileInitializer):
    """A text file initializer from the lines (strings) to their line numbers (int64)."""

    def __init__(self, filename: Any, key_column_index: int = TextFileIndex.WHOLE_LINE,
                 value_column_index: int = TextFileIndex.LINE_NUMBER, vocab_size: Optional[int] = None,
                 delimiter: str = "\t", name: str = "text_file_id_table_init", key_dtype: Any = dtypes.string) -> None:
        super().__init__(filename, key_dtype, key_column_index, dtypes.int64, value_column_index,
                         vocab_size=vocab_size, delimiter=delimiter, name=name)


class LookupInterface:
    """What every table offers: its dtypes, ``lookup`` and ``size``."""

    def __init__(self, key_dtype: Any, value_dtype: Any) -> None:
        self._key_dtype = dtypes.as_dtype(key_dtype)
        self._value_dtype = dtypes.as_dtype(value_dtype)

    @property
    def key_dtype(self) -> dtypes.DType:
        return self._key_dtype

    @property
    def value_dtype(self) -> dtypes.DType:
        return self._value_dtype

    def _check_keys(self, keys: Any) -> Any:
        if not isinstance(keys, sparse_tensor.SparseTensor):
            keys = op_util.to_tensor(keys, dtype=self._key_dtype if not op_util.is_tensor_like(keys) else None)
        if keys.dtype.base_dtype != self._key_dtype:
            raise TypeError(f"Dtype of argument `keys` must be {self._key_dtype}, received: {keys.dtype}")
        return keys


def _with_values_of(keys: Any, values: graph_lib.Tensor) -> Any:
    if isinstance(keys, sparse_tensor.SparseTensor):
        return sparse_tensor.SparseTensor(keys.indices, values, keys.dense_shape)
    return values


class InitializableLookupTableBase(LookupInterface):
    """A table made by an initializer: its resource op, its initializer op and default value."""

    def __init__(self, default_value: Any, initializer: TableInitializerBase) -> None:
        super().__init__(initializer.key_dtype, initializer.value_dtype)
        self._default_value = op_util.to_tensor(default_value, dtype=self._value_dtype)
        if not self._default_value.shape.is_compatible_with([]):
            raise ValueError(f"The default value of a table must be a scalar, got shape {self._default_value.shape}")
        self._initializer = initializer
        self._resource_handle = self._create_resource()
        self._init_op = initializer.initialize(self)

    def _create_resource(self) -> graph_lib.Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not say how its table is made")

    @property
    def resource_handle(self) -> graph_lib.Tensor:
        return self._resource_handle

    @property
    def default_value(self) -> graph_lib.Tensor:
        return self._default_value

    @property
    def initializer(self) -> graph_lib.Operation:
        return self._init_op

    @property
    def name(self) -> str:
        return self._resource_handle.op.name.split("/")[-1]

    def size(self, name: Optional[str] = None) -> graph_lib.Tensor:
        """The number of entries (0 before the table is initialized), a scalar int64."""
        graph = self._resource_handle.graph
        with graph.as_default(), graph.name_scope(name or f"{self.name}_Size"), \
                graph.colocate_with(self._resource_handle.op):
            return op_util.make_tensor("LookupTableSizeV2", [self._resource_handle], dtypes.int64, [],
                                       "LookupTableSizeV2")

    def lookup(self, keys: Any, name: Optional[str] = None) -> Any:
        """The value of each key (the default value where it is absent), in the shape of ``keys``;
        a SparseTensor of keys gives a SparseTensor of values."""
        graph = self._resource_handle.graph
        with graph.as_default():
            keys = self._check_keys(keys)
        key_tensor = keys.values if isinstance(keys, sparse_tensor.SparseTensor) else keys
        with graph.as_default(), graph.name_scope(name or f"{self.name}_Lookup"), \
                graph.colocate_with(self._resource_handle.op):
            values = op_util.make_tensor("LookupTableFindV2", [self._resource_handle, key_tensor, self._default_value],
                                         self._value_dtype, key_tensor.shape, "LookupTableFindV2")
        return _with_values_of(keys, values)


class StaticHashTable(InitializableLookupTableBase):
    """A hash table filled once by its initializer and immutable afterwards
    (``tf.compat.v1.lookup.StaticHashTable``): run ``tf.tables_initializer()`` before looking up."""

    def __init__(self, initializer: TableInitializerBase, default_value: Any, name: Optional[str] = None,
                 experimental_is_anonymous: bool = False) -> None:
        if experimental_is_anonymous:
            raise ValueError("experimental_is_anonymous tables are not implemented: tables are named resources")
        self._shared_name = initializer._shared_name or f"hash_table_{uuid.uuid4()}"
        self._name = name or "hash_table"
        super().__init__(default_value, initializer)

    def _create_resource(self) -> graph_lib.Tensor:
        graph = graph_lib.get_default_graph()
        return op_util.make_tensor(
            "HashTableV2", [], dtypes.resource, [], self._name,
            {"shared_name": self._shared_name, "container": graph.current_container,
             "key_dtype": self._initializer.key_dtype.name, "value_dtype": self._initializer.value_dtype.name,
             "use_node_name_sharing": False})


class HashTable(StaticHashTable):
    """TF1's older name of ``StaticHashTable``, with ``init`` for its initializer."""

    @property
    def init(self) -> graph_lib.Operation:
        return self.initializer


class HasherSpec(collections.namedtuple("HasherSpec", ["hasher", "key"])):
    """Which string hash puts keys out of the vocabulary into buckets: ``fasthash``
    (Fingerprint64), ``stronghash`` (SipHash with ``key``) or ``legacy``."""

    __slots__ = ()


FastHashSpec = HasherSpec("fasthash", None)


class StrongHashSpec(HasherSpec):
    """The keyed strong hash: ``key`` is two integers."""

    __slots__ = ()

    def __new__(cls, key: Any) -> "StrongHashSpec":
        if len(key) != 2:
            raise ValueError(f"`key` must have size 2, received {len(key)}")
        if not isinstance(key[0], int) or not isinstance(key[1], int):
            raise TypeError(f"Invalid key {key}. Must be unsigned integer values.")
        return super().__new__(cls, "stronghash", key)


def _hash_buckets(hasher_spec: HasherSpec, strings: graph_lib.Tensor, num_buckets: int) -> graph_lib.Tensor:
    if not isinstance(hasher_spec, HasherSpec):
        raise TypeError(f"`hasher_spec` must be of type HasherSpec, got {type(hasher_spec)}.")
    if hasher_spec.hasher == "fasthash":
        return string_ops.string_to_hash_bucket_fast(strings, num_buckets, name="hash_bucket")
    if hasher_spec.hasher == "legacy":
        return string_ops.string_to_hash_bucket(strings, num_buckets, name="hash_bucket")
    if hasher_spec.hasher == "stronghash":
        return string_ops.string_to_hash_bucket_strong(strings, num_buckets, hasher_spec.key, name="hash_bucket")
    raise ValueError(f"Found unknown hasher {hasher_spec.hasher} in `hasher_spec`")


class IdTableWithHashBuckets(LookupInterface):
    """A string (or integer) to id table whose keys out of the vocabulary get an id in
    ``[size, size + num_oov_buckets)`` by their hash; with no table, every key is hashed."""

    def __init__(self, table: Optional[InitializableLookupTableBase], num_oov_buckets: int,
                 hasher_spec: HasherSpec = FastHashSpec, name: Optional[str] = None, key_dtype: Any = None) -> None:
        if table is not None:
            key_dtype = table.key_dtype if key_dtype is None else dtypes.as_dtype(key_dtype)
            if table.key_dtype not in (dtypes.int64, dtypes.string):
                raise TypeError(f"Invalid `key_dtype`, expected one of (int64, string), received {key_dtype}.")
            if table.key_dtype.is_integer != key_dtype.is_integer:
                raise TypeError(f"Invalid `key dtype`, expected {'integer' if key_dtype.is_integer else 'non-integer'} "
                                f"but got {table.key_dtype}.")
            if table.value_dtype != dtypes.int64:
                raise TypeError(f"Invalid `value_dtype`: expected int64 but got {table.value_dtype}.")
        else:
            if num_oov_buckets <= 0:
                raise ValueError("`oov_buckets` must be > 0 if no `table` is supplied.")
            key_dtype = dtypes.string if key_dtype is None else dtypes.as_dtype(key_dtype)
        if not key_dtype.is_integer and key_dtype != dtypes.string:
            raise TypeError(f"Invalid `key_dtype`, expected integer or string, got {key_dtype}.")
        if not isinstance(hasher_spec, HasherSpec):
            raise TypeError(f"`hasher_spec` must be of type HasherSpec, got {type(hasher_spec)}.")
        self._table = table
        self._num_oov_buckets = num_oov_buckets
        self._hasher_spec = hasher_spec
        self._table_name = (name.rstrip("/") if name else (table.name if table is not None else "hash_bucket"))
        super().__init__(key_dtype, dtypes.int64)

    @property
    def name(self) -> str:
        return self._table_name.split("/")[-1]

    @property
    def resource_handle(self) -> Optional[graph_lib.Tensor]:
        return None if self._table is None else self._table.resource_handle

    @property
    def initializer(self) -> graph_lib.Operation:
        if self._table is not None:
            return self._table.initializer
        return control_flow_ops.no_op(name="init")

    init = initializer

    def size(self, name: Optional[str] = None) -> graph_lib.Tensor:
        """The vocabulary's size plus the number of OOV buckets."""
        with self._graph().as_default(), self._graph().name_scope(name or f"{self.name}_Size"):
            table_size = (self._table.size() if self._table is not None
                          else array_ops.constant(0, dtype=dtypes.int64))
            return math_ops.add(table_size, self._num_oov_buckets)

    def _graph(self) -> graph_lib.Graph:
        """The table's graph: ops on it go there wherever they are asked for (no table: the default)."""
        return self._table.resource_handle.graph if self._table is not None else graph_lib.get_default_graph()

    def lookup(self, keys: Any, name: Optional[str] = None) -> Any:
        with self._graph().as_default():
            keys = self._check_keys(keys)
        values = keys.values if isinstance(keys, sparse_tensor.SparseTensor) else keys
        if self._table is not None and self._table.key_dtype == dtypes.int64:
            values = math_ops.cast(values, dtypes.int64)
        if self._num_oov_buckets == 0:
            assert self._table is not None  # a table without buckets is refused by __init__
            return _with_values_of(keys, self._table.lookup(values, name=name))
        with self._graph().as_default(), self._graph().name_scope(name or f"{self.name}_Lookup"):
            strings = values if values.dtype == dtypes.string else string_ops.as_string(values)
            buckets = _hash_buckets(self._hasher_spec, strings, self._num_oov_buckets)
            if self._table is not None:
                ids = self._table.lookup(values)
                buckets = math_ops.add(buckets, self._table.size())
                in_vocabulary = math_ops.not_equal(ids, self._table.default_value)
                ids = indexing_ops.where(in_vocabulary, ids, buckets)
            else:
                ids = buckets
        return _with_values_of(keys, ids)


class StaticVocabularyTable(IdTableWithHashBuckets):
    """A vocabulary table with ``num_oov_buckets`` (> 0) hashed by Fingerprint64
    (``tf.compat.v1.lookup.StaticVocabularyTable``)."""

    def __init__(self, initializer: Optional[TableInitializerBase], num_oov_buckets: int,
                 lookup_key_dtype: Any = None, name: Optional[str] = None,
                 experimental_is_anonymous: bool = False) -> None:
        if num_oov_buckets <= 0:
            raise ValueError("`num_oov_buckets` must be > 0; use StaticHashTable.")
        table = None
        if initializer is not None:
            if initializer.key_dtype not in (dtypes.int64, dtypes.string):
                raise TypeError(f"Invalid `key_dtype`, expected one of (int64, string), but got "
                                f"{initializer.key_dtype}.")
            if initializer.value_dtype != dtypes.int64:
                raise TypeError(f"Invalid `value_dtype`, expected int64 but got {initializer.value_dtype}.")
            table = HashTable(initializer, default_value=-1, experimental_is_anonymous=experimental_is_anonymous)
        super().__init__(table, num_oov_buckets, FastHashSpec, name=name,
                         key_dtype=lookup_key_dtype if table is not None else dtypes.string)


def index_table_from_tensor(vocabulary_list: Any, num_oov_buckets: int = 0, default_value: int = -1,
                            hasher_spec: HasherSpec = FastHashSpec, dtype: Any = dtypes.string,
                            name: Optional[str] = None) -> LookupInterface:
    """A table from each word of ``vocabulary_list`` to its position; other keys get
    ``default_value``, or with ``num_oov_buckets`` a hashed id after the vocabulary."""
    if vocabulary_list is None:
        raise ValueError("`vocabulary_list` must be specified.")
    if num_oov_buckets < 0:
        raise ValueError(f"`num_oov_buckets` must be greater or equal than 0, got {num_oov_buckets}.")
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_integer and dtype.base_dtype != dtypes.string:
        raise TypeError("`dtype` must either be integer or string.")
    graph = graph_lib.get_default_graph()
    with graph.name_scope(name or "string_to_index"):
        keys = op_util.to_tensor(vocabulary_list)
        if keys.dtype.is_integer != dtype.is_integer:
            raise ValueError(f"Invalid `dtype`: Expected {'integer' if dtype.is_integer else 'non-integer'}, "
                             f"got {keys.dtype}.")
        if not dtype.is_integer and keys.dtype.base_dtype != dtype:
            raise ValueError(f"Invalid `dtype`: Expected {dtype}, got {keys.dtype}.")
        num_elements = array_ops.size(keys)
        values = math_ops.cast(math_ops.range(num_elements), dtypes.int64)
        with graph.name_scope("hash_table"):
            table_keys = math_ops.cast(keys, dtypes.int64) if keys.dtype.is_integer else keys
            init = KeyValueTensorInitializer(table_keys, values, table_keys.dtype.base_dtype, dtypes.int64,
                                             name="table_init")
            table: LookupInterface = StaticHashTable(init, default_value)
        if num_oov_buckets:
            table = IdTableWithHashBuckets(table, num_oov_buckets=num_oov_buckets,  # type: ignore[arg-type]
                                           hasher_spec=hasher_spec, key_dtype=dtype)
        return table


def index_table_from_file(vocabulary_file: Any = None, num_oov_buckets: int = 0, vocab_size: Optional[int] = None,
                          default_value: int = -1, hasher_spec: HasherSpec = FastHashSpec,
                          key_dtype: Any = dtypes.string, name: Optional[str] = None,
                          key_column_index: int = TextFileIndex.WHOLE_LINE,
                          value_column_index: int = TextFileIndex.LINE_NUMBER,
                          delimiter: str = "\t") -> LookupInterface:
    """A table from each line of ``vocabulary_file`` (or a column of it) to its line number;
    other keys as in ``index_table_from_tensor``."""
    if vocabulary_file is None or (isinstance(vocabulary_file, str) and not vocabulary_file):
        raise ValueError("`vocabulary_file` must be specified and must not be empty.")
    if num_oov_buckets < 0:
        raise ValueError(f"num_oov_buckets must be greater or equal than 0, got {num_oov_buckets}.")
    if vocab_size is not None and vocab_size < 1:
        raise ValueError(f"`vocab_size` must be greater than 0, got {vocab_size} for vocabulary_file: "
                         f"{vocabulary_file}.")
    key_dtype = dtypes.as_dtype(key_dtype)
    if not key_dtype.is_integer and key_dtype.base_dtype != dtypes.string:
        raise TypeError("Dtype for `keys` should be either integer or string.")
    graph = graph_lib.get_default_graph()
    with graph.name_scope(name or "string_to_index"):
        with graph.name_scope("hash_table"):
            init = TextFileIdTableInitializer(
                vocabulary_file, vocab_size=vocab_size, key_dtype=dtypes.int64 if key_dtype.is_integer else key_dtype,
                name="table_init", key_column_index=key_column_index, value_column_index=value_column_index,
                delimiter=delimiter)
            table: LookupInterface = StaticHashTable(init, default_value)
        if num_oov_buckets:
            table = IdTableWithHashBuckets(table, num_oov_buckets=num_oov_buckets,  # type: ignore[arg-type]
                                           hasher_spec=hasher_spec, key_dtype=key_dtype)
        return table
