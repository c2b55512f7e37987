"""A task's Master and Worker services, served on gRPC and on the data channel.

Servicers translate wire messages into calls on the task's ``Master`` and ``Worker``
and map errors: an ``OpError`` is answered with its status code and message, a
malformed transfer with its ``TransportError`` status, any other bad request
(ValueError, TypeError, KeyError, an unparsable message) with INVALID_ARGUMENT
naming the method.

The calls of every step (``step_calls``: RunStep, RunGraph, PushTensors) are written
once, as the methods of ``StepHandlers``: a request message and tensors by name in, a
response message and tensors out. ``_serve_frames`` binds one to gRPC (its unary
method and its streaming twin), ``_data_channel_handler`` to the data channel, so
both protocols answer the same requests with the same replies and the same errors.
``serve`` starts both for a ``Server``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
import time
import urllib.parse
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

import grpc
from google.protobuf import message as message_lib

from tensorgrid import monitoring
from tensorgrid.distributed import cluster as cluster_lib
from tensorgrid.distributed import graph_codec
from tensorgrid.distributed import master as master_lib
from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc import replication_service
from tensorgrid.distributed.rpc import sender_names
from tensorgrid.distributed.rpc import step_calls
from tensorgrid.distributed.rpc import transport
from tensorgrid.distributed import worker as worker_lib
from tensorgrid.distributed.rpc.transport import data_channel
from tensorgrid.distributed.rpc.transport import grpc_frames
from tensorgrid.distributed.rpc.transport import stream_io
from tensorgrid.distributed.rpc.transport import tls
from tensorgrid.distributed.rpc.transport import wait_pool
from tensorgrid.distributed.rpc.transport import wire
from tensorgrid.framework import device as device_lib
from tensorgrid.framework import errors
from tensorgrid.v1 import master_pb2
from tensorgrid.v1 import worker_pb2

if TYPE_CHECKING:
    from tensorgrid.distributed.rpc import server as server_lib

RPC_THREADS = 128
"""Threads of a task's gRPC server shared by every method but RecvTensor, whose waiting
calls run on a pool of their own (``ServerLimits.recv_tensor_max_waiting`` threads)."""
MASTER_SERVICE = master_pb2.DESCRIPTOR.services_by_name["Master"]
WORKER_SERVICE = worker_pb2.DESCRIPTOR.services_by_name["Worker"]

T = TypeVar("T")

StepBody = Callable[[Any, dict[str, Any], stream_io.Peer], tuple[message_lib.Message, list[tuple[str, Any]]]]
"""A call of a step written once: (request message, tensors by name, who sent it) ->
(response, tensors). Who sent it is what the server saw (``stream_io.peer_of``,
``grpc_peer``), never a name in the request."""


# ---------------------------------------------------------------------- errors across the wire

def _status_of(failure: Exception, method: str) -> Optional[tuple[int, str]]:
    """The status number and message answering ``failure``, raised serving ``method``;
    None for a failure that is neither an OpError nor a bad request (a bug: it is left
    to the protocol, which answers UNKNOWN on gRPC and INTERNAL on the data channel)."""
    if isinstance(failure, errors.OpError):
        return failure.code, failure.message
    if isinstance(failure, wire.TransportError):
        return failure.code, str(failure)
    if isinstance(failure, (ValueError, TypeError, KeyError, message_lib.DecodeError)):
        return errors.InvalidArgumentError.code, f"{method}: {failure}"
    return None


def _answer(context: grpc.ServicerContext, method: str, call: Callable[[], T]) -> T:
    """Runs a servicer body; an OpError or a bad request becomes its gRPC status."""
    started = time.perf_counter()
    try:
        return call()
    except Exception as failure:  # answered below, or re-raised
        status = _status_of(failure, method)
        if status is None:
            raise
        context.abort(grpc_frames.status_code(status[0]), status[1])
    finally:
        monitoring.RPC_DURATION.labels(method).observe(time.perf_counter() - started)
    raise AssertionError("unreachable: abort raises")


def answer(context: grpc.ServicerContext, method: str, call: Callable[[], T]) -> T:
    """``call``'s result, or its OpError or bad request as the gRPC status: for the services of other
    modules (``shard_calls``), so that they answer errors as these do."""
    return _answer(context, method, call)


# ---------------------------------------------------------------------- the calls of every step

class StepHandlers:
    """RunStep, RunGraph and PushTensors, each written once, for both protocols."""

    def __init__(self, worker: worker_lib.Worker, master: master_lib.Master,
                 senders: sender_names.SenderNames) -> None:
        self._worker = worker
        self._master = master
        self.senders = senders
        """Who may ask what (``sender_names``): PushTensors here, CleanupAll and Shutdown on gRPC."""
        self._pushed_bytes = monitoring.RPC_BYTES.labels("PushTensors", "received")

    def run_step(self, request: master_pb2.RunStepRequest, feeds: dict[str, Any],
                 peer: stream_io.Peer) -> tuple[message_lib.Message, list[tuple[str, Any]]]:
        timeout = request.options.timeout_in_ms / 1000.0 if request.options.timeout_in_ms else None
        values = self._master.run_step(request.session_handle, feeds, list(request.fetch), list(request.target),
                                       timeout=timeout)
        return master_pb2.RunStepResponse(), list(zip(request.fetch, values))

    def run_graph(self, request: worker_pb2.RunGraphRequest, feeds: dict[str, Any],
                  peer: stream_io.Peer) -> tuple[message_lib.Message, list[tuple[str, Any]]]:
        feed_names, fetch_names = self._worker.signature(request.graph_handle)
        missing = [n for n in feed_names if n not in feeds]
        if missing:
            raise errors.InvalidArgumentError(None, None, f"RunGraph for {request.graph_handle} lacks feeds {missing}")
        values = self._worker.run_graph(request.graph_handle, request.step_id, [feeds[n] for n in feed_names])
        monitoring.TENSORS_RECEIVED.inc(len(feeds))
        monitoring.TENSORS_SENT.inc(len(values))
        return worker_pb2.RunGraphResponse(step_id=request.step_id), list(zip(fetch_names, values))

    def push_tensors(self, request: worker_pb2.PushTensorsRequest, tensors: dict[str, Any],
                     peer: stream_io.Peer) -> tuple[message_lib.Message, list[tuple[str, Any]]]:
        # The keys' sending task is whatever the pusher wrote: held to the client's certificate
        # where names tell tasks apart (sender_names), and the rendezvous counts the tensors
        # against the peer that sent them, not request.from_task.
        self.senders.check("PushTensors", tensors, peer.names)
        self._worker.push_tensors(request.step_id, request.from_task, list(tensors.items()), origin=peer.identity)
        monitoring.TENSORS_RECEIVED.inc(len(tensors))
        self._pushed_bytes.inc(sum(int(v.nbytes) for v in tensors.values()))
        return worker_pb2.PushTensorsResponse(), []

    def data_channel_handlers(self) -> dict[int, data_channel.CallHandler]:
        """The handlers of the task's data channel, by method number."""
        bodies: dict[step_calls.StepCall, StepBody] = {
            step_calls.RUN_STEP: self.run_step,
            step_calls.RUN_GRAPH: self.run_graph,
            step_calls.PUSH_TENSORS: self.push_tensors,
        }
        return {call.method: _data_channel_handler(call, body) for call, body in bodies.items()}


def _serve_frames(call: step_calls.StepCall, body: StepBody, tx: transport.Transport, frames: Any,
                  context: grpc.ServicerContext) -> Any:
    """``body`` served as gRPC method ``call.name`` (and its streaming twin): frames in,
    frames or the response message out."""
    def run() -> Any:
        first, tensors = tx.read_message(frames, call.frame_type)
        if first.WhichOneof("kind") != "request":
            raise errors.InvalidArgumentError(None, None, f"{call.name} must start with a request frame")
        request: Any = getattr(first, "request")
        response, reply_tensors = body(request, tensors, grpc_peer(context))
        if not call.replies_with_frames:
            return response
        return tx.write_frames(call.frame_type(response=response), reply_tensors, context=context,
                               use_data_channel=request.options.allow_data_channel)
    return _answer(context, call.name, run)


def _data_channel_handler(call: step_calls.StepCall, body: StepBody) -> data_channel.CallHandler:
    """``body`` served as data channel method ``call.method``: the request message as
    control bytes, the response message back; errors answered as ``_answer`` does."""
    duration = monitoring.RPC_DURATION.labels(call.name)
    served = monitoring.DATA_CHANNEL_CALLS.labels(call.name)

    def handle(control: bytes, received: list[wire.ReceivedTensor],
               peer: stream_io.Peer) -> tuple[int, bytes, list[tuple[str, Any]]]:
        started = time.perf_counter()
        served.inc()
        try:
            tensors: dict[str, Any] = {}
            for item in received:
                if item.name in tensors:
                    raise wire.TransportError(f"tensor {item.name!r} arrived twice")
                tensors[item.name] = item.array
            response, reply_tensors = body(call.request_type.FromString(control), tensors, peer)
            return 0, response.SerializeToString(), reply_tensors
        except Exception as failure:  # answered below, or re-raised
            status = _status_of(failure, call.name)
            if status is None:
                raise
            return status[0], status[1].encode(), []
        finally:
            duration.observe(time.perf_counter() - started)
    return handle


def grpc_peer(context: grpc.ServicerContext) -> stream_io.Peer:
    """Who sent a gRPC call: ``grpc_peer_identity``, and the names of its TLS certificate."""
    auth = context.auth_context()
    names = None
    if b"ssl" in auth.get("transport_security_type", ()):
        names = frozenset(bytes(name).decode("utf-8", "replace").strip().lower()
                          for name in auth.get("x509_subject_alternative_name", ()))
    return stream_io.Peer(grpc_peer_identity(context.peer()), names)


def grpc_peer_identity(peer: str) -> str:
    """The identity of a gRPC client from ``ServicerContext.peer()`` (``ipv4:10.0.0.5:41234``,
    ``ipv6:%5B::1%5D:41234``), as ``stream_io.address_identity`` gives it on the data
    channel; the peer string itself when it is neither."""
    kind, _, address = urllib.parse.unquote(peer).partition(":")
    host, _, port = address.rpartition(":")
    if kind not in ("ipv4", "ipv6") or not port.isdigit():
        return f"gRPC peer {peer}"
    return stream_io.address_identity(host.strip("[]"), int(port))


# ---------------------------------------------------------------------- servicers

class WorkerServicer:
    def __init__(self, server: server_lib.Server, tx: transport.Transport, steps: StepHandlers,
                 recv_pool: wait_pool.WaitPool) -> None:
        self._server = server
        self._worker = server.worker
        self._tx = tx
        self._steps = steps
        self.recv_pool = recv_pool
        """RecvTensor's own threads (``serve`` has gRPC run it there, off the shared pool)."""

    def GetStatus(self, request: worker_pb2.GetStatusRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            response = worker_pb2.GetStatusResponse(data_port=self._tx.data_port)
            for name, kind in self._worker.devices():
                response.device.add(name=name, device_type=kind, incarnation=self._worker.incarnation)
            return response
        return _answer(context, "GetStatus", body)

    def RegisterGraph(self, request: worker_pb2.RegisterGraphRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            graph_bytes = request.graph_def.ByteSize()
            self._server.limits.check_graph_size("RegisterGraph", len(request.graph_def.node), graph_bytes)
            graph_def = graph_codec.from_proto(request.graph_def)
            handle = self._worker.register_graph(request.session_handle, graph_def, list(request.feed),
                                                 list(request.fetch), list(request.target),
                                                 isolate_session_state=request.config.isolate_session_state,
                                                 graph_bytes=graph_bytes, peer_addresses=dict(request.peer_addresses),
                                                 registering_task=request.registering_task,
                                                 registering_incarnation=request.registering_incarnation)
            return worker_pb2.RegisterGraphResponse(graph_handle=handle)
        return _answer(context, "RegisterGraph", body)

    def DeregisterGraph(self, request: worker_pb2.DeregisterGraphRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            self._worker.deregister_graph(request.graph_handle)
            return worker_pb2.DeregisterGraphResponse()
        return _answer(context, "DeregisterGraph", body)

    def RunGraph(self, frames: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        return _serve_frames(step_calls.RUN_GRAPH, self._steps.run_graph, self._tx, frames, context)

    def PushTensors(self, frames: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        return _serve_frames(step_calls.PUSH_TENSORS, self._steps.push_tensors, self._tx, frames, context)

    def RecvTensor(self, request: worker_pb2.RecvTensorRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            # A waiting RecvTensor holds a thread of its own pool, never one of the
            # server's: at most recv_tensor_max_waiting at once, each for at most
            # recv_tensor_timeout_s in all, or until its call ends (the client cancels).
            if self.recv_pool.refusing():
                raise errors.ResourceExhaustedError(
                    None, None, f"RecvTensor: {self.recv_pool.limit} RecvTensor calls are already waiting on "
                    f"{self._worker.task}, the limit (TENSORGRID_RECV_TENSOR_MAX_WAITING)")
            ended = threading.Event()
            context.add_callback(ended.set)
            deadline = time.monotonic() + self._server.limits.recv_tensor_timeout_s
            values = [(key, self._worker.recv_tensor(request.step_id, key, max(deadline - time.monotonic(), 1e-3),
                                                     ended))
                      for key in request.rendezvous_key]
            monitoring.TENSORS_SENT.inc(len(values))
            monitoring.RPC_BYTES.labels("RecvTensor", "sent").inc(sum(int(getattr(v, "nbytes", 0)) for _, v in values))
            return self._tx.write_frames(None, values, context=context,
                                         use_data_channel=request.options.allow_data_channel)
        return _answer(context, "RecvTensor", body)

    def CleanupGraph(self, request: worker_pb2.CleanupGraphRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            if request.abort_reason:
                self._worker.abort_step(request.step_id, request.abort_reason)
            else:
                self._worker.cleanup_step(request.step_id)
            return worker_pb2.CleanupGraphResponse()
        return _answer(context, "CleanupGraph", body)

    def CleanupAll(self, request: worker_pb2.CleanupAllRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            session_jobs = [job for job in self._server.cluster.jobs if job != "ps"]
            self._steps.senders.check_jobs("CleanupAll", session_jobs, grpc_peer(context).names,
                                           "only a task that runs sessions clears variables (Session.reset)")
            self._worker.cleanup_all(list(request.container))
            return worker_pb2.CleanupAllResponse()
        return _answer(context, "CleanupAll", body)

    def Shutdown(self, request: worker_pb2.ShutdownRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            names = grpc_peer(context).names
            cluster = self._server.cluster
            chief = cluster_lib.chief_task(cluster)
            if request.finished_task:
                training = {name: (spec.job or "", spec.task or 0) for name, spec in
                            ((n, device_lib.DeviceSpec.from_string(n)) for n in self._server.training_task_names())}
                task = training.get(request.finished_task)
                if task is None:
                    raise ValueError(f"finished_task {request.finished_task!r} is not a training task of the cluster "
                                     f"(one of {', '.join(sorted(training)) or 'none'})")
                if request.finished_task_is_chief != (task == chief):
                    raise ValueError(f"finished_task_is_chief={request.finished_task_is_chief} for "
                                     f"{request.finished_task}, which is {'' if task == chief else 'not '}the chief")
                self._steps.senders.check_task("Shutdown", task, names, "a task reports only its own end")
                self._server.on_task_finished(request.finished_task, task == chief)
            else:
                if chief is not None:
                    self._steps.senders.check_task("Shutdown", chief, names, "only the chief stops a task")
                self._server.request_stop(request.reason or "asked to shut down")
            return worker_pb2.ShutdownResponse()
        return _answer(context, "Shutdown", body)


class MasterServicer:
    def __init__(self, server: server_lib.Server, tx: transport.Transport, steps: StepHandlers) -> None:
        self._master = server.master
        self._tx = tx
        self._steps = steps

    def CreateSession(self, request: master_pb2.CreateSessionRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            graph_bytes = request.graph_def.ByteSize()
            self._master.limits.check_graph_size("CreateSession", len(request.graph_def.node), graph_bytes)
            graph_def = graph_codec.from_proto(request.graph_def)
            options = master_lib.SessionOptions(list(request.config.device_filters),
                                                int(request.config.operation_timeout_in_ms),
                                                bool(request.config.isolate_session_state))
            handle = self._master.create_session(graph_def, options, graph_bytes)
            return master_pb2.CreateSessionResponse(session_handle=handle, graph_version=graph_def.version,
                                                    data_port=self._tx.data_port)
        return _answer(context, "CreateSession", body)

    def ExtendSession(self, request: master_pb2.ExtendSessionRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            graph_bytes = request.graph_def.ByteSize()
            self._master.limits.check_graph_size("ExtendSession", len(request.graph_def.node), graph_bytes)
            version = self._master.extend_session(request.session_handle, graph_codec.from_proto(request.graph_def),
                                                  graph_bytes)
            return master_pb2.ExtendSessionResponse(new_graph_version=version)
        return _answer(context, "ExtendSession", body)

    def RunStep(self, frames: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        return _serve_frames(step_calls.RUN_STEP, self._steps.run_step, self._tx, frames, context)

    def CloseSession(self, request: master_pb2.CloseSessionRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            self._master.close_session(request.session_handle)
            return master_pb2.CloseSessionResponse()
        return _answer(context, "CloseSession", body)

    def ListDevices(self, request: master_pb2.ListDevicesRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            response = master_pb2.ListDevicesResponse()
            for name, kind, incarnation in self._master.list_devices():
                response.remote_device.add(name=name, device_type=kind, incarnation=incarnation)
            return response
        return _answer(context, "ListDevices", body)

    def Reset(self, request: master_pb2.ResetRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            self._master.reset(list(request.container))
            return master_pb2.ResetResponse()
        return _answer(context, "Reset", body)


# ---------------------------------------------------------------------- serving a task

@dataclasses.dataclass
class Serving:
    """What ``serve`` started for a task."""

    grpc_server: grpc.Server
    port: int
    """The bound gRPC port."""
    transport: transport.Transport
    """The task's transport, with its data channel (if it has one)."""
    recv_pool: wait_pool.WaitPool
    """The threads of waiting RecvTensor calls."""
    expiry_watch: Optional[tls.ExpiryWatch]
    """What tells when the task's certificates expire (None without TLS)."""

    def stop(self, grace: float) -> None:
        self.grpc_server.stop(grace=grace)
        self.transport.close()
        self.recv_pool.shutdown(wait=False)
        if self.expiry_watch is not None:
            self.expiry_watch.stop()


def serve(server: server_lib.Server, port: int) -> Serving:
    """Starts the task's gRPC server at ``port``, and its data channel, on the interfaces of
    ``ports.listen_host`` (loopback for a task addressed as localhost, else all).

    The data channel listens on ``TENSORGRID_DATA_PORT`` when set, else on a free port
    (``ports``); ``TENSORGRID_DATA_CHANNEL=0`` turns it off, and peers then send the
    task everything over gRPC. Both speak mutual TLS with the certificates of
    ``TENSORGRID_TLS_DIR`` (``transport.tls``), renewed ones once reloaded (each new
    connection's handshake uses the current ones): tls.InsecureNotAllowedError without them
    unless ``TENSORGRID_INSECURE=1``. ValueError for a bad ``TENSORGRID_DATA_PORT`` or
    certificates, RuntimeError when a port cannot be bound.
    """
    data_port = ports.data_port_from_env()
    if data_port and data_port == port:
        raise ValueError(f"{ports.DATA_PORT_ENV}={data_port} is the gRPC port of {server.task}; the data channel "
                         f"needs a port of its own (conventionally the gRPC port + 1)")
    enabled = os.environ.get("TENSORGRID_DATA_CHANNEL", "1") != "0"
    host = ports.listen_host(server.address)
    limits = server.limits
    credentials = tls.from_env()
    try:
        tx = transport.Transport(transport.TransportConfig(
            data_channel=enabled, data_host=host, data_port=data_port, max_tensor_bytes=limits.max_tensor_bytes,
            data_max_connections=limits.data_max_connections, data_header_timeout_s=limits.data_header_timeout_s,
            data_idle_timeout_s=limits.data_idle_timeout_s, tls_handshake_timeout_s=limits.tls_handshake_timeout_s),
            credentials)
    except OSError as e:
        where = f" (set by {ports.DATA_PORT_ENV})" if data_port else ""
        raise RuntimeError(f"Cannot start the data channel of {server.task}{where}: {e}") from None
    steps = StepHandlers(server.worker, server.master, sender_names.SenderNames(server.cluster))
    tx.serve_calls(steps.data_channel_handlers())
    shared_pool = concurrent.futures.ThreadPoolExecutor(max_workers=RPC_THREADS, thread_name_prefix="rpc")
    recv_pool = wait_pool.WaitPool(limits.recv_tensor_max_waiting, shared_pool, "recv-tensor")
    rpc_server = grpc.server(shared_pool,
                             options=grpc_frames.grpc_options(grpc_frames.server_options(
                                 limits.grpc_max_message_bytes, limits.tls_handshake_timeout_s)))
    from tensorgrid.distributed.rpc import shard_calls  # it answers with _answer: imported once this module is

    rpc_server.add_generic_rpc_handlers((
        grpc_frames.generic_handler(MASTER_SERVICE, MasterServicer(server, tx, steps)),
        grpc_frames.generic_handler(WORKER_SERVICE, WorkerServicer(server, tx, steps, recv_pool),
                                    thread_pools={"RecvTensor": recv_pool}),
        shard_calls.generic_handler(server.shards),
        replication_service.handler(server.replica_store),
    ))
    bound = 0
    candidates = (f"[::]:{port}", f"0.0.0.0:{port}") if host == "" else (
        f"[{host}]:{port}" if ":" in host else f"{host}:{port}",)
    for address in candidates:
        try:
            bound = tls.add_port(rpc_server, address, credentials)
        except RuntimeError:
            bound = 0
        if bound:
            break
    if not bound:
        tx.close()
        recv_pool.shutdown(wait=False)
        raise errors.UnknownError(None, None, f"Could not start gRPC server: cannot listen on port {port} for "
                                  f"{server.task}: is another process using it?")  # TensorFlow's error class
    rpc_server.start()
    expiry_watch = None
    if credentials is not None:
        expiry_watch = tls.ExpiryWatch(credentials, server.task, check_every_s=credentials.reload_interval_s)
        live = credentials
        monitoring.TLS_CERTIFICATE_EXPIRY.set_function(lambda: live.current().not_after.timestamp())
    return Serving(rpc_server, bound, tx, recv_pool, expiry_watch)
