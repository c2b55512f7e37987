"""``tf.Session``: run fetches of a graph, in this process or through a master.

With an empty target the session executes in-process with its own variables (as a
TF1 DirectSession does). With ``grpc://host:port`` it hands the graph to that
task's master, and variables live on the tasks that own their devices, shared with
every other session there. Either way ``run`` takes the same nested fetches and
feeds, checks feeds against the placeholders' dtypes and shapes, and returns numpy.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tensorgrid.client import config as config_lib
from tensorgrid.framework import dtypes
from tensorgrid.framework import errors
from tensorgrid.framework import graph as graph_lib
from tensorgrid.distributed import cluster as cluster_lib
from tensorgrid.execution import async_program
from tensorgrid.execution import call_program
from tensorgrid.execution import executor
from tensorgrid.execution import resources
from tensorgrid.kernels import backend as backend_lib
from tensorgrid.kernels import numpy_backend
from tensorgrid.ops import array_ops


# ---------------------------------------------------------------------- fetch structures

class _FetchStructure:
    """Flattens nested fetches (lists, tuples, namedtuples, dicts) and rebuilds results."""

    def __init__(self, graph: graph_lib.Graph, fetches: Any) -> None:
        self.elements: list[Any] = []
        self._index: dict[Any, int] = {}
        self._template = self._flatten(graph, fetches)

    def _flatten(self, graph: graph_lib.Graph, fetch: Any) -> Any:
        if fetch is None:
            raise TypeError(f"Fetch argument {fetch!r} has invalid type {type(fetch)}")
        if isinstance(fetch, (list, tuple)) and not hasattr(fetch, "_as_graph_element"):
            items = [self._flatten(graph, f) for f in fetch]
            return (type(fetch), items)
        if isinstance(fetch, dict):
            return (type(fetch), {k: self._flatten(graph, v) for k, v in fetch.items()})
        components = getattr(fetch, "_fetch_components", None)
        if callable(components):
            # IndexedSlices and SparseTensor come back as their namedtuple of numpy values.
            parts = [("none", None) if t is None else self._flatten(graph, t) for t in components()]
            return (type(fetch)._value_type, parts)
        try:
            element = graph.as_graph_element(fetch, allow_tensor=True, allow_operation=True)
        except TypeError as e:
            raise TypeError(
                f"Fetch argument {fetch!r} has invalid type {type(fetch).__name__}, must be a string or "
                f"Tensor. ({e})"
            ) from None
        except (KeyError, ValueError) as e:
            raise ValueError(f"Fetch argument {fetch!r} cannot be interpreted as a Tensor. ({e.args[0]})") from None
        if element not in self._index:
            self._index[element] = len(self.elements)
            self.elements.append(element)
        return ("leaf", self._index[element])

    def build(self, values: Sequence[Any]) -> Any:
        return self._build(self._template, values)

    def _build(self, template: Any, values: Sequence[Any]) -> Any:
        kind, payload = template
        if kind == "leaf":
            return values[payload]
        if kind == "none":
            return None
        if isinstance(payload, dict):
            built = {k: self._build(v, values) for k, v in payload.items()}
            return kind(built) if kind is not dict else built
        items = [self._build(t, values) for t in payload]
        if kind in (list, tuple):
            return kind(items)
        if hasattr(kind, "_fields"):  # namedtuple
            return kind(*items)
        return kind(items)


# ---------------------------------------------------------------------- feeds

def _string_feed(tensor: graph_lib.Tensor, value: Any, array: np.ndarray) -> np.ndarray:
    """Text fed to a string tensor, as the bytes objects string tensors hold."""
    if array.dtype.kind not in "USO" or (
            array.dtype == object and not all(isinstance(v, (str, bytes)) for v in array.reshape(-1).tolist())):
        raise TypeError(f"Cannot feed value {value!r} to Tensor {tensor.name!r} of dtype string: "
                        "feed str or bytes (or arrays of them)")
    return array_ops.as_string_array(array)


def _check_feed_value(tensor: graph_lib.Tensor, value: Any) -> np.ndarray:
    if isinstance(value, graph_lib.Tensor) or hasattr(value, "_as_graph_element"):
        raise TypeError(
            f"The value of a feed cannot be a tf.Tensor object (feeding {tensor.name}). "
            "Acceptable feed values include Python scalars, strings, lists, numpy ndarrays"
        )
    wanted = tensor.dtype.base_dtype
    if wanted == dtypes.string and not isinstance(value, np.ndarray):
        array = np.array(value, dtype=object)  # numpy's bytes dtype would drop trailing NUL bytes
    else:
        array = value if isinstance(value, np.ndarray) else np.asarray(value)
    if wanted == dtypes.string:
        array = _string_feed(tensor, value, array)
    elif array.dtype.kind in "SU":
        # TensorFlow's class (its feed goes through numpy), for all text: "3" too, which numpy parses.
        raise ValueError(f"could not convert string to {wanted.name}: {value!r} cannot be fed to Tensor "
                         f"{tensor.name!r} of dtype {wanted.name}")
    elif array.dtype == object:
        raise TypeError(f"Cannot feed value {value!r} of unsupported type to Tensor {tensor.name!r} of dtype {wanted.name}")
    if array.dtype != wanted.as_numpy_dtype:
        kind, target_kind = array.dtype.kind, np.dtype(wanted.as_numpy_dtype).kind
        lossy = (
            (kind == "f" and target_kind in "iub")
            or (target_kind == "b" and kind != "b")
            or (kind in "SUO" or target_kind in "SUO")
        )
        if lossy:
            raise TypeError(
                f"Cannot feed value of dtype {array.dtype.name} to Tensor {tensor.name!r} of dtype "
                f"{wanted.name}: the conversion would lose information; cast it first"
            )
        array = array.astype(wanted.as_numpy_dtype)
    if not tensor.shape.is_compatible_with(array.shape):
        raise ValueError(
            f"Cannot feed value of shape {array.shape} for Tensor {tensor.name!r}, "
            f"which has shape {_shape_text(tensor)}"
        )
    return array


def _composite_feeds(key: Any, components: list[Any], value: Any) -> dict[Any, Any]:
    """Feeds of a SparseTensor (or IndexedSlices) key: one per component, from a value of the same arity."""
    if not isinstance(value, (tuple, list)) or len(value) != len(components):
        raise TypeError(
            f"The value fed to {type(key).__name__} {key.name} must be a {type(key)._value_type.__name__} "
            f"(or a tuple of {len(components)} arrays), got {value!r}"
        )
    return {t: v for t, v in zip(components, value) if t is not None and v is not None}


def _shape_text(tensor: graph_lib.Tensor) -> str:
    shape = tensor.shape
    if shape.ndims is None:
        return "<unknown>"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape.as_list()) + ")"


def _to_numpy(value: Any) -> Any:
    """A fetched value as the client gets it: numpy (a device array copied to the host)."""
    device = backend_lib.device_backend_of(value)
    if device is not None:
        value = device.to_numpy(value)
    if isinstance(value, np.ndarray):
        return value[()] if value.ndim == 0 else value
    return value


# ---------------------------------------------------------------------- sessions

class BaseSession:
    """What in-process and remote sessions share: graph, fetch/feed handling, lifecycle."""

    def __init__(self, target: str = "", graph: Optional[graph_lib.Graph] = None, config: Any = None) -> None:
        if graph is not None and not isinstance(graph, graph_lib.Graph):
            raise TypeError(f"graph must be a tf.Graph, but got {type(graph).__name__}")
        self._graph = graph if graph is not None else graph_lib.get_default_graph()
        self._target = target
        self._config = config or config_lib.ConfigProto()
        self._closed = False
        self._default_session_context: Any = None
        self._lock = threading.Lock()

    @property
    def graph(self) -> graph_lib.Graph:
        return self._graph

    @property
    def sess_str(self) -> str:
        return self._target

    def as_default(self) -> Any:
        return graph_lib.default_session(self)

    def __enter__(self) -> "BaseSession":
        self._default_graph_context = self._graph.as_default()
        self._default_graph_context.__enter__()
        self._default_session_context = self.as_default()
        self._default_session_context.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._default_session_context.__exit__(*exc)
        self._default_graph_context.__exit__(*exc)
        self.close()

    def close(self) -> None:
        self._closed = True

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def run(self, fetches: Any, feed_dict: Optional[dict[Any, Any]] = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        """Computes ``fetches`` (a Tensor, Operation, name, or nested structure of them)."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        structure = _FetchStructure(self._graph, fetches)
        feeds = self._resolve_feeds(feed_dict)
        fetch_tensors = [e for e in structure.elements if isinstance(e, graph_lib.Tensor)]
        targets = [e for e in structure.elements if isinstance(e, graph_lib.Operation)]
        values = self._run(list(feeds), list(feeds.values()), fetch_tensors, targets, options)
        by_element = dict(zip(fetch_tensors, (_to_numpy(v) for v in values)))
        return structure.build([by_element.get(e) for e in structure.elements])

    def make_callable(self, fetches: Any, feed_list: Optional[Sequence[Any]] = None, accept_options: bool = False) -> Callable[..., Any]:
        """A function that runs ``fetches`` with positional feed values, skipping per-call parsing."""
        feed_tensors = [self._graph.as_graph_element(f, allow_tensor=True, allow_operation=False)
                        for f in (feed_list or [])]
        structure = _FetchStructure(self._graph, fetches)
        fetch_tensors = [e for e in structure.elements if isinstance(e, graph_lib.Tensor)]
        targets = [e for e in structure.elements if isinstance(e, graph_lib.Operation)]

        def call(*feed_values: Any, **kwargs: Any) -> Any:
            if len(feed_values) != len(feed_tensors):
                raise TypeError(f"Expected {len(feed_tensors)} feed values, got {len(feed_values)}")
            arrays = [_check_feed_value(t, v) for t, v in zip(feed_tensors, feed_values)]
            values = self._run(feed_tensors, arrays, fetch_tensors, targets, kwargs.get("options"))
            by_element = dict(zip(fetch_tensors, (_to_numpy(v) for v in values)))
            return structure.build([by_element.get(e) for e in structure.elements])

        return call

    def _resolve_feeds(self, feed_dict: Optional[dict[Any, Any]]) -> dict[graph_lib.Tensor, np.ndarray]:
        feeds: dict[graph_lib.Tensor, np.ndarray] = {}
        for key, value in (feed_dict or {}).items():
            components = getattr(key, "_fetch_components", None)
            if callable(components):
                feeds.update(self._resolve_feeds(_composite_feeds(key, components(), value)))
                continue
            try:
                tensor = self._graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
            except (KeyError, ValueError, TypeError) as e:
                raise TypeError(f"Cannot interpret feed_dict key {key!r} as a Tensor: {e.args[0]}") from None
            feeds[tensor] = _check_feed_value(tensor, value)
        return feeds

    def _run(self, feeds: list[graph_lib.Tensor], feed_values: list[Any], fetches: list[graph_lib.Tensor],
             targets: list[graph_lib.Operation], options: Any) -> list[Any]:
        raise NotImplementedError

    def list_devices(self) -> list[Any]:
        raise NotImplementedError


class LocalDevice(collections.namedtuple("LocalDevice", ["name", "device_type", "memory_limit_bytes", "incarnation"])):
    """One entry of ``Session.list_devices()``, with the fields TF1's device attributes have."""


def step_timeout_ms(config: Any, options: Any) -> int:
    """The deadline of one step in milliseconds (0: none): the RunOptions' ``timeout_in_ms``,
    else the session's ``operation_timeout_in_ms``, as TensorFlow chooses."""
    from_options = int(getattr(options, "timeout_in_ms", 0) or 0) if options is not None else 0
    return from_options or int(getattr(config, "operation_timeout_in_ms", 0) or 0)


_placement_log = logging.getLogger("tensorgrid.placement")


def _logging_placement(
    placement: Callable[[graph_lib.Operation], backend_lib.Backend],
) -> Callable[[graph_lib.Operation], backend_lib.Backend]:
    """``placement`` that also prints each op's device the first time a step places it, as TF1's
    ``ConfigProto(log_device_placement=True)`` does: ``name: (Type): /job:localhost/.../device:CPU:0``
    on standard output, and the same line in the log (``tensorgrid.placement``, INFO)."""
    logged: set[graph_lib.Operation] = set()
    lock = threading.Lock()

    def place(op: graph_lib.Operation) -> backend_lib.Backend:
        backend = placement(op)
        with lock:
            if op not in logged:
                logged.add(op)
                index = getattr(backend, "index", 0)
                line = f"{op.name}: ({op.type}): /job:localhost/replica:0/task:0/device:{backend.device_type}:{index}"
                print(line, flush=True)
                _placement_log.info("%s", line)
        return backend

    return place


IN_PROCESS_DEFAULT_THREADS = 1
"""BLAS threads of a process whose sessions and environment set none. Not TensorFlow's
default (every core): numpy's OpenBLAS threads spin while idle, so on a machine whose cores
other processes use too they take the cores from each other and from those processes (the
wide-and-deep step took 60 ms with 2 threads against 13 ms with 1 on a busy 2-core machine,
578 ms against 198 ms with one core also taken by a busy loop), and the matrices of a
sparse model's step are too small to gain from a second thread (docs/differences.md)."""


def prepare_process(config: Any) -> None:
    """Sets up this process's compute for an in-process session, as a ``tf.train.Server``
    does for its task: the C allocator keeps a step's freed arrays for the next
    (``numpy_backend.keep_freed_memory``), and the BLAS pool is sized as TF's first session
    sizes its intra-op pool: ``intra_op_parallelism_threads`` where set, else (when nothing in
    this process has sized it yet, e.g. a Server) ``$TENSORGRID_INTRA_OP_THREADS``, else
    ``IN_PROCESS_DEFAULT_THREADS``."""
    numpy_backend.keep_freed_memory()
    configured = int(getattr(config, "intra_op_parallelism_threads", 0) or 0)
    if configured < 0:
        raise ValueError(f"intra_op_parallelism_threads must be >= 0 (0: the default), got {configured}")
    if configured:
        numpy_backend.limit_threads(configured)
    elif numpy_backend.blas_threads() is None:
        from_environment = cluster_lib.intra_op_threads_from_environment()
        numpy_backend.limit_threads(from_environment or IN_PROCESS_DEFAULT_THREADS)


class _LocalEngine:
    """Runs steps in this process, with variables private to the session (TF1's DirectSession).

    A step with a deadline (``operation_timeout_in_ms``, ``RunOptions.timeout_in_ms``) is
    cancelled with DeadlineExceededError when it passes, even while it waits in a queue;
    ``close`` cancels the steps still running with CancelledError, as TensorFlow does."""

    def __init__(self, graph: graph_lib.Graph, config: Any) -> None:
        self._graph = graph
        self._config = config
        prepare_process(config)
        self._resources = resources.ResourceManager()
        self._kernel_state: dict[str, dict[str, Any]] = {}
        self._plans: dict[Any, call_program.StepProgram | async_program.AsyncStepProgram] = {}
        """What runs each step signature: its plan as a generated program (with asynchronous
        kernels, a queue's or a reader's: ``async_program``)."""
        self._placement = executor.default_placement(bool(getattr(config, "allow_soft_placement", False)))
        if getattr(config, "log_device_placement", False):
            self._placement = _logging_placement(self._placement)
        self._step_ids = itertools.count(1)
        self._lock = threading.Lock()
        self._running: dict[int, executor.StepContext] = {}

    def run(self, feeds: list[graph_lib.Tensor], feed_values: list[Any], fetches: list[graph_lib.Tensor],
            targets: list[graph_lib.Operation], options: Any) -> list[Any]:
        key = (tuple(feeds), tuple(fetches), tuple(targets), self._graph.version)
        plan = self._plans.get(key)
        if plan is None:
            with self._lock:
                prepared = executor.Plan(self._graph, feeds, fetches, targets, self._kernel_state, self._placement)
                plan = async_program.step_runner(prepared)
                self._plans[key] = plan
        step = executor.StepContext(step_id=next(self._step_ids), resources=self._resources)
        timeout_ms = step_timeout_ms(self._config, options)
        timer = None
        if timeout_ms:
            timer = threading.Timer(timeout_ms / 1000.0, step.cancel, [errors.DeadlineExceededError(
                None, None, f"Timed out: the step ran past its deadline of {timeout_ms} ms "
                "(operation_timeout_in_ms or RunOptions.timeout_in_ms)")])
            timer.daemon = True
            timer.start()
        with self._lock:
            self._running[step.step_id] = step
        try:
            return plan.run(step, feed_values)
        finally:
            with self._lock:
                self._running.pop(step.step_id, None)
            if timer is not None:
                timer.cancel()

    def list_devices(self) -> list[Any]:
        devices = [LocalDevice("/job:localhost/replica:0/task:0/device:CPU:0", "CPU", 0, 0)]
        if backend_lib.gpu_available():
            devices.append(LocalDevice("/job:localhost/replica:0/task:0/device:GPU:0", "GPU", 0, 0))
        return devices

    def close(self) -> None:
        with self._lock:
            running = list(self._running.values())
        for step in running:
            step.cancel(errors.CancelledError(None, None, "Session has been closed: the step was cancelled"))
        self._resources.cleanup()
        self._plans.clear()


class Session(BaseSession):
    """A TF1 session. ``target=""`` runs in-process; ``grpc://host:port`` uses that task's master."""

    def __init__(self, target: str = "", graph: Optional[graph_lib.Graph] = None, config: Any = None) -> None:
        super().__init__(target, graph, config)
        if target:
            from tensorgrid.client import remote_session

            self._engine: Any = remote_session.RemoteEngine(target, self._graph, self._config)
        else:
            self._engine = _LocalEngine(self._graph, self._config)

    def _run(self, feeds: list[graph_lib.Tensor], feed_values: list[Any], fetches: list[graph_lib.Tensor],
             targets: list[graph_lib.Operation], options: Any) -> list[Any]:
        values: list[Any] = self._engine.run(feeds, feed_values, fetches, targets, options)
        return values

    def list_devices(self) -> list[Any]:
        return list(self._engine.list_devices())

    def close(self) -> None:
        if not getattr(self, "_closed", True):
            self._closed = True
            self._engine.close()

    @staticmethod
    def reset(target: str, containers: Optional[list[str]] = None, config: Any = None) -> None:
        """Clears resource containers on every task reachable from ``target`` (all when None)."""
        if not target:
            return
        from tensorgrid.client import remote_session

        remote_session.reset(target, containers, config)


class InteractiveSession(Session):
    """A session that installs itself as the default, for shells and notebooks."""

    def __init__(self, target: str = "", graph: Optional[graph_lib.Graph] = None, config: Any = None) -> None:
        super().__init__(target, graph, config)
        self._default_graph_context = self._graph.as_default()
        self._default_graph_context.__enter__()
        self._default_session_context = self.as_default()
        self._default_session_context.__enter__()

    def close(self) -> None:
        context = getattr(self, "_default_session_context", None)
        if context is not None:
            self._default_session_context = None
            context.__exit__(None, None, None)
            self._default_graph_context.__exit__(None, None, None)
        super().close()

