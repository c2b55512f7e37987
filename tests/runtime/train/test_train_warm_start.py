"""``tf.compat.v1.train.warm_start`` and ``tf.compat.v1.train.VocabInfo``, with TensorFlow 2.21's
``tf.compat.v1`` as the oracle: a model saves known values, a new graph calls ``warm_start`` before its
initializer is built, and ``global_variables_initializer`` then gives the same values on both libraries:
every trainable variable (the default ``'.*'``), a regex, a list of scopes over the global variables, a
list of variables, a renamed variable, a variable partitioned now and not before, rows remapped by
vocabulary, and the same error classes for names that match nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import tensorgrid

KERNEL = np.arange(6, dtype=np.float32).reshape(3, 2) + 1.0
BIAS = np.array([0.5, -0.5], np.float32)
EMBEDDING = np.arange(8, dtype=np.float32).reshape(4, 2) * 10.0
COUNTER = np.array(7.0, np.float32)


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The library a test runs on: tensorgrid, or TF1 (the oracle)."""
    yield tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")


def saved_model(tf: Any, directory: Path) -> str:
    """A checkpoint of known values: dense/kernel, dense/bias, embedding (trainable), counter (not)."""
    with tf.Graph().as_default(), tf.Session() as session:
        tf.get_variable("dense/kernel", initializer=KERNEL)
        tf.get_variable("dense/bias", initializer=BIAS)
        tf.get_variable("embedding", initializer=EMBEDDING)
        tf.get_variable("counter", initializer=COUNTER, trainable=False)
        session.run(tf.global_variables_initializer())
        return str(tf.train.Saver().save(session, str(directory / "model.ckpt")))


def new_model(tf: Any, partitioned: bool = False, kernel_name: str = "dense/kernel") -> dict[str, Any]:
    """The new model's variables, all initialized to -1 (the embedding in two parts when ``partitioned``)."""
    fill = tf.constant_initializer(-1.0)
    partitioner = tf.fixed_size_partitioner(2) if partitioned else None
    return {"kernel": tf.get_variable(kernel_name, [3, 2], initializer=fill),
            "bias": tf.get_variable("dense/bias", [2], initializer=fill),
            "embedding": tf.get_variable("embedding", [4, 2], initializer=fill, partitioner=partitioner),
            "counter": tf.get_variable("counter", [], initializer=fill, trainable=False)}


def initialized(tf: Any, variables: dict[str, Any]) -> dict[str, np.ndarray]:
    with tf.Session() as session:
        session.run(tf.global_variables_initializer())
        fetches = {name: tf.convert_to_tensor(variable) if isinstance(variable, tf.Variable) else variable
                   for name, variable in variables.items()}
        if not isinstance(variables["embedding"], tf.Variable):  # a partitioned variable, read whole
            fetches["embedding"] = variables["embedding"].as_tensor()
        return {name: np.asarray(value) for name, value in session.run(fetches).items()}


MINUS = {"kernel": -np.ones([3, 2]), "bias": -np.ones([2]), "embedding": -np.ones([4, 2]), "counter": -1.0}


@pytest.mark.parametrize("selection, expected_from_checkpoint", [
    (".*", ["kernel", "bias", "embedding"]),
    ("dense/kernel", ["kernel"]),
    (["dense", "counter"], ["kernel", "bias", "counter"]),
])
def test_the_selected_variables_initialize_from_the_checkpoint(lib: Any, tmp_path: Path, selection: Any,
                                                               expected_from_checkpoint: list[str]) -> None:
    tf = lib
    checkpoint = saved_model(tf, tmp_path)
    saved = {"kernel": KERNEL, "bias": BIAS, "embedding": EMBEDDING, "counter": COUNTER}
    with tf.Graph().as_default():
        variables = new_model(tf)
        tf.train.warm_start(checkpoint, vars_to_warm_start=selection)
        values = initialized(tf, variables)
    for name, value in values.items():
        np.testing.assert_allclose(value, saved[name] if name in expected_from_checkpoint else MINUS[name],
                                   err_msg=name)


def test_a_list_of_variables_a_rename_a_partitioned_variable_and_a_directory(lib: Any, tmp_path: Path) -> None:
    tf = lib
    saved_model(tf, tmp_path)
    with tf.Graph().as_default():
        variables = new_model(tf, partitioned=True, kernel_name="renamed/kernel")
        selected = [variables["kernel"], *tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES, scope="embedding")]
        tf.train.warm_start(str(tmp_path), vars_to_warm_start=selected,
                            var_name_to_prev_var_name={"renamed/kernel": "dense/kernel"})
        values = initialized(tf, variables)
    np.testing.assert_allclose(values["kernel"], KERNEL)
    np.testing.assert_allclose(values["embedding"], EMBEDDING)
    np.testing.assert_allclose(values["bias"], MINUS["bias"])


def test_vocab_info_remaps_rows_by_vocabulary_entry(lib: Any, tmp_path: Path) -> None:
    tf = lib
    checkpoint = saved_model(tf, tmp_path)
    (tmp_path / "old_vocab.txt").write_text("apple\nbanana\ncherry\ndate\n")
    (tmp_path / "new_vocab.txt").write_text("cherry\nfig\napple\n")
    vocab_info = tf.train.VocabInfo(new_vocab=str(tmp_path / "new_vocab.txt"), new_vocab_size=3, num_oov_buckets=1,
                                    old_vocab=str(tmp_path / "old_vocab.txt"))
    with tf.Graph().as_default():
        variables = new_model(tf)
        tf.train.warm_start(checkpoint, vars_to_warm_start=None, var_name_to_vocab_info={"embedding": vocab_info})
        values = initialized(tf, variables)
    np.testing.assert_allclose(values["embedding"], [EMBEDDING[2], [0.0, 0.0], EMBEDDING[0], [0.0, 0.0]])
    np.testing.assert_allclose(values["kernel"], MINUS["kernel"])  # vars_to_warm_start=None: only the remapped one


@pytest.mark.parametrize("arguments", [
    {"var_name_to_prev_var_name": {"no/such/variable": "dense/kernel"}},
    {"vars_to_warm_start": [3]},
])
def test_bad_arguments_are_value_errors(lib: Any, tmp_path: Path, arguments: dict[str, Any]) -> None:
    tf = lib
    checkpoint = saved_model(tf, tmp_path)
    with tf.Graph().as_default():
        new_model(tf)
        with pytest.raises(ValueError):
            tf.train.warm_start(checkpoint, **arguments)


def test_a_tensor_missing_from_the_checkpoint_is_named(tmp_path: Path) -> None:
    tf = tensorgrid
    checkpoint = saved_model(tf, tmp_path)
    with tf.Graph().as_default():
        new_model(tf, kernel_name="other/kernel")
        with pytest.raises(ValueError, match="Tensor other/kernel is not found"):
            tf.train.warm_start(checkpoint)
