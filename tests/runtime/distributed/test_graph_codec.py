"""Graphs survive the wire: framework GraphDef -> protobuf bytes -> GraphDef is lossless,
and a malformed GraphDef from a peer is refused with an error naming the node and value."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.distributed import graph_codec
from tensorgrid.framework import dtypes
from tensorgrid.framework import graph_def as graph_def_lib
from tensorgrid.framework import graph_rebuild
from tensorgrid.v1 import graph_pb2


def same(a: Any, b: Any) -> bool:
    """Equality that also requires identical types (list vs tuple, np.float32 vs float,
    array dtype and shape), NaN equal to NaN, and the sign of zero."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype == object:
            return all(same(x, y) for x, y in zip(a.flat, b.flat))
        return a.tobytes() == b.tobytes()
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return (a == b and math.copysign(1, a) == math.copysign(1, b)) or (a != a and b != b)
    return bool(a == b)


def same_node(a: graph_def_lib.NodeDef, b: graph_def_lib.NodeDef) -> bool:
    return (a.name, a.op, a.inputs, a.device, a.output_dtypes, a.output_shapes) == \
        (b.name, b.op, b.inputs, b.device, b.output_dtypes, b.output_shapes) and \
        a.attrs.keys() == b.attrs.keys() and all(same(a.attrs[k], b.attrs[k]) for k in a.attrs)


def over_the_wire(graph_def: graph_def_lib.GraphDef) -> graph_def_lib.GraphDef:
    data = graph_codec.to_proto(graph_def).SerializeToString()
    return graph_codec.from_proto(graph_pb2.GraphDef.FromString(data))


def node(name: str = "n", op: str = "NoOp", inputs: Any = (), attrs: Any = None, output_dtypes: Any = (),
         output_shapes: Any = ()) -> graph_def_lib.NodeDef:
    return graph_def_lib.NodeDef(name=name, op=op, inputs=list(inputs), device="", attrs=dict(attrs or {}),
                                 output_dtypes=list(output_dtypes), output_shapes=list(output_shapes))


ATTR_VALUES = {
    "none": None,
    "true": True,
    "false": False,
    "int": -7,
    "int64_extremes": [-(1 << 63), (1 << 63) - 1],
    "float": 2.5,
    "negative_zero": -0.0,
    "nan_inf": [float("nan"), float("inf"), float("-inf")],
    "str": "float32",
    "empty_str": "",
    "unicode": "héllo ✓",
    "bytes": b"\x00\xff\x80",
    "dtype": tf.float32,
    "ref_dtype": tf.float32_ref,
    "string_dtype": dtypes.string,
    "shape": (None, 784),
    "scalar_shape": (),
    "tuple_with_negative": (-1, 2),
    "tuple_of_str": ("a", "b"),
    "tuple_of_bools": (True, False),
    "empty_list": [],
    "list_of_str": ["loc:@w1", "loc:@w2"],
    "nested": [[1, [2.0, None]], (), ("x", b"y"), [tf.int32]],
    "numpy_float32_scalar": np.float32(1.5),
    "numpy_float64_scalar": np.float64(-2.0),
    "numpy_int64_scalar": np.int64(3),
    "numpy_bool_scalar": np.bool_(True),
    "array_0d": np.array(3.25, np.float64),
    "array_empty": np.zeros((0, 3), np.float16),
    "array_bool": np.array([[True, False], [False, True]]),
    "array_uint8": np.arange(256, dtype=np.uint8),
    "array_int32": np.array([[1, -2], [3, 2 ** 31 - 1]], np.int32),
    "array_int64": np.array([-(1 << 63), 0], np.int64),
    "array_float16": np.array([0.5, -1.0, np.inf], np.float16),
    "array_float32_nan": np.array([np.nan, -0.0, 1e-30], np.float32),
    "array_strings": np.array([["a", b"\xff"], ["", "é"]], dtype=object),
    "array_strings_empty": np.empty((0, 2), dtype=object),
    "array_non_contiguous": np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2],
}


@pytest.mark.parametrize("value", ATTR_VALUES.values(), ids=list(ATTR_VALUES))
def test_every_attr_kind_round_trips_exactly(value: Any) -> None:
    graph_def = graph_def_lib.GraphDef(nodes=[node(attrs={"value": value})], version=1)
    decoded = over_the_wire(graph_def).nodes[0].attrs["value"]
    assert same(decoded, value), (value, decoded)
    if isinstance(decoded, np.ndarray):
        assert decoded.flags.writeable and decoded.flags.c_contiguous


def test_a_big_endian_array_arrives_with_the_same_values_in_native_order() -> None:
    value = np.arange(4, dtype=">i4")
    decoded = over_the_wire(graph_def_lib.GraphDef(nodes=[node(attrs={"v": value})])).nodes[0].attrs["v"]
    assert decoded.dtype == np.int32 and decoded.tolist() == [0, 1, 2, 3]


def build_mlp() -> tf.Graph:
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, 784], name="x")
        labels = tf.placeholder(tf.int32, [None], name="labels")
        with tf.device("/job:ps/task:0"):
            w1 = tf.Variable(tf.random_normal([784, 32], stddev=0.1, seed=1), name="w1")
            b1 = tf.Variable(tf.zeros([32]), name="b1")
            w2 = tf.Variable(tf.truncated_normal([32, 10], stddev=0.1, seed=2), name="w2")
        with tf.device("/job:worker/task:0"):
            hidden = tf.nn.relu(tf.matmul(x, w1) + b1)
            logits = tf.matmul(hidden, w2)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
            grads = tf.gradients(loss, [w1, b1, w2])
            tf.group(*[tf.assign_sub(v, 0.1 * g) for v, g in zip([w1, b1, w2], grads)], name="train")
        tf.global_variables_initializer()
    return graph


def test_an_mlp_with_gradients_round_trips_and_reimports_to_identical_nodes() -> None:
    graph = build_mlp()
    original = graph.as_graph_def()
    decoded = over_the_wire(original)
    assert decoded.version == original.version
    assert [n.name for n in decoded.nodes] == [n.name for n in original.nodes]
    for a, b in zip(original.nodes, decoded.nodes):
        assert same_node(a, b), (a, b)
    reimported = graph_rebuild.rebuild_graph(decoded).as_graph_def()
    assert len(reimported.nodes) == len(original.nodes)
    for a, b in zip(original.nodes, reimported.nodes):
        assert same_node(a, b), (a, b)
    assert {n.device for n in reimported.nodes} >= {"/job:ps/task:0", "/job:worker/task:0"}


def test_queues_accumulators_and_string_outputs_round_trip() -> None:
    graph = tf.Graph()
    with graph.as_default():
        queue = tf.FIFOQueue(4, [tf.float32, tf.int32], shapes=[[2], []], shared_name="q")
        queue.enqueue([tf.constant([1.0, 2.0]), tf.constant(3)])
        queue.dequeue()
        tf.ConditionalAccumulator(tf.float32, shape=[2])
        tf.Variable([1.0, 2.0], name="v")
        tf.report_uninitialized_variables()
    original = graph.as_graph_def()
    assert {"resource", "string"} <= {dt for n in original.nodes for dt in n.output_dtypes}
    for a, b in zip(original.nodes, over_the_wire(original).nodes):
        assert same_node(a, b), (a, b)


def test_the_nodes_added_since_a_version_extend_an_imported_graph() -> None:
    graph = tf.Graph()
    with graph.as_default():
        a = tf.constant([1.0, 2.0], name="a")
        first = graph.as_graph_def()
        tf.multiply(a, a, name="square")
        delta = graph.as_graph_def(from_version=first.version)
    assert [n.name for n in delta.nodes] == ["square"]
    receiver = graph_rebuild.rebuild_graph(over_the_wire(first))
    graph_rebuild.rebuild_graph(over_the_wire(delta), graph=receiver)
    with tf.Session(graph=receiver) as sess:
        np.testing.assert_array_equal(sess.run("square:0"), [1.0, 4.0])


# ------------------------------------------------------------------------------- malformed input

def valid_proto() -> graph_pb2.GraphDef:
    graph_def = graph_def_lib.GraphDef(nodes=[
        node("a", "Const", attrs={"value": np.array(1.0, np.float32), "dtype": "float32"},
             output_dtypes=["float32"], output_shapes=[()]),
        node("b", "Identity", inputs=["a:0", "^a"], output_dtypes=["float32"], output_shapes=[None]),
    ])
    return graph_codec.to_proto(graph_def)


def test_a_valid_proto_decodes() -> None:
    decoded = graph_codec.from_proto(valid_proto())
    assert decoded.nodes[1].inputs == ["a:0", "^a"] and decoded.nodes[1].output_shapes == [None]


@pytest.mark.parametrize("bad_input", ["", "a", "a:", "a:x", ":0", "^", "^a:0", "a:0:1", "^^a", "a:-1"])
def test_a_bad_input_reference_is_refused_naming_node_and_input(bad_input: str) -> None:
    proto = valid_proto()
    proto.node[1].input[0] = bad_input
    with pytest.raises(ValueError, match=re.escape(f"node 'b' has input {bad_input!r}; valid inputs are")):
        graph_codec.from_proto(proto)


def test_an_unknown_output_dtype_enum_is_refused() -> None:
    proto = valid_proto()
    proto.node[1].output_dtypes[0] = 42  # type: ignore[call-overload]
    with pytest.raises(ValueError, match=r"output 0 of node 'b' has unknown DataType 42; valid values are 1 "):
        graph_codec.from_proto(proto)


def test_dt_invalid_is_refused() -> None:
    proto = valid_proto()
    proto.node[0].output_dtypes[0] = 0  # type: ignore[call-overload]
    with pytest.raises(ValueError, match=r"output 0 of node 'a' has unknown DataType 0"):
        graph_codec.from_proto(proto)


def test_an_unknown_dtype_enum_in_an_attr_or_tensor_is_refused() -> None:
    proto = valid_proto()
    proto.node[0].attr["t"].type = 99  # type: ignore[assignment]
    with pytest.raises(ValueError, match=r"attr 't' of node 'a' has unknown DataType 99"):
        graph_codec.from_proto(proto)
    proto = valid_proto()
    proto.node[0].attr["value"].tensor.header.dtype = 77  # type: ignore[assignment]
    with pytest.raises(ValueError, match=r"attr 'value' of node 'a'.*unknown DataType 77"):
        graph_codec.from_proto(proto)


def test_an_attr_with_no_value_set_is_refused() -> None:
    proto = valid_proto()
    proto.node[1].attr["empty"].SetInParent()
    with pytest.raises(ValueError, match=r"attr 'empty' of node 'b' has no value set"):
        graph_codec.from_proto(proto)
    proto = valid_proto()
    proto.node[1].attr["nested"].list.value.add()
    with pytest.raises(ValueError, match=r"attr 'nested' of node 'b'\[0\] has no value set"):
        graph_codec.from_proto(proto)


def test_a_tensor_whose_content_does_not_match_its_header_is_refused() -> None:
    proto = valid_proto()
    proto.node[0].attr["value"].tensor.content = b"\x00\x00"
    with pytest.raises(ValueError, match=r"attr 'value' of node 'a'.*byte_size 4 but has 2 content bytes"):
        graph_codec.from_proto(proto)
    proto = valid_proto()
    proto.node[0].attr["value"].tensor.header.shape.dim.append(3)
    with pytest.raises(ValueError, match=r"attr 'value' of node 'a'.*need 12 bytes"):
        graph_codec.from_proto(proto)


def test_bad_shapes_are_refused() -> None:
    proto = valid_proto()
    proto.node[0].output_shapes[0].dim.append(-2)
    with pytest.raises(ValueError, match=r"output shape 0 of node 'a' has dimension -2"):
        graph_codec.from_proto(proto)
    proto = valid_proto()
    proto.node[1].output_shapes[0].dim.append(3)  # unknown_rank and a dim
    with pytest.raises(ValueError, match=r"output shape 0 of node 'b' has unknown_rank set but also dims"):
        graph_codec.from_proto(proto)
    proto = valid_proto()
    del proto.node[1].output_shapes[:]
    with pytest.raises(ValueError, match=r"node 'b' has 1 output dtypes but 0 output shapes"):
        graph_codec.from_proto(proto)


def test_empty_and_duplicate_names_and_empty_ops_are_refused() -> None:
    proto = valid_proto()
    proto.node[1].name = "a"
    with pytest.raises(ValueError, match=r"two nodes named 'a'"):
        graph_codec.from_proto(proto)
    proto = valid_proto()
    proto.node[1].name = ""
    with pytest.raises(ValueError, match=r"a node of op 'Identity' has an empty name"):
        graph_codec.from_proto(proto)
    proto = valid_proto()
    proto.node[1].op = ""
    with pytest.raises(ValueError, match=r"node 'b' has an empty op type"):
        graph_codec.from_proto(proto)


@pytest.mark.parametrize("value, error, message", [
    ({"k": 1}, TypeError, r"attr 'v' of node 'n' is \{'k': 1\} of type dict, which has no wire form"),
    ([1, {2}], TypeError, r"attr 'v' of node 'n'\[1\] is \{2\} of type set"),
    (1 << 64, ValueError, r"attr 'v' of node 'n' is 18446744073709551616, outside the int64 range"),
    (np.array(["text"]), TypeError, r"attr 'v' of node 'n' is a numpy value of dtype <U4"),
    (np.array([object()]), TypeError, r"attr 'v' of node 'n': a string tensor holds <object"),
    ("\udc80", ValueError, r"attr 'v' of node 'n' is a str that is not valid Unicode"),
])
def test_an_attr_value_without_a_wire_form_is_refused_naming_node_and_attr(
        value: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        graph_codec.to_proto(graph_def_lib.GraphDef(nodes=[node(attrs={"v": value})]))
