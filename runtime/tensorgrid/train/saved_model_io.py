"""``tf.saved_model.loader.load`` and what writes it: a model for serving, in tensorgrid's own format.

An exported model is a directory another process loads into a session and runs by its
signatures, without the program that built it. TensorFlow's ``saved_model.pb`` (a protobuf
of MetaGraphDefs) is neither written nor read here; tensorgrid's directory holds:

- ``saved_model.json``: ``{"format": "tensorgrid.SavedModel:2", "meta_graphs": [{"tags": [...],
  "graph": "saved_model_0.meta", "signature_def": {key: {"inputs": {name: TensorInfo}, "outputs":
  {...}, "method_name"}}, "main_op": name | null}, ...]}``, one meta graph per tag set (an Estimator
  exports its TRAIN graph as ``train``, EVAL as ``eval``, PREDICT as ``serve``), a TensorInfo being
  ``{"name": "x:0", "dtype": "float32", "shape": [null, 2] | null, "coo_sparse": null}``, or for a
  SparseTensor ``{"name": "", ..., "coo_sparse": {"values_tensor_name", "indices_tensor_name",
  "dense_shape_tensor_name"}}`` (TensorFlow's COO encoding);
- ``saved_model_<i>.meta``: each meta graph's graph and collections (``train/meta_graph.py``'s JSON
  meta graph, devices cleared; a TRAIN graph's train op in the ``saved_model_train_op`` collection);
- ``variables/variables.index`` and ``.data``: a ``tf.train.Saver`` checkpoint of the variables of
  the first meta graph written (docs/checkpoint-format.md), which the others' variables are among;
- ``assets.extra/``: the files the exporter was given as ``assets_extra``.

The first format (``tensorgrid.SavedModel:1``: one meta graph, its tags and signatures at the top
of the manifest, its graph in ``saved_model.meta``) is still read. ``load`` imports the graph of
the requested tags into the session's, restores its variables, runs the main op (the tables' and
local variables' initializers) and returns the signatures, as TensorFlow's loader does.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Optional, Sequence

from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import sparse_tensor
from tensorgrid.train import meta_graph
from tensorgrid.train import saver as saver_lib

FORMAT = "tensorgrid.SavedModel:2"
SINGLE_GRAPH_FORMAT = "tensorgrid.SavedModel:1"
"""The first format, still read: one meta graph, in ``SINGLE_GRAPH_FILENAME``."""
MANIFEST_FILENAME = "saved_model.json"
SINGLE_GRAPH_FILENAME = "saved_model.meta"
VARIABLES_DIRECTORY = "variables"
VARIABLES_FILENAME = "variables"
EXTRA_ASSETS_DIRECTORY = "assets.extra"
SERVING = "serve"
TRAINING = "train"
EVAL = "eval"
TRAIN_OP_KEY = "saved_model_train_op"
"""The collection that holds a TRAIN meta graph's train op (TensorFlow's ``constants.TRAIN_OP_KEY``)."""
DEFAULT_SERVING_SIGNATURE_DEF_KEY = "serving_default"
DEFAULT_TRAIN_SIGNATURE_DEF_KEY = "train"
DEFAULT_EVAL_SIGNATURE_DEF_KEY = "eval"
PREDICT_METHOD_NAME = "tensorflow/serving/predict"
CLASSIFY_METHOD_NAME = "tensorflow/serving/classify"
REGRESS_METHOD_NAME = "tensorflow/serving/regress"
SUPERVISED_TRAIN_METHOD_NAME = "tensorflow/supervised/training"
SUPERVISED_EVAL_METHOD_NAME = "tensorflow/supervised/eval"


@dataclasses.dataclass(frozen=True)
class CooSparse:
    """The three tensors of a SparseTensor a signature names (TensorFlow's ``TensorInfo.CooSparse``)."""

    values_tensor_name: str
    indices_tensor_name: str
    dense_shape_tensor_name: str


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """A tensor a signature names (TensorFlow's ``TensorInfo``): a dense tensor by ``name``, a SparseTensor
    by its components (``coo_sparse``, with ``name`` empty, as in TensorFlow)."""

    name: str
    """The tensor's name in the loaded graph, ``op:index``; empty for a SparseTensor."""
    dtype: str
    """Its dtype's name (a SparseTensor's values'), ``float32``, ``string``, ..."""
    shape: Optional[list[Optional[int]]]
    """Its static shape, None in a dimension not known (None for an unknown rank)."""
    coo_sparse: Optional[CooSparse] = None
    """A SparseTensor's components; None for a dense tensor."""


@dataclasses.dataclass(frozen=True)
class SignatureDef:
    """The named inputs and outputs of one way to run the model (TensorFlow's ``SignatureDef``)."""

    inputs: dict[str, TensorInfo]
    outputs: dict[str, TensorInfo]
    method_name: str
    """``tensorflow/serving/predict``, ``.../classify``, ``.../regress``, ``tensorflow/supervised/training``
    or ``.../eval``."""


@dataclasses.dataclass(frozen=True)
class SavedModelMetaGraph:
    """What ``load`` returns: the tags the model was saved with and its signatures by key."""

    tags: list[str]
    signature_def: dict[str, SignatureDef]


def tensor_info(tensor: Any) -> TensorInfo:
    """The TensorInfo of a dense tensor or a SparseTensor (``tf.saved_model.utils.build_tensor_info``)."""
    shape = tensor.get_shape() if isinstance(tensor, (graph_lib.Tensor, sparse_tensor.SparseTensor)) else None
    known = None if shape is None or shape.ndims is None else shape.as_list()
    if isinstance(tensor, sparse_tensor.SparseTensor):
        coo = CooSparse(tensor.values.name, tensor.indices.name, tensor.dense_shape.name)
        return TensorInfo("", tensor.dtype.name, known, coo)
    if not isinstance(tensor, graph_lib.Tensor):
        raise TypeError(f"a signature names Tensors and SparseTensors, got {tensor!r} ({type(tensor).__name__})")
    return TensorInfo(tensor.name, tensor.dtype.name, known)


def tensor_from_tensor_info(info: TensorInfo, graph: Optional[graph_lib.Graph] = None,
                            import_scope: Optional[str] = None) -> Any:
    """The Tensor or SparseTensor a TensorInfo names in ``graph`` (the default graph), under
    ``import_scope`` (``tf.saved_model.utils.get_tensor_from_tensor_info``)."""
    graph = graph or graph_lib.get_default_graph()
    prefix = f"{import_scope}/" if import_scope else ""
    if info.coo_sparse is not None:
        coo = info.coo_sparse
        return sparse_tensor.SparseTensor(graph.get_tensor_by_name(prefix + coo.indices_tensor_name),
                                          graph.get_tensor_by_name(prefix + coo.values_tensor_name),
                                          graph.get_tensor_by_name(prefix + coo.dense_shape_tensor_name))
    if not info.name:
        raise ValueError(f"Invalid TensorInfo.encoding: {info!r} names neither a tensor nor a SparseTensor")
    return graph.get_tensor_by_name(prefix + info.name)


def contains_saved_model(export_dir: Any) -> bool:
    """Whether ``export_dir`` holds a model ``save`` wrote (``tf.saved_model.contains_saved_model``)."""
    return os.path.isfile(os.path.join(_path(export_dir), MANIFEST_FILENAME))


def variables_prefix(export_dir: Any) -> str:
    """The checkpoint prefix of a saved model's variables."""
    return os.path.join(_path(export_dir), VARIABLES_DIRECTORY, VARIABLES_FILENAME)


class SavedModelWriter:
    """Writes a saved model of one or more meta graphs, each under its own tag set (TensorFlow's
    ``SavedModelBuilder``): the variables are saved with the first meta graph added, so that one
    must hold every variable of the others (an Estimator adds its TRAIN graph first)."""

    def __init__(self, export_dir: str) -> None:
        if os.path.exists(export_dir):
            raise ValueError(f"Export directory already exists, and isn't empty. Please choose a different export "
                             f"directory, or delete all the contents of the specified directory: {export_dir}")
        self._export_dir = export_dir
        self._meta_graphs: list[dict[str, Any]] = []
        os.makedirs(os.path.join(export_dir, VARIABLES_DIRECTORY))

    def add_meta_graph(self, session: Any, tags: Sequence[str], signature_def_map: dict[str, SignatureDef],
                       main_op: Optional[graph_lib.Operation] = None, saver: Optional[saver_lib.Saver] = None,
                       train_op: Any = None) -> None:
        """Adds the session's graph under ``tags`` (a tag set not added yet) with its signatures; the
        first graph added also saves its variables' values in the session. ``train_op`` (a TRAIN
        graph's) joins the ``saved_model_train_op`` collection, for a loader to run."""
        tag_set = sorted(set(tags))
        if not tag_set:
            raise ValueError("A meta graph needs at least one tag, e.g. tf.saved_model.tag_constants.SERVING")
        for added in self._meta_graphs:
            if sorted(set(added["tags"])) == tag_set:
                raise ValueError(f"A meta graph with tags {tag_set} was already added to {self._export_dir}")
        for key, signature in signature_def_map.items():
            if not isinstance(signature, SignatureDef):
                raise TypeError(f"signature_def_map[{key!r}] must be a SignatureDef, got {type(signature).__name__}")
        graph = session.graph
        graph_filename = f"saved_model_{len(self._meta_graphs)}.meta"
        with graph.as_default():
            if train_op is not None:
                graph.add_to_collection(TRAIN_OP_KEY, train_op)
            if not self._meta_graphs and graph.get_collection(graph_lib.GraphKeys.GLOBAL_VARIABLES):
                if saver is None:
                    saver = saver_lib.Saver(allow_empty=True)
                saver.save(session, variables_prefix(self._export_dir), write_meta_graph=False, write_state=False)
            meta_graph.export_meta_graph(os.path.join(self._export_dir, graph_filename), graph=graph,
                                         clear_devices=True)
        self._meta_graphs.append({
            "tags": list(tags), "graph": graph_filename,
            "signature_def": {key: dataclasses.asdict(signature) for key, signature in signature_def_map.items()},
            "main_op": main_op.name if main_op is not None else None})

    def save(self) -> None:
        """Writes the manifest, which makes the directory a saved model (``contains_saved_model``)."""
        if not self._meta_graphs:
            raise ValueError(f"No meta graph was added to the saved model at {self._export_dir}")
        with open(os.path.join(self._export_dir, MANIFEST_FILENAME), "w", encoding="utf-8") as f:
            json.dump({"format": FORMAT, "meta_graphs": self._meta_graphs}, f, indent=1)


def save(export_dir: str, session: Any, tags: Sequence[str], signature_def_map: dict[str, SignatureDef],
         main_op: Optional[graph_lib.Operation] = None, saver: Optional[saver_lib.Saver] = None) -> None:
    """Writes the session's graph, its variables' values in the session and the signatures to
    ``export_dir`` (which must not exist yet): a saved model of one meta graph."""
    writer = SavedModelWriter(export_dir)
    writer.add_meta_graph(session, tags, signature_def_map, main_op, saver)
    writer.save()


def _path(export_dir: Any) -> str:
    return os.fsdecode(export_dir) if isinstance(export_dir, (bytes, os.PathLike)) else str(export_dir)


def _read_meta_graphs(export_dir: str) -> list[dict[str, Any]]:
    """The manifest's meta graphs (a first-format manifest read as one)."""
    path = os.path.join(export_dir, MANIFEST_FILENAME)
    if not os.path.isfile(path):
        if os.path.isfile(os.path.join(export_dir, "saved_model.pb")):
            raise OSError(f"{export_dir} is a TensorFlow SavedModel (saved_model.pb): tensorgrid reads only the "
                          f"models its own export_saved_model writes ({MANIFEST_FILENAME}, docs/differences.md)")
        raise OSError(f"SavedModel file does not exist at: {export_dir}/{{{MANIFEST_FILENAME}}}")
    with open(path, encoding="utf-8") as f:
        manifest: dict[str, Any] = json.load(f)
    if manifest.get("format") == SINGLE_GRAPH_FORMAT:
        return [{"tags": manifest["tags"], "graph": SINGLE_GRAPH_FILENAME, "signature_def": manifest["signature_def"],
                 "main_op": manifest["main_op"]}]
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{path} is not a tensorgrid saved model: format {manifest.get('format')!r}, "
                         f"expected {FORMAT!r} or {SINGLE_GRAPH_FORMAT!r}")
    meta_graphs: list[dict[str, Any]] = manifest["meta_graphs"]
    return meta_graphs


def _signature(stored: dict[str, Any], prefix: str) -> SignatureDef:
    def info_of(info: dict[str, Any]) -> TensorInfo:
        coo = info.get("coo_sparse")
        if coo is not None:
            return TensorInfo("", info["dtype"], info["shape"], CooSparse(**{
                field: prefix + name for field, name in coo.items()}))
        return TensorInfo(prefix + info["name"], info["dtype"], info["shape"])

    return SignatureDef({key: info_of(info) for key, info in stored["inputs"].items()},
                        {key: info_of(info) for key, info in stored["outputs"].items()}, stored["method_name"])


def load(sess: Any, tags: Sequence[str], export_dir: Any, import_scope: Optional[str] = None,
         **saver_kwargs: Any) -> SavedModelMetaGraph:
    """Loads the model of ``export_dir`` saved with exactly ``tags`` into ``sess``'s graph (under
    ``import_scope``): its variables restored and its main op run, ready for its signatures."""
    export_dir = _path(export_dir)
    meta_graphs = _read_meta_graphs(export_dir)
    wanted = sorted(set(tags))
    found = [stored for stored in meta_graphs if sorted(set(stored["tags"])) == wanted]
    if not found:
        available = [sorted(set(stored["tags"])) for stored in meta_graphs]
        raise RuntimeError(f"MetaGraphDef associated with tags {wanted} could not be found in SavedModel, with "
                           f"available tags {available}")
    stored_graph = found[0]
    with sess.graph.as_default():
        saver = meta_graph.import_meta_graph(os.path.join(export_dir, stored_graph["graph"]),
                                             import_scope=import_scope)
        if saver is not None:
            saver.restore(sess, variables_prefix(export_dir))
        prefix = f"{import_scope}/" if import_scope else ""
        if stored_graph["main_op"]:
            sess.run(sess.graph.get_operation_by_name(prefix + stored_graph["main_op"]))
    signatures = {key: _signature(stored, prefix) for key, stored in stored_graph["signature_def"].items()}
    return SavedModelMetaGraph(list(stored_graph["tags"]), signatures)
