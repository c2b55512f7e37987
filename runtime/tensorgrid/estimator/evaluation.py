"""How an Estimator evaluates: a bounded number of metric updates, the final values, and their summary.

``Estimator.evaluate`` runs the update ops of its metrics until the input ends or ``steps``
batches were seen, then reads the metric values once (``FinalOpsHook``), and writes them as
scalar summaries at the checkpoint's global step into ``model_dir/eval`` (or ``eval_<name>``),
where TensorBoard shows them beside the training curves. Apart from the Estimator so that
``train_and_evaluate``'s evaluator and ``evaluate`` share it.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Optional

import numpy as np

from tensorgrid.kernels import summary_kernels
from tensorgrid.summary import event_file
from tensorgrid.train import session_run_hook

log = logging.getLogger("tensorgrid.estimator")


class StopAfterNEvalsHook(session_run_hook.SessionRunHook):
    """Stops the evaluation session after ``num_evals`` runs of the update ops (None: at the input's end)."""

    def __init__(self, num_evals: Optional[int]) -> None:
        self._num_evals = num_evals
        self.evals_done = 0

    def after_run(self, run_context: session_run_hook.SessionRunContext,
                  run_values: session_run_hook.SessionRunValues) -> None:
        self.evals_done += 1
        if self._num_evals is not None:
            log.info("Evaluation [%d/%d]", self.evals_done, self._num_evals)
            if self.evals_done >= self._num_evals:
                run_context.request_stop()


def eval_dir(model_dir: str, name: Optional[str]) -> str:
    """Where evaluation summaries go: ``eval`` in the model directory, ``eval_<name>`` for a named one."""
    return os.path.join(model_dir, "eval" if not name else "eval_" + name)


def as_python_value(value: Any) -> Any:
    """A metric value as TensorFlow's ``evaluate`` returns it: numpy scalars stay numpy scalars."""
    if isinstance(value, np.ndarray) and value.shape == ():
        return value[()]
    return value


def write_eval_summary(directory: str, results: dict[str, Any], global_step: int) -> None:
    """Writes each scalar of ``results`` (all but ``global_step``) as a summary at ``global_step``;
    other values are logged and left out, as TensorFlow leaves them out."""
    summary = b""
    for key, value in results.items():
        if key == "global_step":
            continue
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            log.warning("Skipping summary for %s, must be a float, np.float32, np.int64, np.int32 or int.", key)
            continue
        summary += summary_kernels.scalar_summary(key, float(value))
    with event_file.FileWriter(directory) as writer:
        writer.add_summary(summary, global_step)
