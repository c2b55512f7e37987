"""``tf.saved_model.loader.load`` and what writes it: a model for serving, in tensorgrid's own format.

An exported model is a directory another process loads into a session and runs by its
signatures, without the program that built it. TensorFlow's ``saved_model.pb`` (a protobuf
MetaGraphDef) is neither written nor read here; tensorgrid's directory holds:

- ``saved_model.json``: ``{"format": "tensorgrid.SavedModel:1", "tags": [...], "signature_def":
  {key: {"inputs": {name: TensorInfo}, "outputs": {...}, "method_name"}}, "main_op": name | null}``,
  a TensorInfo being ``{"name": "x:0", "dtype": "float32", "shape": [null, 2] | null}``;
- ``saved_model.meta``: the graph and its collections (``train/meta_graph.py``'s JSON meta graph,
  devices cleared);
- ``variables/variables.index`` and ``.data``: a ``tf.train.Saver`` checkpoint of its variables
  (docs/checkpoint-format.md);
- ``assets.extra/``: the files the exporter was given as ``assets_extra``.

``load`` imports the graph into the session's, restores the variables, runs the main op (the
tables' and local variables' initializers) and returns the signatures, as TensorFlow's loader does.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Optional, Sequence

from tensorgrid.framework import graph as graph_lib
from tensorgrid.train import meta_graph
from tensorgrid.train import saver as saver_lib

FORMAT = "tensorgrid.SavedModel:1"
MANIFEST_FILENAME = "saved_model.json"
META_GRAPH_FILENAME = "saved_model.meta"
VARIABLES_DIRECTORY = "variables"
VARIABLES_FILENAME = "variables"
EXTRA_ASSETS_DIRECTORY = "assets.extra"
SERVING = "serve"
TRAINING = "train"
DEFAULT_SERVING_SIGNATURE_DEF_KEY = "serving_default"
PREDICT_METHOD_NAME = "tensorflow/serving/predict"
CLASSIFY_METHOD_NAME = "tensorflow/serving/classify"
REGRESS_METHOD_NAME = "tensorflow/serving/regress"


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """A tensor a signature names (TensorFlow's ``TensorInfo`` of a dense tensor)."""

    name: str
    """The tensor's name in the loaded graph, ``op:index``."""
    dtype: str
    """Its dtype's name, ``float32``, ``string``, ..."""
    shape: Optional[list[Optional[int]]]
    """Its static shape, None in a dimension not known (None for an unknown rank)."""


@dataclasses.dataclass(frozen=True)
class SignatureDef:
    """The named inputs and outputs of one way to run the model (TensorFlow's ``SignatureDef``)."""

    inputs: dict[str, TensorInfo]
    outputs: dict[str, TensorInfo]
    method_name: str
    """``tensorflow/serving/predict``, ``.../classify`` or ``.../regress``."""


@dataclasses.dataclass(frozen=True)
class SavedModelMetaGraph:
    """What ``load`` returns: the tags the model was saved with and its signatures by key."""

    tags: list[str]
    signature_def: dict[str, SignatureDef]


def tensor_info(tensor: graph_lib.Tensor) -> TensorInfo:
    """The TensorInfo of a dense tensor (``tf.saved_model.utils.build_tensor_info``)."""
    if not isinstance(tensor, graph_lib.Tensor):
        raise TypeError(f"a signature names dense tensors only, got {tensor!r} ({type(tensor).__name__})")
    shape = tensor.get_shape()
    return TensorInfo(tensor.name, tensor.dtype.name, None if shape.ndims is None else shape.as_list())


def contains_saved_model(export_dir: Any) -> bool:
    """Whether ``export_dir`` holds a model ``save`` wrote (``tf.saved_model.contains_saved_model``)."""
    return os.path.isfile(os.path.join(_path(export_dir), MANIFEST_FILENAME))


def variables_prefix(export_dir: Any) -> str:
    """The checkpoint prefix of a saved model's variables."""
    return os.path.join(_path(export_dir), VARIABLES_DIRECTORY, VARIABLES_FILENAME)


def save(export_dir: str, session: Any, tags: Sequence[str], signature_def_map: dict[str, SignatureDef],
         main_op: Optional[graph_lib.Operation] = None, saver: Optional[saver_lib.Saver] = None) -> None:
    """Writes the session's graph, its variables' values in the session and the signatures to
    ``export_dir`` (which must not exist yet)."""
    if os.path.exists(export_dir):
        raise ValueError(f"Export directory already exists, and isn't empty. Please choose a different export "
                         f"directory, or delete all the contents of the specified directory: {export_dir}")
    for key, signature in signature_def_map.items():
        if not isinstance(signature, SignatureDef):
            raise TypeError(f"signature_def_map[{key!r}] must be a SignatureDef, got {type(signature).__name__}")
    os.makedirs(os.path.join(export_dir, VARIABLES_DIRECTORY))
    graph = session.graph
    with graph.as_default():
        if saver is None:
            saver = saver_lib.Saver(allow_empty=True)
        if graph.get_collection(graph_lib.GraphKeys.GLOBAL_VARIABLES):
            saver.save(session, variables_prefix(export_dir), write_meta_graph=False, write_state=False)
        meta_graph.export_meta_graph(os.path.join(export_dir, META_GRAPH_FILENAME), graph=graph,
                                     clear_devices=True)
    manifest = {"format": FORMAT, "tags": list(tags),
                "signature_def": {key: dataclasses.asdict(signature) for key, signature in signature_def_map.items()},
                "main_op": main_op.name if main_op is not None else None}
    with open(os.path.join(export_dir, MANIFEST_FILENAME), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)


def _path(export_dir: Any) -> str:
    return os.fsdecode(export_dir) if isinstance(export_dir, (bytes, os.PathLike)) else str(export_dir)


def _read_manifest(export_dir: str) -> dict[str, Any]:
    path = os.path.join(export_dir, MANIFEST_FILENAME)
    if not os.path.isfile(path):
        if os.path.isfile(os.path.join(export_dir, "saved_model.pb")):
            raise OSError(f"{export_dir} is a TensorFlow SavedModel (saved_model.pb): tensorgrid reads only the "
                          f"models its own export_saved_model writes ({MANIFEST_FILENAME}, docs/differences.md)")
        raise OSError(f"SavedModel file does not exist at: {export_dir}/{{{MANIFEST_FILENAME}}}")
    with open(path, encoding="utf-8") as f:
        manifest: dict[str, Any] = json.load(f)
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{path} is not a tensorgrid saved model: format {manifest.get('format')!r}, "
                         f"expected {FORMAT!r}")
    return manifest


def _signature(stored: dict[str, Any], prefix: str) -> SignatureDef:
    def infos(part: dict[str, Any]) -> dict[str, TensorInfo]:
        return {key: TensorInfo(prefix + info["name"], info["dtype"], info["shape"]) for key, info in part.items()}

    return SignatureDef(infos(stored["inputs"]), infos(stored["outputs"]), stored["method_name"])


def load(sess: Any, tags: Sequence[str], export_dir: Any, import_scope: Optional[str] = None,
         **saver_kwargs: Any) -> SavedModelMetaGraph:
    """Loads the model of ``export_dir`` saved with exactly ``tags`` into ``sess``'s graph (under
    ``import_scope``): its variables restored and its main op run, ready for its signatures."""
    export_dir = _path(export_dir)
    manifest = _read_manifest(export_dir)
    if sorted(set(tags)) != sorted(set(manifest["tags"])):
        raise RuntimeError(f"MetaGraphDef associated with tags {sorted(set(tags))} could not be found in SavedModel. "
                           f"To inspect available tag-sets in the SavedModel, the saved one is: "
                           f"{sorted(set(manifest['tags']))}")
    with sess.graph.as_default():
        saver = meta_graph.import_meta_graph(os.path.join(export_dir, META_GRAPH_FILENAME),
                                             import_scope=import_scope)
        if saver is not None:
            saver.restore(sess, variables_prefix(export_dir))
        prefix = f"{import_scope}/" if import_scope else ""
        if manifest["main_op"]:
            sess.run(sess.graph.get_operation_by_name(prefix + manifest["main_op"]))
    signatures = {key: _signature(stored, prefix) for key, stored in manifest["signature_def"].items()}
    return SavedModelMetaGraph(list(manifest["tags"]), signatures)
