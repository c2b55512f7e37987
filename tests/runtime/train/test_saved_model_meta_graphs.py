"""tensorgrid's saved-model directory with several meta graphs (``train/saved_model_io.py``): each tag set
loads its own graph and signatures, the variables saved once serve them all, a tag set asked for twice
or not there is an error naming the tag sets, and a directory of the first, one-graph format still loads."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.train import saved_model_io


def write_two_graphs(export_dir: str) -> None:
    """A 'train' graph with a variable and its update, then a 'serve' graph reading the same variable."""
    writer = saved_model_io.SavedModelWriter(export_dir)
    with tf.Graph().as_default() as graph, tf.Session(graph=graph) as session:
        weight = tf.get_variable("weight", initializer=np.float32(3.0))
        step = tf.assign_add(weight, 1.0)
        session.run(tf.global_variables_initializer())
        signature = saved_model_io.SignatureDef({}, {"weight": saved_model_io.tensor_info(tf.identity(weight))},
                                                saved_model_io.SUPERVISED_TRAIN_METHOD_NAME)
        writer.add_meta_graph(session, ["train"], {"train": signature}, train_op=step)
    with tf.Graph().as_default() as graph, tf.Session(graph=graph) as session:
        weight = tf.get_variable("weight", initializer=np.float32(0.0))
        doubled = 2.0 * weight
        session.run(tf.global_variables_initializer())
        signature = saved_model_io.SignatureDef({}, {"doubled": saved_model_io.tensor_info(doubled)},
                                                saved_model_io.PREDICT_METHOD_NAME)
        writer.add_meta_graph(session, ["serve"], {"serving_default": signature})
        with pytest.raises(ValueError, match=r"tags \['serve'\] was already added"):
            writer.add_meta_graph(session, ["serve"], {"serving_default": signature})
    writer.save()


def output(export_dir: str, tags: list[str], key: str, name: str, train_steps: int = 0) -> float:
    with tf.Graph().as_default() as graph, tf.Session(graph=graph) as session:
        meta = tf.saved_model.loader.load(session, tags, export_dir)
        for _ in range(train_steps):
            session.run(tf.get_collection("saved_model_train_op")[0])
        return float(session.run(graph.get_tensor_by_name(meta.signature_def[key].outputs[name].name)))


def test_each_tag_set_loads_its_graph_over_the_variables_saved_once(tmp_path: Path) -> None:
    export_dir = str(tmp_path / "model")
    write_two_graphs(export_dir)
    assert output(export_dir, ["serve"], "serving_default", "doubled") == 6.0  # the train graph's 3.0, not 0.0
    assert output(export_dir, ["train"], "train", "weight", train_steps=2) == 5.0
    with pytest.raises(RuntimeError, match=r"available tags \[\['train'\], \['serve'\]\]"):
        output(export_dir, ["eval"], "eval", "loss")


def test_a_directory_of_the_first_format_still_loads(tmp_path: Path) -> None:
    export_dir = tmp_path / "model"
    write_two_graphs(str(export_dir))
    manifest = json.loads((export_dir / saved_model_io.MANIFEST_FILENAME).read_text())
    serve = manifest["meta_graphs"][1]
    os.rename(export_dir / serve["graph"], export_dir / saved_model_io.SINGLE_GRAPH_FILENAME)
    (export_dir / saved_model_io.MANIFEST_FILENAME).write_text(json.dumps({
        "format": saved_model_io.SINGLE_GRAPH_FORMAT, "tags": serve["tags"], "signature_def": serve["signature_def"],
        "main_op": serve["main_op"]}))
    assert output(str(export_dir), ["serve"], "serving_default", "doubled") == 6.0
