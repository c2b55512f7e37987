"""The gRPC face of a task: Master and Worker servicers, and the clients that call them.

Servicers translate wire messages into calls on the task's ``Master`` and ``Worker``
objects and map errors both ways: an ``OpError`` is answered with its gRPC status
code and message, and a client turns a failed call back into the same ``OpError``
class (UNAVAILABLE becomes ``UnavailableError``, which callers retry with backoff).
Tensors travel through ``transport`` (header + raw bytes, large ones over the data
channel); control messages are protobuf. RunStep, RunGraph and PushTensors, the
calls of every step, go over the peer's data channel when it is reachable (same
requests, replies and error statuses, a raw socket round trip instead of a gRPC
call); gRPC serves them otherwise.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
import time
from typing import Any, Callable, Optional, Sequence, TypeVar

import grpc
from google.protobuf import message as message_lib

from tensorgrid import metrics
from tensorgrid.distributed import graph_codec
from tensorgrid.distributed import master as master_lib
from tensorgrid.distributed import transport
from tensorgrid.distributed.transport import data_channel
from tensorgrid.distributed.transport import grpc_frames
from tensorgrid.distributed.transport import wire
from tensorgrid.framework import errors
from tensorgrid.framework import graph_def as graph_def_lib
from tensorgrid.v1 import config_pb2
from tensorgrid.v1 import master_pb2
from tensorgrid.v1 import worker_pb2

log = logging.getLogger("tensorgrid.rpc")

MASTER_SERVICE = master_pb2.DESCRIPTOR.services_by_name["Master"]
WORKER_SERVICE = worker_pb2.DESCRIPTOR.services_by_name["Worker"]

T = TypeVar("T")


# ---------------------------------------------------------------------- errors across the wire

def _answer(context: grpc.ServicerContext, method: str, call: Callable[[], T]) -> T:
    """Runs a servicer body; an OpError (or a bad request) becomes its gRPC status."""
    started = time.perf_counter()
    try:
        return call()
    except errors.OpError as e:
        context.abort(grpc_frames.status_code(e.code), e.message)
    except wire.TransportError:
        raise
    except (ValueError, TypeError, KeyError) as e:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{method}: {e}")
    finally:
        metrics.RPC_DURATION.labels(method).observe(time.perf_counter() - started)
    raise AssertionError("unreachable: abort raises")


def _as_op_error(e: grpc.RpcError, what: str) -> errors.OpError:
    code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
    details = e.details() if hasattr(e, "details") else str(e)
    if code == grpc.StatusCode.UNAVAILABLE:
        return errors.UnavailableError(None, None, f"{what}: {details}")
    return errors.error_for_code(code.value[0], details or f"{what} failed with {code.name}")


def _call(what: str, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except grpc.RpcError as e:
        raise _as_op_error(e, what) from None
    except wire.TransportError as e:
        raise errors.DataLossError(None, None, f"{what}: {e}") from None


# ---------------------------------------------------------------------- servicers

class WorkerServicer:
    def __init__(self, server: Any, tx: transport.Transport) -> None:
        self._server = server
        self._worker = server.worker
        self._tx = tx

    def GetStatus(self, request: worker_pb2.GetStatusRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            response = worker_pb2.GetStatusResponse(data_port=self._tx.data_port)
            for name, kind in self._worker.devices():
                response.device.add(name=name, device_type=kind, incarnation=self._worker.incarnation)
            return response
        return _answer(context, "GetStatus", body)

    def RegisterGraph(self, request: worker_pb2.RegisterGraphRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            graph_def = graph_codec.from_proto(request.graph_def)
            handle = self._worker.register_graph(request.session_handle, graph_def, list(request.feed),
                                                 list(request.fetch), list(request.target))
            return worker_pb2.RegisterGraphResponse(graph_handle=handle)
        return _answer(context, "RegisterGraph", body)

    def DeregisterGraph(self, request: worker_pb2.DeregisterGraphRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        return _answer(context, "DeregisterGraph", lambda: (
            self._worker.deregister_graph(request.graph_handle), worker_pb2.DeregisterGraphResponse())[1])

    def RunGraph(self, frames: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            first, feeds = self._tx.read_message(frames, worker_pb2.RunGraphFrame)
            if first.WhichOneof("kind") != "request":
                raise errors.InvalidArgumentError(None, None, "RunGraph must start with a request frame")
            request = first.request
            feed_names, fetch_names = self._worker.signature(request.graph_handle)
            missing = [n for n in feed_names if n not in feeds]
            if missing:
                raise errors.InvalidArgumentError(None, None, f"RunGraph for {request.graph_handle} lacks feeds {missing}")
            values = self._worker.run_graph(request.graph_handle, request.step_id, [feeds[n] for n in feed_names])
            metrics.TENSORS_RECEIVED.inc(len(feeds))
            metrics.TENSORS_SENT.inc(len(values))
            return self._tx.write_frames(
                worker_pb2.RunGraphFrame(response=worker_pb2.RunGraphResponse(step_id=request.step_id)),
                list(zip(fetch_names, values)), context=context,
                use_data_channel=request.options.allow_data_channel)
        return _answer(context, "RunGraph", body)

    def RecvTensor(self, request: worker_pb2.RecvTensorRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            values = [(key, self._worker.recv_tensor(request.step_id, key)) for key in request.rendezvous_key]
            metrics.TENSORS_SENT.inc(len(values))
            metrics.RPC_BYTES.labels("RecvTensor", "sent").inc(sum(int(getattr(v, "nbytes", 0)) for _, v in values))
            return self._tx.write_frames(None, values, context=context,
                                         use_data_channel=request.options.allow_data_channel)
        return _answer(context, "RecvTensor", body)

    def PushTensors(self, frames: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            first, tensors = self._tx.read_message(frames, worker_pb2.PushTensorsFrame)
            if first.WhichOneof("kind") != "request":
                raise errors.InvalidArgumentError(None, None, "PushTensors must start with a request frame")
            self._worker.push_tensors(first.request.step_id, first.request.from_task, list(tensors.items()))
            metrics.TENSORS_RECEIVED.inc(len(tensors))
            metrics.RPC_BYTES.labels("PushTensors", "received").inc(sum(int(v.nbytes) for v in tensors.values()))
            return worker_pb2.PushTensorsResponse()
        return _answer(context, "PushTensors", body)

    def CleanupGraph(self, request: worker_pb2.CleanupGraphRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            if request.abort_reason:
                self._worker.abort_step(request.step_id, request.abort_reason)
            else:
                self._worker.cleanup_step(request.step_id)
            return worker_pb2.CleanupGraphResponse()
        return _answer(context, "CleanupGraph", body)

    def CleanupAll(self, request: worker_pb2.CleanupAllRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        return _answer(context, "CleanupAll", lambda: (
            self._worker.cleanup_all(list(request.container)), worker_pb2.CleanupAllResponse())[1])

    def Shutdown(self, request: worker_pb2.ShutdownRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            if request.finished_task:
                self._server.on_task_finished(request.finished_task, request.finished_task_is_chief)
            else:
                self._server.request_stop(request.reason or "asked to shut down")
            return worker_pb2.ShutdownResponse()
        return _answer(context, "Shutdown", body)


class MasterServicer:
    def __init__(self, server: Any, tx: transport.Transport) -> None:
        self._master = server.master
        self._tx = tx

    def CreateSession(self, request: master_pb2.CreateSessionRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            graph_def = graph_codec.from_proto(request.graph_def)
            options = master_lib.SessionOptions(list(request.config.device_filters),
                                                int(request.config.operation_timeout_in_ms))
            handle = self._master.create_session(graph_def, options)
            return master_pb2.CreateSessionResponse(session_handle=handle, graph_version=graph_def.version,
                                                    data_port=self._tx.data_port)
        return _answer(context, "CreateSession", body)

    def ExtendSession(self, request: master_pb2.ExtendSessionRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            version = self._master.extend_session(request.session_handle, graph_codec.from_proto(request.graph_def))
            return master_pb2.ExtendSessionResponse(new_graph_version=version)
        return _answer(context, "ExtendSession", body)

    def RunStep(self, frames: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            first, feeds = self._tx.read_message(frames, master_pb2.RunStepFrame)
            if first.WhichOneof("kind") != "request":
                raise errors.InvalidArgumentError(None, None, "RunStep must start with a request frame")
            request = first.request
            timeout = request.options.timeout_in_ms / 1000.0 if request.options.timeout_in_ms else None
            values = self._master.run_step(request.session_handle, feeds, list(request.fetch),
                                           list(request.target), timeout=timeout)
            return self._tx.write_frames(master_pb2.RunStepFrame(response=master_pb2.RunStepResponse()),
                                         list(zip(request.fetch, values)), context=context,
                                         use_data_channel=request.options.allow_data_channel)
        return _answer(context, "RunStep", body)

    def CloseSession(self, request: master_pb2.CloseSessionRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        return _answer(context, "CloseSession", lambda: (
            self._master.close_session(request.session_handle), master_pb2.CloseSessionResponse())[1])

    def ListDevices(self, request: master_pb2.ListDevicesRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            response = master_pb2.ListDevicesResponse()
            for name, kind, incarnation in self._master.list_devices():
                response.remote_device.add(name=name, device_type=kind, incarnation=incarnation)
            return response
        return _answer(context, "ListDevices", body)

    def Reset(self, request: master_pb2.ResetRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        return _answer(context, "Reset", lambda: (
            self._master.reset(list(request.container)), master_pb2.ResetResponse())[1])


# ---------------------------------------------------------------------- calls over the data channel

def _data_channel_handler(method: str, body: Callable[[bytes, dict[str, Any]], tuple[bytes, list[tuple[str, Any]]]],
                          ) -> data_channel.CallHandler:
    """A data channel handler running ``body(control, tensors by name)``; errors are
    answered as ``_answer`` answers them on gRPC."""
    duration = metrics.RPC_DURATION.labels(method)

    def handle(control: bytes, received: list[wire.ReceivedTensor]) -> tuple[int, bytes, list[tuple[str, Any]]]:
        started = time.perf_counter()
        try:
            tensors: dict[str, Any] = {}
            for item in received:
                if item.name in tensors:
                    raise wire.TransportError(f"tensor {item.name!r} arrived twice")
                tensors[item.name] = item.array
            reply, reply_tensors = body(control, tensors)
            return 0, reply, reply_tensors
        except errors.OpError as e:
            return e.code, e.message.encode(), []
        except wire.TransportError as e:
            return e.code, str(e).encode(), []
        except (ValueError, TypeError, KeyError, message_lib.DecodeError) as e:
            return grpc.StatusCode.INVALID_ARGUMENT.value[0], f"{method}: {e}".encode(), []
        finally:
            duration.observe(time.perf_counter() - started)
    return handle


def _data_channel_handlers(server: Any) -> dict[int, data_channel.CallHandler]:
    worker, master = server.worker, server.master
    pushed_bytes = metrics.RPC_BYTES.labels("PushTensors", "received")

    def push_tensors(control: bytes, tensors: dict[str, Any]) -> tuple[bytes, list[tuple[str, Any]]]:
        request = worker_pb2.PushTensorsRequest.FromString(control)
        worker.push_tensors(request.step_id, request.from_task, list(tensors.items()))
        metrics.TENSORS_RECEIVED.inc(len(tensors))
        pushed_bytes.inc(sum(int(v.nbytes) for v in tensors.values()))
        return b"", []

    def run_graph(control: bytes, feeds: dict[str, Any]) -> tuple[bytes, list[tuple[str, Any]]]:
        request = worker_pb2.RunGraphRequest.FromString(control)
        feed_names, fetch_names = worker.signature(request.graph_handle)
        missing = [n for n in feed_names if n not in feeds]
        if missing:
            raise errors.InvalidArgumentError(None, None, f"RunGraph for {request.graph_handle} lacks feeds {missing}")
        values = worker.run_graph(request.graph_handle, request.step_id, [feeds[n] for n in feed_names])
        metrics.TENSORS_RECEIVED.inc(len(feeds))
        metrics.TENSORS_SENT.inc(len(values))
        return worker_pb2.RunGraphResponse(step_id=request.step_id).SerializeToString(), list(zip(fetch_names, values))

    def run_step(control: bytes, feeds: dict[str, Any]) -> tuple[bytes, list[tuple[str, Any]]]:
        request = master_pb2.RunStepRequest.FromString(control)
        values = master.run_step(request.session_handle, feeds, list(request.fetch), list(request.target))
        return b"", list(zip(request.fetch, values))

    return {
        data_channel.Method.PUSH_TENSORS: _data_channel_handler("PushTensors", push_tensors),
        data_channel.Method.RUN_GRAPH: _data_channel_handler("RunGraph", run_graph),
        data_channel.Method.RUN_STEP: _data_channel_handler("RunStep", run_step),
    }


def serve(server: Any, port: int) -> tuple[grpc.Server, int]:
    """Starts the task's gRPC server on all interfaces at ``port``; returns it and the bound port.

    ``TENSORGRID_DATA_CHANNEL=0`` turns the task's data channel off (when its random
    port cannot be reached): peers then send it everything over gRPC.
    """
    tx = transport.Transport(transport.TransportConfig(
        data_channel=os.environ.get("TENSORGRID_DATA_CHANNEL", "1") != "0"))
    tx.serve_calls(_data_channel_handlers(server))
    server.transport = tx
    rpc_server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=128, thread_name_prefix="rpc"),
                             options=grpc_frames.GRPC_OPTIONS)
    rpc_server.add_generic_rpc_handlers((
        grpc_frames.generic_handler(MASTER_SERVICE, MasterServicer(server, tx)),
        grpc_frames.generic_handler(WORKER_SERVICE, WorkerServicer(server, tx)),
    ))
    bound = 0
    for address in (f"[::]:{port}", f"0.0.0.0:{port}"):
        try:
            bound = rpc_server.add_insecure_port(address)
        except RuntimeError:
            bound = 0
        if bound:
            break
    if not bound:
        raise RuntimeError(f"Cannot listen on port {port} for {server.task}: is another process using it?")
    rpc_server.start()
    return rpc_server, bound


# ---------------------------------------------------------------------- clients

_client_transport: Optional[transport.Transport] = None
_client_transport_lock = threading.Lock()


def _shared_transport() -> transport.Transport:
    """Receiving side only (buffer pool and data-channel client); no data server needed."""
    global _client_transport
    with _client_transport_lock:
        if _client_transport is None:
            _client_transport = transport.Transport(transport.TransportConfig(data_channel=False))
        return _client_transport


class _Client:
    def __init__(self, address: str, service: Any) -> None:
        self.address = address
        self.host = grpc_frames.host_of(address)
        self._channel = grpc.insecure_channel(address, options=grpc_frames.GRPC_OPTIONS)
        self._stub = grpc_frames.Stub(self._channel, service)
        self._tx = _shared_transport()
        self._data_channel: Optional[bool] = None
        self._data_port = 0

    def _allow_data_channel(self) -> bool:
        if self._data_channel is None:
            if not self._data_port:
                self._learn_data_port()
            self._data_channel = not self._tx.data_client.why_unreachable(self.host, self._data_port)
        return self._data_channel

    def _learn_data_port(self) -> None:
        """Asks the peer for its data channel port, when no earlier answer told it."""

    def _call_data_channel(self, what: str, method: int, control: bytes,
                           tensors: Sequence[tuple[str, Any]]) -> tuple[bytes, dict[str, Any]]:
        """Calls ``method`` on the peer's data channel; its error status becomes the same
        OpError as from gRPC. Returns the reply's control bytes and tensors by name."""
        try:
            code, reply, received = self._tx.call(self.host, self._data_port, method, control, tensors)
        except wire.TransportError as e:
            if e.code == errors.UnavailableError.code:
                self._data_channel, self._data_port = None, 0  # the peer may have restarted on another port
                raise errors.UnavailableError(None, None, f"{what}: {e}") from None
            raise errors.DataLossError(None, None, f"{what}: {e}") from None
        if code:
            message = reply.decode(errors="replace")
            if code == errors.UnavailableError.code:
                raise errors.UnavailableError(None, None, f"{what}: {message}")
            raise errors.error_for_code(code, message or f"{what} failed with status {code}")
        return reply, {item.name: item.array for item in received}

    def close(self) -> None:
        self._channel.close()


class WorkerClient(_Client):
    """Calls the Worker service of ``task`` at ``address``; the master and peers use it alike."""

    def __init__(self, address: str, task: str) -> None:
        super().__init__(address, WORKER_SERVICE)
        self.task = task
        self._signatures: dict[str, tuple[list[str], list[str]]] = {}

    def _learn_data_port(self) -> None:
        self.incarnation_quick()

    def incarnation_quick(self) -> int:
        response = _call(f"GetStatus of {self.task} at {self.address}",
                         lambda: self._stub.GetStatus(worker_pb2.GetStatusRequest(), timeout=10.0))
        if not response.device:
            raise errors.InternalError(None, None, f"{self.task} reported no devices")
        if response.data_port != self._data_port:
            self._data_port = response.data_port
            self._data_channel = None
        return int(response.device[0].incarnation)

    def devices(self) -> list[tuple[str, str]]:
        response = _call(f"GetStatus of {self.task}",
                         lambda: self._stub.GetStatus(worker_pb2.GetStatusRequest(), timeout=10.0))
        return [(d.name, d.device_type) for d in response.device]

    def register_graph(self, session_handle: str, graph_def: graph_def_lib.GraphDef, feeds: Sequence[str],
                       fetches: Sequence[str], targets: Sequence[str]) -> str:
        request = worker_pb2.RegisterGraphRequest(session_handle=session_handle, graph_def=graph_codec.to_proto(graph_def),
                                                  feed=list(feeds), fetch=list(fetches), target=list(targets))
        response = _call(f"RegisterGraph on {self.task}", lambda: self._stub.RegisterGraph(request))
        self._signatures[response.graph_handle] = (list(feeds), list(fetches))
        return str(response.graph_handle)

    def deregister_graph(self, handle: str) -> None:
        self._signatures.pop(handle, None)
        _call(f"DeregisterGraph on {self.task}", lambda: self._stub.DeregisterGraph(
            worker_pb2.DeregisterGraphRequest(graph_handle=handle), timeout=10.0))

    def run_graph(self, handle: str, step_id: int, feed_values: Sequence[Any]) -> list[Any]:
        feed_names, fetch_names = self._signatures[handle]
        request = worker_pb2.RunGraphRequest(graph_handle=handle, step_id=step_id, send=feed_names,
                                             recv_key=fetch_names)
        if self._allow_data_channel():
            _, fetched = self._call_data_channel(f"RunGraph on {self.task}", data_channel.Method.RUN_GRAPH,
                                                 request.SerializeToString(), list(zip(feed_names, feed_values)))
            return [fetched[name] for name in fetch_names]
        request.options.allow_data_channel = False
        writer = self._tx.write_frames(worker_pb2.RunGraphFrame(request=request), list(zip(feed_names, feed_values)))

        def run() -> list[Any]:
            reply = self._stub.RunGraph(writer.bundle())
            _, fetched = self._tx.read_message(reply, worker_pb2.RunGraphFrame, peer_host=self.host)
            return [fetched[name] for name in fetch_names]

        return _call(f"RunGraph on {self.task}", run)

    def recv_tensor(self, step_id: int, key: str) -> Any:
        request = worker_pb2.RecvTensorRequest(step_id=step_id, rendezvous_key=[key])
        request.options.allow_data_channel = self._allow_data_channel()

        def run() -> Any:
            reply = self._stub.RecvTensor(request)
            received = [item for item in self._tx.read_frames(reply, peer_host=self.host)
                        if isinstance(item, wire.ReceivedTensor)]
            if len(received) != 1:
                raise errors.InternalError(None, None, f"RecvTensor of {key} returned {len(received)} tensors")
            metrics.TENSORS_RECEIVED.inc()
            return received[0].array

        return _call(f"RecvTensor from {self.task}", run)

    def push_tensors(self, step_id: int, from_task: str, items: Sequence[tuple[str, Any]]) -> None:
        """Delivers a step's tensors to the peer's rendezvous: over its data channel when
        it is reachable (no gRPC copies of the payloads, no gRPC call), else as a
        PushTensors call."""
        request = worker_pb2.PushTensorsRequest(step_id=step_id, from_task=from_task)
        metrics.TENSORS_SENT.inc(len(items))
        what = f"PushTensors to {self.task}"
        if self._allow_data_channel():
            self._call_data_channel(what, data_channel.Method.PUSH_TENSORS, request.SerializeToString(), items)
            return
        bundle = self._tx.write_frames(worker_pb2.PushTensorsFrame(request=request), items).bundle()
        _call(what, lambda: self._stub.PushTensors(bundle))

    def abort_step(self, step_id: int, reason: str) -> None:
        _call(f"CleanupGraph on {self.task}", lambda: self._stub.CleanupGraph(
            worker_pb2.CleanupGraphRequest(step_id=step_id, abort_reason=reason), timeout=10.0))

    def cleanup_all(self, containers: Optional[list[str]] = None) -> None:
        _call(f"CleanupAll on {self.task}", lambda: self._stub.CleanupAll(
            worker_pb2.CleanupAllRequest(container=list(containers or [])), timeout=30.0))

    def task_finished(self, task: str, is_chief: bool, timeout: float = 5.0) -> None:
        _call(f"Shutdown on {self.task}", lambda: self._stub.Shutdown(
            worker_pb2.ShutdownRequest(reason=f"{task} finished", finished_task=task, finished_task_is_chief=is_chief),
            timeout=timeout))

    def shutdown(self, reason: str, timeout: float = 5.0) -> None:
        _call(f"Shutdown on {self.task}", lambda: self._stub.Shutdown(
            worker_pb2.ShutdownRequest(reason=reason), timeout=timeout))


class MasterClient(_Client):
    """Calls the Master service at ``address`` for a client session."""

    def __init__(self, address: str) -> None:
        super().__init__(address, MASTER_SERVICE)

    def create_session(self, graph_def: graph_def_lib.GraphDef, options: master_lib.SessionOptions) -> str:
        config = config_pb2.SessionConfig(device_filters=options.device_filters,
                                          operation_timeout_in_ms=options.operation_timeout_in_ms)
        request = master_pb2.CreateSessionRequest(graph_def=graph_codec.to_proto(graph_def), config=config,
                                                  target=f"grpc://{self.address}")
        response = master_lib.wait_for_task(
            f"the master at {self.address}",
            lambda: _call(f"CreateSession at {self.address}", lambda: self._stub.CreateSession(request)),
            timeout=600.0)
        self._data_port = response.data_port
        return str(response.session_handle)

    def extend_session(self, handle: str, graph_def: graph_def_lib.GraphDef) -> int:
        request = master_pb2.ExtendSessionRequest(session_handle=handle, graph_def=graph_codec.to_proto(graph_def))
        return int(_call(f"ExtendSession at {self.address}", lambda: self._stub.ExtendSession(request)).new_graph_version)

    def run_step(self, handle: str, feeds: dict[str, Any], fetches: Sequence[str], targets: Sequence[str],
                 timeout: Optional[float] = None) -> list[Any]:
        request = master_pb2.RunStepRequest(session_handle=handle, feed=list(feeds), fetch=list(fetches),
                                            target=list(targets))
        if not timeout and self._allow_data_channel():
            # A step with a deadline stays on gRPC, which enforces it on both sides.
            _, fetched = self._call_data_channel(f"RunStep at {self.address}", data_channel.Method.RUN_STEP,
                                                 request.SerializeToString(), list(feeds.items()))
            return [fetched[name] for name in fetches]
        request.options.allow_data_channel = self._allow_data_channel()
        if timeout:
            request.options.timeout_in_ms = int(timeout * 1000)
        writer = self._tx.write_frames(master_pb2.RunStepFrame(request=request), list(feeds.items()))

        def run() -> list[Any]:
            reply = self._stub.RunStep(writer.bundle(), timeout=timeout)
            _, fetched = self._tx.read_message(reply, master_pb2.RunStepFrame, peer_host=self.host)
            return [fetched[name] for name in fetches]

        return _call(f"RunStep at {self.address}", run)

    def close_session(self, handle: str) -> None:
        _call(f"CloseSession at {self.address}", lambda: self._stub.CloseSession(
            master_pb2.CloseSessionRequest(session_handle=handle), timeout=10.0))

    def list_devices(self) -> list[tuple[str, str, int]]:
        response = _call(f"ListDevices at {self.address}", lambda: self._stub.ListDevices(
            master_pb2.ListDevicesRequest(), timeout=60.0))
        return [(d.name, d.device_type, int(d.incarnation)) for d in [*response.local_device, *response.remote_device]]

    def reset(self, containers: Optional[list[str]]) -> None:
        _call(f"Reset at {self.address}", lambda: self._stub.Reset(
            master_pb2.ResetRequest(container=list(containers or [])), timeout=60.0))
