"""The GPU code path without a GPU: the cupy backend on the strict cupy stand-in.

The ``strict_gpu`` fixture makes ``tests/runtime/support/strict_cupy.py`` what the cupy backend imports,
so graphs built under ``tf.device('/device:GPU:0')`` go through the GPU placement, the
feed and constant copies to the device, and every kernel through the backend's
``xp``. A kernel that reached for numpy directly, mixed a host array into a device
computation, or read a device array as host memory fails here as it would with cupy.
The same cases as the numpy tests are used, so a GPU run is expected to pass.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
import strict_cupy
from gradient_check import check_gradient
from tensorgrid.kernels import backend as backend_lib
from tensorgrid.kernels import cupy_backend
import test_gradients
import test_ops_forward

GPU = "/device:GPU:0"

FORWARD_IDS = {
    "add-(2, 1, 4)-(3, 1)", "div-(0, 3)-(3,)", "pow-(3, 4)-(4,)", "maximum-(3, 4)-(3, 4)", "equal-(3, 4)-(4,)",
    "floordiv-(3, 4)-(3, 4)", "sqrt-(2, 3)", "exp-(5,)", "log-(2, 3)", "sigmoid-(2, 3)", "sigmoid-extremes",
    "tanh-(0, 4)", "relu-(2, 3)", "relu6-(5,)", "cast-float-int", "add_n", "truediv-int",
    "matmul-(4, 3)-(2, 4)-taTrue-tbTrue", "matmul-(0, 3)-(3, 2)-taFalse-tbFalse",
    "reduce_sum-axis[0, 2]-keepTrue", "reduce_mean-axis-1-keepFalse", "reduce_max-axisNone-keepFalse",
    "reduce_mean-int", "argmax-1", "reshape-minus1", "fill-dynamic", "ones_like",
    "transpose-perm", "concat-three", "split-sizes", "gather-axis1", "gather-fed-index", "unsorted_segment_sum",
    "one_hot-axis0-values", "squeeze-axis", "stack-axis-last", "unstack", "where-vector-condition",
    "where-coordinates", "tile-zero", "clip_by_global_norm", "getitem-(slice(None, None, None), slice(None, None, -2), 1)",
    "getitem-(Ellipsis, None)", "getitem-tensor-bounds", "softmax-large", "log_softmax", "sparse_softmax_xent-rank3",
    "softmax_xent_v2-soft-labels", "bias_add-NCHW", "in_top_k", "moments",
    "conv2d-(1, 6, 7, 2)-(3, 2, 2, 3)-(2, 3)-SAME-(1, 1)", "conv2d-(1, 7, 7, 2)-(3, 3, 2, 2)-(1, 1)-SAME-(2, 2)",
    "conv2d-(1, 7, 6, 3)-(3, 2, 3, 2)-(2, 2)-VALID-(1, 1)",
    "max_pool-(1, 6, 7, 2)-(3, 3)-(2, 2)-SAME", "avg_pool-(1, 6, 7, 2)-(3, 3)-(2, 2)-SAME",
    "avg_pool-(1, 7, 5, 2)-(3, 3)-(2, 1)-VALID",
}
FORWARD_CASES = [c for c in test_ops_forward.ALL_CASES if c.id in FORWARD_IDS]

GRADIENT_IDS = {
    "multiply-(2, 1, 3)-(4, 1)", "div-(3, 4)-(4,)", "sigmoid-(2, 3)", "log_softmax-(2, 3)", "matmul-taTrue-tbFalse",
    "reduce_max-axis1-keepFalse", "reduce_mean-axis[0, 2]-keepTrue", "concat", "gather-axis1", "tile",
    "getitem-(slice(None, None, None), slice(None, None, -2), 1)", "where", "sparse_softmax_xent", "softmax_xent_v2",
    "bias_add", "conv2d-(2, 5, 4, 1)-(2, 3, 1, 2)-(2, 2)-SAME-(1, 1)", "max_pool-(2, 5, 5, 1)-(3, 3)-(2, 2)-SAME",
    "avg_pool-(1, 4, 4, 2)-(2, 2)-(2, 2)-SAME", "mlp", "unsorted_segment_sum",
}
GRADIENT_CASES = [c for c in test_gradients.ALL_CASES if c.id in GRADIENT_IDS]


def test_every_selected_case_exists() -> None:
    assert {c.id for c in FORWARD_CASES} == FORWARD_IDS
    assert {c.id for c in GRADIENT_CASES} == GRADIENT_IDS


@pytest.mark.parametrize("case", FORWARD_CASES, ids=lambda c: c.id)
def test_forward_on_the_gpu_backend(case: test_ops_forward.Case, strict_gpu: Any) -> None:
    test_ops_forward.run_case(case, device=GPU)


@pytest.mark.parametrize("case", GRADIENT_CASES, ids=lambda c: c.id)
def test_gradient_on_the_gpu_backend(case: test_gradients.GradCase, strict_gpu: Any) -> None:
    check_gradient(case.build, *case.inputs, wrt=case.wrt, rtol=case.rtol, atol=case.atol, device=GPU)


class _RecordingArrayModule:
    """The strict cupy stand-in, recording which of its functions were looked up (by
    kernels, through ``k.xp``)."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.used.add(name)
        return getattr(strict_cupy, name)


def test_ops_pinned_to_the_gpu_run_through_the_gpu_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    recording = _RecordingArrayModule()
    backend_lib.register_backend("GPU:0", cupy_backend.CupyBackend(0, array_module=recording))
    monkeypatch.setattr(backend_lib, "gpu_available", lambda: True)
    try:
        x = tf.placeholder(tf.float32, [2, 3])
        with tf.device(GPU):
            y = tf.nn.softmax(tf.matmul(x, tf.constant(np.ones([3, 4], np.float32))))
        with tf.Session() as sess:
            value = sess.run(y, {x: np.ones([2, 3], np.float32)})
    finally:
        backend_lib.unregister_backend("GPU:0")
    np.testing.assert_allclose(value, np.full([2, 4], 0.25), rtol=1e-6)
    assert {"asarray", "matmul", "exp"} <= recording.used


def test_gpu_pinned_op_without_a_gpu_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend_lib, "gpu_available", lambda: False)
    with tf.device(GPU):
        y = tf.nn.relu(tf.constant([1.0, -1.0], name="values_on_gpu"))
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"values_on_gpu: \{\{node values_on_gpu\}\} was explicitly assigned to /device:GPU:0 .*"
                                 r"no GPU is available"):
            sess.run(y)
    with tf.Session(config=tf.ConfigProto(allow_soft_placement=True)) as sess:
        np.testing.assert_array_equal(sess.run(y), [1.0, 0.0])


def test_importing_and_running_tensorgrid_does_not_import_cupy() -> None:
    program = (
        "import sys\n"
        "import tensorgrid as tf\n"
        "assert 'cupy' not in sys.modules, 'import tensorgrid imported cupy'\n"
        "x = tf.placeholder(tf.float32, [None, 2])\n"
        "y = tf.nn.conv2d(tf.reshape(x, [-1, 1, 2, 1]), tf.ones([1, 1, 1, 1]), [1, 1, 1, 1], 'SAME')\n"
        "print(tf.Session().run(tf.reduce_sum(y), {x: [[1.0, 2.0]]}))\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "3.0"
