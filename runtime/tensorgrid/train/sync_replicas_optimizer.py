"""``tf.train.SyncReplicasOptimizer``: synchronous data-parallel training with parameter servers.

Each worker pushes its gradients into one ConditionalAccumulator per variable (on
that variable's PS; a SparseConditionalAccumulator for an IndexedSlices gradient, so
an embedding table's update carries only the rows the batches touched; for a ``tf.get_embedding_variable``
table, keyed by the ids the batches looked up) tagged with the step it computed them at; accumulators drop
gradients older than the current step. The chief's queue runner waits until
``replicas_to_aggregate`` gradients are in every accumulator, applies their mean
with the wrapped optimizer, bumps the global step, and puts one token per replica
into a token queue. A worker starts its next step by taking a token, so fast
workers wait for the step to finish; with ``total_num_replicas`` greater than
``replicas_to_aggregate``, the slowest workers' gradients are dropped (backup
workers).
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.ops import array_ops
from tensorgrid.ops import control_flow_ops
from tensorgrid.ops import data_flow_ops
from tensorgrid.ops import embedding_variable_ops
from tensorgrid.ops import state_ops
from tensorgrid.ops import variables
from tensorgrid.train import optimizer as optimizer_lib
from tensorgrid.train import queue_runner
from tensorgrid.train import session_run_hook
from tensorgrid.train import sync_replicas_watch

log = logging.getLogger("tensorgrid.train")


class SyncReplicasOptimizer(optimizer_lib.Optimizer):
    def __init__(self, opt: optimizer_lib.Optimizer, replicas_to_aggregate: int,
                 total_num_replicas: Optional[int] = None, variable_averages: Any = None,
                 variables_to_average: Any = None, use_locking: bool = False,
                 name: str = "sync_replicas") -> None:
        if total_num_replicas is None:
            total_num_replicas = replicas_to_aggregate
        if replicas_to_aggregate < 1:
            raise ValueError(f"replicas_to_aggregate must be >= 1, got {replicas_to_aggregate}")
        if total_num_replicas < 1:
            raise ValueError(f"total_num_replicas must be >= 1, got {total_num_replicas}")
        super().__init__(use_locking, name)
        log.info("SyncReplicas enabled: replicas_to_aggregate=%s; total_num_replicas=%s",
                 replicas_to_aggregate, total_num_replicas)
        self._opt = opt
        self._replicas_to_aggregate = replicas_to_aggregate
        self._total_num_replicas = total_num_replicas
        self._tokens_per_step = max(total_num_replicas, replicas_to_aggregate)
        self._gradients_applied = False
        self._global_step: Any = None
        self._sync_token_queue: Optional[data_flow_ops.FIFOQueue] = None
        self._chief_queue_runner: Optional[queue_runner.QueueRunner] = None
        self._accumulator_list: list[tuple[data_flow_ops.ConditionalAccumulator, str]] = []
        if variable_averages is not None:
            raise NotImplementedError("variable_averages is not supported by tensorgrid's SyncReplicasOptimizer")

    def compute_gradients(self, *args: Any, **kwargs: Any) -> Any:
        return self._opt.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars: Any, global_step: Any = None, name: Optional[str] = None) -> Any:
        """Builds the per-worker train op (push gradients, wait for a token) and the chief's sync op."""
        grads_and_vars = list(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("Must supply at least one variable")
        if global_step is None:
            raise ValueError("Global step is required to check staleness")
        self._global_step = global_step
        graph = graph_lib.get_default_graph()
        train_ops: list[Any] = []
        aggregated_grads: list[Any] = []
        var_list: list[Any] = []
        local_anchor = control_flow_ops.no_op()
        with graph.device(local_anchor.device):
            self._local_step = variables.Variable(
                initial_value=0, trainable=False, collections=[graph_lib.GraphKeys.LOCAL_VARIABLES],
                dtype=global_step.dtype.base_dtype, name="sync_rep_local_step")
        self.local_step_init_op = state_ops.assign(self._local_step, global_step)
        chief_init_ops: list[Any] = [self.local_step_init_op]
        self.ready_for_local_init_op = variables.report_uninitialized_variables(variables.global_variables())

        with graph.name_scope(self._name):
            for grad, var in grads_and_vars:
                var_list.append(var)
                with graph.device(var.device):
                    if grad is None:
                        aggregated_grads.append(None)
                        continue
                    accumulator: data_flow_ops.ConditionalAccumulator
                    if isinstance(grad, indexed_slices.IndexedSlices):
                        # Only the rows the replicas touched travel and are averaged, row by row.
                        # An embedding variable's gradient is keyed by its 64-bit ids, not by rows.
                        accumulator = data_flow_ops.SparseConditionalAccumulator(
                            grad.dtype, shape=var.get_shape(), shared_name=var.name + "/grad_accum",
                            indices_are_keys=isinstance(var, embedding_variable_ops.EmbeddingVariable))
                        train_ops.append(accumulator.apply_indexed_slices_grad(grad, local_step=self._local_step))
                        aggregated_grads.append(accumulator.take_indexed_slices_grad(self._replicas_to_aggregate))
                    else:
                        accumulator = data_flow_ops.ConditionalAccumulator(
                            grad.dtype, shape=var.get_shape(), shared_name=var.name + "/grad_accum")
                        train_ops.append(accumulator.apply_grad(grad, local_step=self._local_step))
                        aggregated_grads.append(accumulator.take_grad(self._replicas_to_aggregate))
                    self._accumulator_list.append((accumulator, var.device))
            with graph.device(global_step.device), graph.name_scope(""):
                update_op = self._opt.apply_gradients(list(zip(aggregated_grads, var_list)), global_step)
            with graph.device(global_step.device), graph.name_scope(""):
                self._sync_token_queue = data_flow_ops.FIFOQueue(
                    -1, global_step.dtype.base_dtype, shapes=(), name="sync_token_q", shared_name="sync_token_q")
                dummy_queue = data_flow_ops.FIFOQueue(1, dtypes.int32, shapes=(), name="dummy_queue",
                                                      shared_name="dummy_queue")
            with graph.device(global_step.device), graph.name_scope(""):
                with graph.control_dependencies(train_ops):
                    token = self._sync_token_queue.dequeue()
                train_op = state_ops.assign(self._local_step, token)
                with graph.control_dependencies([update_op]):
                    # A fresh read under the dependency: the tokens carry the incremented step.
                    tokens = array_ops.fill([self._tokens_per_step], _read_after(global_step))
                    sync_op = self._sync_token_queue.enqueue_many((tokens,))
                self._chief_queue_runner = queue_runner.QueueRunner(dummy_queue, [sync_op])
            for accumulator, device in self._accumulator_list:
                with graph.device(device):
                    chief_init_ops.append(accumulator.set_global_step(global_step, name="SetGlobalStep"))
            self.chief_init_op = control_flow_ops.group(*chief_init_ops)
            self._gradients_applied = True
            return train_op

    def get_chief_queue_runner(self) -> queue_runner.QueueRunner:
        if not self._gradients_applied or self._chief_queue_runner is None:
            raise ValueError("Should be called after apply_gradients().")
        return self._chief_queue_runner

    def get_slot(self, *args: Any, **kwargs: Any) -> Any:
        return self._opt.get_slot(*args, **kwargs)

    def variables(self) -> list[Any]:
        return self._opt.variables()

    def get_slot_names(self, *args: Any, **kwargs: Any) -> list[str]:
        return self._opt.get_slot_names(*args, **kwargs)

    def get_init_tokens_op(self, num_tokens: int = -1) -> graph_lib.Operation:
        """Puts the first tokens in the queue so that workers can start; run once by the chief."""
        if not self._gradients_applied or self._sync_token_queue is None:
            raise ValueError("get_init_tokens_op() should be called after apply_gradients().")
        tokens_needed = self._replicas_to_aggregate - self._total_num_replicas
        if num_tokens == -1:
            num_tokens = self._replicas_to_aggregate
        elif num_tokens < tokens_needed:
            raise ValueError(
                f"Too few tokens to finish the first step: {num_tokens} (given) vs {tokens_needed} (needed)")
        graph = graph_lib.get_default_graph()
        if num_tokens > 0:
            with graph.device(self._global_step.device), graph.name_scope(""):
                tokens = array_ops.fill([num_tokens], _read(self._global_step))
                return self._sync_token_queue.enqueue_many((tokens,))
        return control_flow_ops.no_op(name="no_init_tokens")

    def make_session_run_hook(self, is_chief: bool, num_tokens: int = -1) -> session_run_hook.SessionRunHook:
        return _SyncReplicasOptimizerHook(self, is_chief, num_tokens)


def _read(variable: Any) -> Any:
    value = getattr(variable, "value", None)
    return value() if callable(value) else variable


def _read_after(variable: Any) -> Any:
    """A read of ``variable`` created now, so it obeys the enclosing control dependencies."""
    read_value = getattr(variable, "read_value", None)
    return read_value() if callable(read_value) else array_ops.identity(variable)


class _SyncReplicasOptimizerHook(session_run_hook.SessionRunHook):
    """Runs the local init (and, on the chief, the init tokens and the queue runner)."""

    def __init__(self, sync_optimizer: SyncReplicasOptimizer, is_chief: bool, num_tokens: int) -> None:
        self._sync_optimizer = sync_optimizer
        self._is_chief = is_chief
        self._num_tokens = num_tokens

    def begin(self) -> None:
        opt = self._sync_optimizer
        if not opt._gradients_applied:
            raise ValueError("SyncReplicasOptimizer.apply_gradient should be called before using the hook.")
        self._ready_for_local_init_op = opt.ready_for_local_init_op
        self._watch: Optional[sync_replicas_watch.SyncReplicasWatch] = None
        if self._is_chief:
            self._local_init_op: Any = opt.chief_init_op
            self._q_runner: Optional[queue_runner.QueueRunner] = opt.get_chief_queue_runner()
            self._init_tokens_op: Any = opt.get_init_tokens_op(self._num_tokens)
            if opt._accumulator_list:
                accumulator, device = opt._accumulator_list[0]
                with graph_lib.get_default_graph().device(device):
                    gradients_in = accumulator.num_accumulated()
                self._watch = sync_replicas_watch.SyncReplicasWatch(opt._global_step, gradients_in,
                                                                    opt._replicas_to_aggregate)
        else:
            self._local_init_op = opt.local_step_init_op
            self._q_runner = None
            self._init_tokens_op = None

    def after_create_session(self, session: Any, coord: Any) -> None:
        names = session.run(self._ready_for_local_init_op)
        if len(names):
            raise RuntimeError(
                "Init operations did not make model ready for SyncReplicasOptimizer local_init. "
                f"Init op: {self._local_init_op.name}, uninitialized: {list(names)}")
        session.run(self._local_init_op)
        if self._init_tokens_op is not None:
            session.run(self._init_tokens_op)
        if self._q_runner is not None:
            self._q_runner.create_threads(session, coord=coord, daemon=True, start=True)
        if self._watch is not None:
            self._watch.start(session, coord)
