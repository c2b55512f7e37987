"""Clients of a task's Master and Worker services, over gRPC and the data channel.

A failed call becomes the ``OpError`` class the server raised (UNAVAILABLE becomes
``UnavailableError``, which callers retry with backoff; a malformed transfer
``DataLossError``). The calls of every step (``step_calls``: RunStep, RunGraph,
PushTensors) go through one helper, ``_Client._exchange``: on the peer's data channel
when it is reachable (probed once per port the peer advertises) and the call has no
deadline, else on gRPC; there, a direction carrying at least
``TransportConfig.stream_min_bytes`` inline goes on the method's streaming twin, in
chunks (docs/data-channel.md says which path is used when). A peer whose data
channel cannot be reached is logged once, with the reason, and each call that falls
back to gRPC for it is counted in ``tensorgrid_data_channel_fallbacks_total{peer}``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Hashable, Mapping, Optional, Sequence, TypeVar

import grpc
import numpy as np
from google.protobuf import message as message_lib

from tensorgrid import monitoring
from tensorgrid.distributed import graph_codec
from tensorgrid.distributed import limits
from tensorgrid.distributed import master as master_lib
from tensorgrid.distributed.rpc import step_calls
from tensorgrid.distributed.rpc import transport
from tensorgrid.distributed.rpc import user_authority
from tensorgrid.distributed.rpc.transport import call_watch
from tensorgrid.distributed.rpc.transport import grpc_frames
from tensorgrid.distributed.rpc.transport import peer_channel
from tensorgrid.distributed.rpc.transport import tls
from tensorgrid.distributed.rpc.transport import wire
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

def _as_op_error(e: grpc.RpcError, what: str, channel: peer_channel.PeerChannel) -> errors.OpError:
    code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
    details = e.details() if hasattr(e, "details") else str(e)
    if code == grpc.StatusCode.UNAVAILABLE:
        # gRPC tells only "failed to connect"; a refused handshake (another CA) is worth naming,
        # looked for until the peer first answers (later, a peer that vanished is not delayed).
        problem = "" if channel.answered else tls.handshake_problem(channel.address, channel.credentials)
        return errors.UnavailableError(None, None, f"{what}: {problem or details}")
    return errors.error_for_code(code.value[0], details or f"{what} failed with {code.name}")


def _call(what: str, channel: peer_channel.PeerChannel, fn: Callable[[grpc_frames.Stub], T]) -> T:
    """``fn`` with a stub of ``channel`` (for the credentials current now), its errors as OpError."""
    try:
        with channel.stub() as stub:
            return fn(stub)
    except grpc.RpcError as e:
        raise _as_op_error(e, what, channel) from None
    except wire.TransportError as e:
        raise errors.DataLossError(None, None, f"{what}: {e}") from None


def call(what: str, channel: peer_channel.PeerChannel, fn: Callable[[grpc_frames.Stub], T]) -> T:
    """``_call`` for the clients of other modules (``shard_calls``): their errors become OpErrors as these do."""
    return _call(what, channel, fn)


STATUS_TIMEOUT_SECONDS = 10.0


def _status(what: str, channel: peer_channel.PeerChannel, wait_for_ready: bool = False) -> worker_pb2.GetStatusResponse:
    """GetStatus, bounded by our own deadline: a peer that does not answer in time is
    unavailable (a pod being replaced, a stale address), not a failed step, so callers
    retry it as any other unavailable peer instead of ending the program.
    ``wait_for_ready`` waits (within the deadline) for a channel that failed to
    connect again, instead of failing at once while it backs off."""
    try:
        with channel.stub() as stub:
            response: worker_pb2.GetStatusResponse = stub.GetStatus(worker_pb2.GetStatusRequest(),
                                                                     timeout=STATUS_TIMEOUT_SECONDS,
                                                                     wait_for_ready=wait_for_ready)
        return response
    except grpc.RpcError as e:
        if hasattr(e, "code") and e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            # Silent on this connection: the next call dials again, reaching whatever the
            # address leads to now (a replacement of a frozen peer; peer_channel.reconnect).
            channel.reconnect()
            raise errors.UnavailableError(None, None, f"{what}: no answer within {STATUS_TIMEOUT_SECONDS:g} s") \
                from None
        raise _as_op_error(e, what, channel) from None


# ---------------------------------------------------------------------- state shared by a process's clients

_client_transports: dict[Optional[tls.LiveCredentials], transport.Transport] = {}
_shared_lock = threading.Lock()
_warned_peers: set[tuple[str, int]] = set()
"""Peers (address, incarnation) whose unreachable data channel was logged: a peer that
restarts, or another server later given the same address, is logged again."""


def _shared_transport(credentials: Optional[tls.LiveCredentials]) -> transport.Transport:
    """Receiving side only (buffer pool and data-channel client), one per set of credentials;
    no data server needed."""
    with _shared_lock:
        shared = _client_transports.get(credentials)
        if shared is None:
            shared = _client_transports[credentials] = transport.Transport(
                transport.TransportConfig(data_channel=False), credentials)
        return shared


def _warn_once(peer: tuple[str, int], message: str) -> None:
    with _shared_lock:
        if peer in _warned_peers:
            return
        _warned_peers.add(peer)
    log.warning("%s", message)


def _inline_bytes(tensors: Sequence[tuple[str, Any]]) -> int:
    # nbytes of arrays (on a device too: never converted here); Python values through numpy.
    return sum(int(value.nbytes if hasattr(value, "nbytes") else np.asarray(value).nbytes) for _, value in tensors)


# ---------------------------------------------------------------------- clients

class _Client:
    def __init__(self, address: str, service: Any, peer: str) -> None:
        self.address = address
        self.host = grpc_frames.host_of(address)
        self._peer = peer
        user_authority.ensure_for([address])  # a client of a hand-started task on this machine: the user's CA
        credentials = tls.from_env()
        self._channel = peer_channel.PeerChannel(address, credentials, grpc_frames.grpc_options(
            grpc_frames.channel_options(limits.ServerLimits.from_env().grpc_max_message_bytes)), service)
        self._tx = _shared_transport(credentials)
        self._data_port = 0
        self._incarnation = 0
        """The peer's incarnation in its last GetStatus answer (0: none yet)."""
        self._reachable: Optional[bool] = None
        """Whether the peer's data channel answers; None: not probed since its port was learned."""
        self._unreachable_reason = ""
        self._large_replies: set[Hashable] = set()
        """Calls whose last reply on gRPC carried at least ``stream_min_bytes`` inline."""
        self._fallbacks = monitoring.DATA_CHANNEL_FALLBACKS.labels(address)

    def _learn_data_port(self, wait_for_ready: bool = False) -> None:
        """Asks the peer for its data channel port, when no earlier answer told it."""

    def _reaches_data_channel(self) -> bool:
        if self._reachable is None:
            if not self._data_port:
                self._learn_data_port()
            if self._data_port or not self._unreachable_reason:
                self._unreachable_reason = self._tx.data_client.why_unreachable(self.host, self._data_port)
            self._reachable = not self._unreachable_reason
        return self._reachable

    def _fall_back(self) -> None:
        """Counts a call sent over gRPC because the peer's data channel is unreachable;
        the first one for a peer (an address and incarnation) is logged."""
        self._fallbacks.inc()
        _warn_once((self.address, self._incarnation),
                   f"the data channel of {self._peer} cannot be reached ({self._unreachable_reason}): its calls "
                   f"go over gRPC instead, several times slower for large tensors (docs/data-channel.md)")

    def _exchange(self, call: step_calls.StepCall, what: str, request: message_lib.Message,
                  tensors: Sequence[tuple[str, Any]], reply_key: Hashable = None,
                  timeout: Optional[float] = None) -> dict[str, Any]:
        """One call of a step, on the data channel or gRPC (module docstring); returns
        the reply's tensors by name. ``reply_key`` names the reply's signature (a reply
        of the same key had the same sizes before), for choosing the streaming twin."""
        reachable = self._reaches_data_channel()
        if reachable and not timeout:  # a deadline stays on gRPC, which enforces it on both sides
            return self._call_data_channel(what, call, request, tensors)
        if not reachable:
            self._fall_back()
        options: Any = getattr(request, "options", None)  # RunOptions of RunStep and RunGraph
        if options is not None:
            options.allow_data_channel = reachable
            if timeout:
                options.timeout_in_ms = int(timeout * 1000)
        inline_reply_key = None if reachable else reply_key
        return _call(what, self._channel,
                     lambda stub: self._call_grpc(stub, call, request, tensors, inline_reply_key, timeout))

    def _call_data_channel(self, what: str, call: step_calls.StepCall, request: message_lib.Message,
                           tensors: Sequence[tuple[str, Any]]) -> dict[str, Any]:
        """Calls ``call`` on the peer's data channel; its error status becomes the same
        OpError as from gRPC. When the peer's data channel cannot be reached and the
        peer now advertises another port (it restarted), the call goes there at once."""
        port = self._data_port
        return self._again_if_restarted(what, call, request, tensors, port,
                                        lambda: self._call_data_channel_once(what, call, request, tensors))

    def _again_if_restarted(self, what: str, call: step_calls.StepCall, request: message_lib.Message,
                            tensors: Sequence[tuple[str, Any]], port: int,
                            first_attempt: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``first_attempt``'s reply (a call made to the data channel on ``port``); when
        that failed as UNAVAILABLE and the peer restarted meanwhile, the call made once
        more, to its new port."""
        try:
            return first_attempt()
        except errors.UnavailableError:
            if not self._restarted_since(port):
                raise
        log.info("%s restarted (its data channel is on port %d, was %d): calling it again", self._peer,
                 self._data_port, port)
        return self._call_data_channel_once(what, call, request, tensors)

    def _restarted_since(self, port: int) -> bool:
        """Whether the peer, asked again, is another process than the one called (a new
        incarnation, or its data channel on a port other than ``port``) whose data
        channel is reachable."""
        incarnation = self._incarnation
        try:
            self._learn_data_port(wait_for_ready=True)  # a restarted peer is up again: its call waits on
        except errors.OpError:
            return False
        moved = self._data_port not in (0, port) or self._incarnation not in (0, incarnation)
        return moved and self._reaches_data_channel()

    def _call_data_channel_once(self, what: str, call: step_calls.StepCall, request: message_lib.Message,
                                tensors: Sequence[tuple[str, Any]]) -> dict[str, Any]:
        replaced = self._replaced_check()
        return self._reply_of(what, lambda: self._tx.call(self.host, self._data_port, call.method,
                                                          request.SerializeToString(), tensors, replaced))

    def _replaced_check(self) -> Optional[call_watch.ReplacedCheck]:
        """For a call made now: whether the peer it reaches was replaced meanwhile (asked
        by the call's wait when a probe of the peer's address was answered), or None
        where this client does not know the peer's incarnation."""
        return None

    def _reply_of(self, what: str, reply_of_call: Callable[[], tuple[int, bytes, list[wire.ReceivedTensor]]]
                  ) -> dict[str, Any]:
        """The tensors of a data channel call's reply; its error status or a failed
        connection as the OpError gRPC would give."""
        try:
            code, reply, received = reply_of_call()
        except wire.TransportError as e:
            if e.code == errors.UnavailableError.code:
                # The peer may have restarted on another port: learn it again.
                self._reachable, self._data_port = None, 0
                self._unreachable_reason = f"a call on its data channel failed: {e}"
                raise errors.UnavailableError(None, None, f"{what}: {e}") from None
            raise errors.DataLossError(None, None, f"{what}: {e}") from None
        if code:
            message = reply.decode(errors="replace")
            if code == errors.UnavailableError.code:
                raise errors.UnavailableError(None, None, f"{what}: {message}")
            raise errors.error_for_code(code, message or f"{what} failed with status {code}")
        return {item.name: item.array for item in received}

    def _call_grpc(self, stub: grpc_frames.Stub, call: step_calls.StepCall, request: message_lib.Message,
                   tensors: Sequence[tuple[str, Any]], inline_reply_key: Hashable,
                   timeout: Optional[float]) -> dict[str, Any]:
        """Calls ``call`` on gRPC: its streaming twin when the request, or the last reply
        of ``inline_reply_key`` (None: replies are not inline), is large."""
        writer = self._tx.write_frames(call.frame_type(request=request), tensors)
        threshold = self._tx.config.stream_min_bytes
        if inline_reply_key in self._large_replies or _inline_bytes(tensors) >= threshold:
            reply = getattr(stub, call.stream_name)(iter(writer), timeout=timeout)
        else:
            reply = getattr(stub, call.name)(writer.bundle(), timeout=timeout)
        if not call.replies_with_frames:
            return {}
        _, fetched = self._tx.read_message(reply, call.frame_type, peer_host=self.host)
        if inline_reply_key is not None:
            self._note_reply_size(inline_reply_key, _inline_bytes(list(fetched.items())))
        return fetched

    def _note_reply_size(self, key: Hashable, inline_bytes: int) -> None:
        if inline_bytes < self._tx.config.stream_min_bytes:
            self._large_replies.discard(key)
        elif len(self._large_replies) < 4096:  # bounded: a key per step signature
            self._large_replies.add(key)

    def close(self) -> None:
        self._channel.close()


class WorkerClient(_Client):
    """Calls the Worker service of ``task`` at ``address``; the master and peers use it
    alike. It implements ``worker_interface.WorkerInterface``."""

    def __init__(self, address: str, task: str) -> None:
        super().__init__(address, WORKER_SERVICE, f"{task} at {address}")
        self.task = task
        self._signatures: dict[str, tuple[list[str], list[str]]] = {}

    def _learn_data_port(self, wait_for_ready: bool = False) -> None:
        self.incarnation_quick(wait_for_ready)

    def incarnation_quick(self, wait_for_ready: bool = False) -> int:
        response = _status(f"GetStatus of {self.task} at {self.address}", self._channel, wait_for_ready)
        if not response.device:
            raise errors.InternalError(None, None, f"{self.task} reported no devices")
        incarnation = int(response.device[0].incarnation)
        if self._incarnation not in (0, incarnation):
            # Another process answers at the address: pooled connections lead to the one it
            # replaced, which may be frozen with them open (call_watch).
            for port in {self._data_port, response.data_port} - {0}:
                self._tx.data_client.forget(self.host, port)
        if response.data_port != self._data_port:
            self._data_port = response.data_port
            self._reachable = None
        self._incarnation = incarnation
        return self._incarnation

    def _replaced_check(self) -> Optional[call_watch.ReplacedCheck]:
        called = self._incarnation
        if not called:
            return None

        def replaced() -> str:
            try:
                response = _status(f"GetStatus of {self.task} at {self.address}", self._channel)
            except errors.OpError:
                return ""  # no answer on gRPC either: the probe said something answers; wait on
            now = int(response.device[0].incarnation) if response.device else called
            return "" if now == called else (f"{self.task} at {self.address} is now another process "
                                             f"(incarnation {now:016x}, not {called:016x})")
        return replaced

    def devices(self) -> list[tuple[str, str]]:
        response = _status(f"GetStatus of {self.task}", self._channel)
        return [(d.name, d.device_type) for d in response.device]

    def register_graph(self, session_handle: str, graph_def: graph_def_lib.GraphDef, feeds: Sequence[str],
                       fetches: Sequence[str], targets: Sequence[str], isolate_session_state: bool = False,
                       *, peer_addresses: Optional[Mapping[str, str]] = None, registering_task: str = "",
                       registering_incarnation: int = 0) -> str:
        request = worker_pb2.RegisterGraphRequest(session_handle=session_handle, graph_def=graph_codec.to_proto(graph_def),
                                                  feed=list(feeds), fetch=list(fetches), target=list(targets),
                                                  peer_addresses=dict(peer_addresses or {}),
                                                  registering_task=registering_task,
                                                  registering_incarnation=registering_incarnation,
                                                  config=config_pb2.SessionConfig(
                                                      isolate_session_state=isolate_session_state))
        response = _call(f"RegisterGraph on {self.task}", self._channel, lambda stub: stub.RegisterGraph(request))
        self._signatures[response.graph_handle] = (list(feeds), list(fetches))
        return str(response.graph_handle)

    def deregister_graph(self, handle: str) -> None:
        self._signatures.pop(handle, None)
        _call(f"DeregisterGraph on {self.task}", self._channel, lambda stub: stub.DeregisterGraph(
            worker_pb2.DeregisterGraphRequest(graph_handle=handle), timeout=10.0))

    def run_graph(self, handle: str, step_id: int, feed_values: Sequence[Any]) -> list[Any]:
        feed_names, fetch_names = self._signatures[handle]
        request = worker_pb2.RunGraphRequest(graph_handle=handle, step_id=step_id, send=feed_names,
                                             recv_key=fetch_names)
        fetched = self._exchange(step_calls.RUN_GRAPH, f"RunGraph on {self.task}", request,
                                 list(zip(feed_names, feed_values)), reply_key=handle)
        return [fetched[name] for name in fetch_names]

    def recv_tensor(self, step_id: int, key: str) -> Any:
        """Pulls one tensor (off the step's hot path, which pushes): its payload comes
        over the data channel when it is reachable, else inline, streamed when the last
        pull of ``key`` was large."""
        request = worker_pb2.RecvTensorRequest(step_id=step_id, rendezvous_key=[key])
        reachable = self._reaches_data_channel()
        request.options.allow_data_channel = reachable
        if not reachable:
            self._fall_back()
        stream = not reachable and key in self._large_replies

        def run(stub: grpc_frames.Stub) -> Any:
            reply = (stub.RecvTensorStream if stream else stub.RecvTensor)(request)
            received = [item for item in self._tx.read_frames(reply, peer_host=self.host)
                        if isinstance(item, wire.ReceivedTensor)]
            if len(received) != 1:
                raise errors.InternalError(None, None, f"RecvTensor of {key} returned {len(received)} tensors")
            if not reachable:
                self._note_reply_size(key, received[0].array.nbytes)
            monitoring.TENSORS_RECEIVED.inc()
            return received[0].array

        return _call(f"RecvTensor from {self.task}", self._channel, run)

    def push_tensors(self, step_id: int, from_task: str, items: Sequence[tuple[str, Any]]) -> None:
        """Delivers a step's tensors to the peer's rendezvous."""
        request = worker_pb2.PushTensorsRequest(step_id=step_id, from_task=from_task)
        monitoring.TENSORS_SENT.inc(len(items))
        self._exchange(step_calls.PUSH_TENSORS, f"PushTensors to {self.task}", request, items)

    def start_push(self, step_id: int, from_task: str,
                   items: Sequence[tuple[str, Any]]) -> Optional[Callable[[], None]]:
        """``push_tensors`` sent on the peer's data channel without waiting for its answer:
        returns the function that waits for it (and raises what ``push_tensors`` would).
        None when the data channel is not reachable (then ``push_tensors`` it is). When
        the wait finds the connection failed, the push is made again as ``push_tensors``
        makes it (to the peer's new port if it restarted)."""
        if not self._reaches_data_channel():
            return None
        request = worker_pb2.PushTensorsRequest(step_id=step_id, from_task=from_task)
        monitoring.TENSORS_SENT.inc(len(items))
        what, port = f"PushTensors to {self.task}", self._data_port
        pending = self._tx.start_call(self.host, port, step_calls.PUSH_TENSORS.method,
                                      request.SerializeToString(), items, self._replaced_check())

        def finish() -> None:
            self._again_if_restarted(what, step_calls.PUSH_TENSORS, request, items, port,
                                     lambda: self._reply_of(what, pending.finish))
        return finish

    def abort_step(self, step_id: int, reason: str) -> None:
        _call(f"CleanupGraph on {self.task}", self._channel, lambda stub: stub.CleanupGraph(
            worker_pb2.CleanupGraphRequest(step_id=step_id, abort_reason=reason), timeout=10.0))

    def cleanup_all(self, containers: Optional[list[str]] = None) -> None:
        _call(f"CleanupAll on {self.task}", self._channel, lambda stub: stub.CleanupAll(
            worker_pb2.CleanupAllRequest(container=list(containers or [])), timeout=30.0))

    def task_finished(self, task: str, is_chief: bool, timeout: float = 5.0) -> None:
        _call(f"Shutdown on {self.task}", self._channel, lambda stub: stub.Shutdown(
            worker_pb2.ShutdownRequest(reason=f"{task} finished", finished_task=task, finished_task_is_chief=is_chief),
            timeout=timeout))

    def shutdown(self, reason: str, timeout: float = 5.0) -> None:
        _call(f"Shutdown on {self.task}", self._channel, lambda stub: stub.Shutdown(
            worker_pb2.ShutdownRequest(reason=reason), timeout=timeout))

    def close(self) -> None:
        """Closes its gRPC channel (ending the calls on it) and its idle pooled data-channel
        connections; a data-channel call in flight ends at its next reply probe."""
        super().close()
        if self._data_port:
            self._tx.data_client.forget(self.host, self._data_port)


class MasterClient(_Client):
    """Calls the Master service at ``address`` for a client session."""

    def __init__(self, address: str) -> None:
        super().__init__(address, MASTER_SERVICE, f"the master at {address}")

    def create_session(self, graph_def: graph_def_lib.GraphDef, options: master_lib.SessionOptions) -> str:
        config = config_pb2.SessionConfig(device_filters=options.device_filters,
                                          operation_timeout_in_ms=options.operation_timeout_in_ms,
                                          isolate_session_state=options.isolate_session_state)
        request = master_pb2.CreateSessionRequest(graph_def=graph_codec.to_proto(graph_def), config=config,
                                                  target=f"grpc://{self.address}")
        # A master not up yet is waited for: 600 s, or the session's operation timeout
        # (then DeadlineExceededError, as TensorFlow raises for a session to a dead server).
        bound = options.operation_timeout_in_ms / 1000.0
        response = master_lib.wait_for_task(
            f"the master at {self.address}",
            lambda: _call(f"CreateSession at {self.address}", self._channel, lambda stub: stub.CreateSession(request)),
            timeout=bound or 600.0, give_up=errors.DeadlineExceededError if bound else errors.UnavailableError)
        self._data_port, self._reachable = response.data_port, None
        return str(response.session_handle)

    def extend_session(self, handle: str, graph_def: graph_def_lib.GraphDef) -> int:
        request = master_pb2.ExtendSessionRequest(session_handle=handle, graph_def=graph_codec.to_proto(graph_def))
        response = _call(f"ExtendSession at {self.address}", self._channel, lambda stub: stub.ExtendSession(request))
        return int(response.new_graph_version)

    def run_step(self, handle: str, feeds: dict[str, Any], fetches: Sequence[str], targets: Sequence[str],
                 timeout: Optional[float] = None) -> list[Any]:
        request = master_pb2.RunStepRequest(session_handle=handle, feed=list(feeds), fetch=list(fetches),
                                            target=list(targets))
        fetched = self._exchange(step_calls.RUN_STEP, f"RunStep at {self.address}", request, list(feeds.items()),
                                 reply_key=(handle, tuple(fetches)), timeout=timeout)
        return [fetched[name] for name in fetches]

    def close_session(self, handle: str) -> None:
        _call(f"CloseSession at {self.address}", self._channel, lambda stub: stub.CloseSession(
            master_pb2.CloseSessionRequest(session_handle=handle), timeout=10.0))

    def list_devices(self) -> list[tuple[str, str, int]]:
        response = _call(f"ListDevices at {self.address}", self._channel, lambda stub: stub.ListDevices(
            master_pb2.ListDevicesRequest(), timeout=60.0))
        return [(d.name, d.device_type, int(d.incarnation)) for d in [*response.local_device, *response.remote_device]]

    def reset(self, containers: Optional[list[str]], timeout_s: float = 60.0) -> None:
        _call(f"Reset at {self.address}", self._channel, lambda stub: stub.Reset(
            master_pb2.ResetRequest(container=list(containers or [])), timeout=timeout_s))
