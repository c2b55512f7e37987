"""``tf.train.export_meta_graph`` and ``import_meta_graph``: a graph and its collections in
one file, so another process can rebuild the model and restore a checkpoint into it.

The file is tensorgrid's own (TensorFlow's ``.meta`` protobufs are refused here with an
error saying so, and ours do not load there): JSON holding the GraphDef in its wire form (base64 of graph.proto's bytes, the
lossless codec of the distributed layer) and every collection whose items it can name:
tensors, operations, variables (by their ops' names), and plain numbers and strings.
Collections of other Python objects (queue runners) are left out, with a log line. The savers
collection is left out silently: every checkpoint save writes a meta graph, and what TensorFlow
keeps of a Saver there (its SaverDef) ``import_meta_graph`` rebuilds as a Saver of the global
variables.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
from typing import Any, Optional, Sequence

from tensorgrid.distributed import graph_codec
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import graph_rebuild
from tensorgrid.ops import variables
from tensorgrid.train import saver as saver_lib
from tensorgrid.v1 import graph_pb2

log = logging.getLogger("tensorgrid.train")

FORMAT = "tensorgrid.MetaGraph:1"


@dataclasses.dataclass
class MetaGraphDef:
    """A graph with its collections (``export_meta_graph``'s result)."""

    graph_def: Any
    collections: dict[str, list[dict[str, Any]]]

    def to_json(self) -> str:
        proto = graph_codec.to_proto(self.graph_def).SerializeToString()
        return json.dumps({"format": FORMAT, "graph_def": base64.b64encode(proto).decode(),
                           "collections": self.collections})

    @staticmethod
    def from_bytes(content: bytes, where: str) -> "MetaGraphDef":
        """Reads what ``to_json`` wrote; TensorFlow's own ``.meta`` files are refused by name."""
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{where} is not a tensorgrid meta graph: it is binary, as TensorFlow's "
                             f"MetaGraphDef protobufs (.meta files written by TensorFlow) are; tensorgrid "
                             f"reads only the JSON meta graphs its own export_meta_graph writes (build the "
                             f"model in code, or export it from tensorgrid, then restore the checkpoint)") from None
        if text.lstrip().startswith(("meta_info_def", "graph_def")):
            raise ValueError(f"{where} is not a tensorgrid meta graph: it is a TensorFlow MetaGraphDef in "
                             f"protobuf text format (export_meta_graph(as_text=True) in TensorFlow); tensorgrid "
                             f"reads only the JSON meta graphs its own export_meta_graph writes")
        return MetaGraphDef.from_json(text, where)

    @staticmethod
    def from_json(text: str, where: str) -> "MetaGraphDef":
        try:
            content = json.loads(text)
            if content.get("format") != FORMAT:
                raise ValueError(f"format is {content.get('format')!r}, expected {FORMAT!r}")
            proto = graph_pb2.GraphDef.FromString(base64.b64decode(content["graph_def"]))
            return MetaGraphDef(graph_codec.from_proto(proto), dict(content["collections"]))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"{where} is not a tensorgrid meta graph: {e}") from None


def _item(value: Any) -> Optional[dict[str, Any]]:
    if isinstance(value, variables.Variable):
        return {"variable": value.to_variable_def()}
    if isinstance(value, graph_lib.Tensor):
        return {"tensor": value.name}
    if isinstance(value, graph_lib.Operation):
        return {"operation": value.name}
    if isinstance(value, (bool, int, float, str)):
        return {"value": value}
    return None


def export_meta_graph(filename: Optional[str] = None, collection_list: Optional[Sequence[str]] = None,
                      as_text: bool = False, graph: Optional[graph_lib.Graph] = None, clear_devices: bool = False,
                      **unused: Any) -> MetaGraphDef:
    """The default graph (or ``graph``) and its collections; written to ``filename`` when given."""
    graph = graph or graph_lib.get_default_graph()
    graph_def = graph.as_graph_def()
    if clear_devices:
        for node in graph_def.nodes:
            node.device = ""
    collections: dict[str, list[dict[str, Any]]] = {}
    for key in collection_list if collection_list is not None else graph.get_all_collection_keys():
        items = [_item(v) for v in graph.get_collection(key)]
        if any(i is None for i in items):
            # The runtime's own collections ("__varscope") are Python state, and the savers are
            # rebuilt by import_meta_graph; only the program's other collections are news.
            quiet = key.startswith("__") or key == graph_lib.GraphKeys.SAVERS
            (log.debug if quiet else log.info)(
                "Collection %r holds objects a meta graph cannot name; it is left out", key)
            continue
        collections[key] = [i for i in items if i is not None]
    meta = MetaGraphDef(graph_def, collections)
    if filename:
        with open(filename, "w", encoding="utf-8") as f:
            f.write(meta.to_json())
    return meta


def import_meta_graph(meta_graph_or_file: Any, clear_devices: bool = False,
                      import_scope: Optional[str] = None, **unused: Any) -> Optional[saver_lib.Saver]:
    """Adds the meta graph's nodes and collections to the default graph; returns a Saver of its
    global variables (None when it has none)."""
    if isinstance(meta_graph_or_file, MetaGraphDef):
        meta = meta_graph_or_file
    else:
        with open(meta_graph_or_file, "rb") as f:
            meta = MetaGraphDef.from_bytes(f.read(), str(meta_graph_or_file))
    graph = graph_lib.get_default_graph()
    prefix = f"{import_scope}/" if import_scope else ""
    nodes = []
    for node in meta.graph_def.nodes:
        node = dataclasses.replace(node, name=prefix + node.name, device="" if clear_devices else node.device,
                                   inputs=[(f"^{prefix}{i[1:]}" if i.startswith("^") else prefix + i)
                                           for i in node.inputs])
        nodes.append(node)
    graph_rebuild.rebuild_graph(dataclasses.replace(meta.graph_def, nodes=nodes), graph)
    for node in nodes:  # later ops and scopes do not take the imported names
        parts = node.name.split("/")
        for end in range(1, len(parts) + 1):
            graph.unique_name("/".join(parts[:end]))
    rebuilt: dict[str, variables.Variable] = {}  # one Variable per variable, whatever collections hold it
    for key, items in meta.collections.items():
        for item in items:
            if "variable" in item:
                name = item["variable"]["variable_name"]
                if name not in rebuilt:
                    rebuilt[name] = variables.Variable(variable_def=item["variable"], import_scope=import_scope)
                graph.add_to_collection(key, rebuilt[name])
            elif "tensor" in item:
                graph.add_to_collection(key, graph.get_tensor_by_name(prefix + item["tensor"]))
            elif "operation" in item:
                graph.add_to_collection(key, graph.get_operation_by_name(prefix + item["operation"]))
            else:
                graph.add_to_collection(key, item["value"])
    if not graph.get_collection(graph_lib.GraphKeys.GLOBAL_VARIABLES):
        return None
    if not import_scope:
        return saver_lib.Saver()
    # Under an import scope the variables keep their checkpoint keys: the names they were saved with.
    keys: dict[str, Any] = {}
    for name, variable in rebuilt.items():
        info = variable._get_save_slice_info()
        if info is not None:
            keys.setdefault(info.full_name[len(prefix):], []).append(variable)
        elif variable in graph.get_collection(graph_lib.GraphKeys.GLOBAL_VARIABLES):
            keys[name.rsplit(":", 1)[0]] = variable
    return saver_lib.Saver(var_list=keys)
