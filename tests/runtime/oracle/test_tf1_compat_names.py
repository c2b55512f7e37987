"""``tensorgrid.compat.v1``, ``tf.compat``'s string helpers, ``tf.__version__`` and the
``tf.to_*`` casts, with TensorFlow 2.21's ``tf.compat.v1`` as the oracle (issue 24).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import tensorgrid


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The library a test runs on, with a fresh default graph: tensorgrid, or TF1 (the oracle)."""
    library = tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")
    with library.Graph().as_default():
        yield library


def outcome(fn: Callable[[], Any]) -> Any:
    """What a call gives: its value, or the name of the error it raises."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the error is the result
        return type(e).__name__


def test_compat_v1_is_the_same_namespace() -> None:
    import tensorgrid.compat.v1 as tf

    assert tf is tensorgrid
    assert sys.modules["tensorgrid.compat.v1"] is tensorgrid
    assert tensorgrid.compat.v1.Session is tensorgrid.Session
    assert tensorgrid.compat.v1.compat.v1.train is tensorgrid.train


def test_a_tf1_program_starts_as_programs_start_with_tensorflow_compat_v1(tmp_path: Any) -> None:
    """The opening lines of TF1 programs written against TensorFlow 2, in a fresh process."""
    program = textwrap.dedent("""
        import tensorgrid.compat.v1 as tf
        tf.disable_v2_behavior()
        tf.compat.v1.disable_eager_execution()
        tf.disable_eager_execution()
        print(tf.executing_eagerly())
        with tf.Session() as sess:
            print(sess.run(tf.compat.v1.add(1, 2)))
    """)
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "3"]


def test_the_v2_switches_exist_on_both_and_do_nothing_here(lib: Any) -> None:
    for name in ("disable_v2_behavior", "disable_eager_execution"):
        assert getattr(lib, name)() is None
        assert getattr(lib.compat.v1, name) is not None
    assert lib.executing_eagerly() is False


STRINGS: list[tuple[str, Any]] = [
    ("as_bytes", "héllo"), ("as_bytes", b"x"), ("as_bytes", bytearray(b"ab")), ("as_bytes", 3),
    ("as_str", b"h\xc3\xa9"), ("as_str", "x"), ("as_str", 3), ("as_text", b"abc"), ("as_text", None),
    ("as_str_any", 3), ("as_str_any", b"y"),
]


@pytest.mark.parametrize(("name", "value"), STRINGS)
def test_string_helpers_as_tensorflow(tf1: Any, name: str, value: Any) -> None:
    assert outcome(lambda: getattr(tensorgrid.compat, name)(value)) == outcome(
        lambda: getattr(tf1.compat, name)(value))


def test_path_to_str_as_tensorflow(tf1: Any, tmp_path: Any) -> None:
    for value in (tmp_path, "a/b", 3):
        assert tensorgrid.compat.path_to_str(value) == tf1.compat.path_to_str(value)


def test_version_is_the_tf1_api_tensorgrid_implements() -> None:
    """Not the oracle's (2.21.0): TF1 programs that branch on the version take their TF1 path."""
    assert tensorgrid.__version__ == tensorgrid.VERSION == tensorgrid.version.VERSION == "1.15.0"
    assert int(tensorgrid.__version__.split(".")[0]) == 1
    assert tensorgrid.version.TENSORGRID_VERSION


def test_version_names_exist_on_both(lib: Any) -> None:
    assert isinstance(lib.__version__, str) and lib.__version__ == lib.VERSION == lib.version.VERSION


@pytest.mark.parametrize(("cast", "dtype_name"), [
    ("to_int64", "int64"), ("to_int32", "int32"), ("to_float", "float32"), ("to_double", "float64"),
])
@pytest.mark.parametrize("source", ["int32", "int64", "float32", "float64"])
def test_to_casts_as_tensorflow(lib: Any, cast: str, dtype_name: str, source: str) -> None:
    x = lib.constant(np.array([1.7, -2.2, 3.0]).astype(source))
    y = getattr(lib, cast)(x)
    named = getattr(lib, cast)(x, name="renamed")
    with lib.Session() as sess:
        value = sess.run(y)
    expected = np.array([1.7, -2.2, 3.0]).astype(source).astype(dtype_name)
    np.testing.assert_array_equal(value, expected)
    assert y.dtype == getattr(lib, dtype_name)
    if source == dtype_name:
        assert y is x and named is x
    else:
        assert y.op.type == "Cast"
        assert (y.name, named.name) == ({"to_int64": "ToInt64:0", "to_int32": "ToInt32:0", "to_float": "ToFloat:0",
                                         "to_double": "ToDouble:0"}[cast], "renamed:0")
