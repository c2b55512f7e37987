"""The Shards service (protos/tensorgrid/v1/shards.proto) on gRPC: its servicer and its client.

Every task's server serves it (``services.serve``) over its own ``shard_queue.ShardService``; the
data sets' workers call the one of task 0 (``host_task``), where the chief opens them. A bad
request (an unknown data set, another definition of it, a state that does not fit) is answered
INVALID_ARGUMENT naming what is wrong; the service keeps serving.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import grpc

from tensorgrid.distributed import cluster as cluster_lib
from tensorgrid.distributed import limits
from tensorgrid.distributed import shard_queue
from tensorgrid.distributed.rpc import clients
from tensorgrid.distributed.rpc import services
from tensorgrid.distributed.rpc import user_authority
from tensorgrid.distributed.rpc.transport import grpc_frames
from tensorgrid.distributed.rpc.transport import peer_channel
from tensorgrid.distributed.rpc.transport import tls
from tensorgrid.v1 import shards_pb2

SHARDS_SERVICE = shards_pb2.DESCRIPTOR.services_by_name["Shards"]
CALL_TIMEOUT_SECONDS = 10.0

_OUTCOMES = {"shard": shards_pb2.NextShardResponse.SHARD, "wait": shards_pb2.NextShardResponse.WAIT,
             "end": shards_pb2.NextShardResponse.END}
_OUTCOME_NAMES = {number: name for name, number in _OUTCOMES.items()}


def host_task(cluster: cluster_lib.ClusterSpec) -> tuple[str, int]:
    """The task whose server hands the shards out: the chief (``chief`` or ``master`` job), else worker 0."""
    chief = cluster_lib.chief_task(cluster)
    if chief is None:
        raise ValueError(f"dynamic shards are served by the chief, else worker 0; this cluster has neither: "
                         f"jobs {cluster.jobs}")
    return chief


def spec_to_proto(spec: shard_queue.ShardsSpec) -> shards_pb2.ShardsSpec:
    return shards_pb2.ShardsSpec(files=list(spec.files), num_records=spec.num_records, shard_size=spec.shard_size,
                                 num_epochs=spec.num_epochs, shuffle=spec.shuffle, seed=spec.seed,
                                 max_attempts=spec.max_attempts, lease_seconds=spec.lease_seconds)


def spec_from_proto(message: shards_pb2.ShardsSpec) -> shard_queue.ShardsSpec:
    return shard_queue.ShardsSpec(files=tuple(message.files), num_records=message.num_records,
                                  shard_size=message.shard_size, num_epochs=message.num_epochs,
                                  shuffle=message.shuffle, seed=message.seed, max_attempts=message.max_attempts,
                                  lease_seconds=message.lease_seconds)


class ShardsServicer:
    """Answers the Shards methods from a task's ``ShardService``."""

    def __init__(self, shards: shard_queue.ShardService) -> None:
        self._shards = shards

    def NextShard(self, request: shards_pb2.NextShardRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            spec = spec_from_proto(request.spec)
            assignment = self._shards.next_shard(request.dataset, spec, request.task, request.client,
                                                 request.finished_lease)
            response = shards_pb2.NextShardResponse(outcome=_OUTCOMES[assignment.outcome], lease=assignment.lease,
                                                    retry_after_seconds=assignment.retry_after_seconds,
                                                    reason=assignment.reason)
            if assignment.outcome == "shard":
                file, start, end = spec.shard(assignment.index)
                response.shard.CopyFrom(shards_pb2.Shard(epoch=assignment.epoch, index=assignment.index, file=file,
                                                         start=start, end=end))
            return response
        return services.answer(context, "NextShard", body)

    def RenewLeases(self, request: shards_pb2.RenewLeasesRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        return services.answer(context, "RenewLeases", lambda: shards_pb2.RenewLeasesResponse(
            lost_leases=self._shards.renew(request.dataset, request.client, list(request.leases), request.release)))

    def OpenShards(self, request: shards_pb2.OpenShardsRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            self._shards.open(request.dataset, spec_from_proto(request.spec), list(request.state))
            return shards_pb2.OpenShardsResponse()
        return services.answer(context, "OpenShards", body)

    def GetShardsState(self, request: shards_pb2.ShardsStateRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def body() -> Any:
            snapshot = self._shards.snapshot(request.dataset, request.known_version)
            return shards_pb2.ShardsStateResponse(
                state=snapshot.state, epoch=snapshot.epoch, fraction_done=snapshot.fraction_done,
                failed_shards=snapshot.failed_shards, waiting_clients=snapshot.waiting_clients,
                version=snapshot.version, unchanged=snapshot.unchanged)
        return services.answer(context, "GetShardsState", body)


def generic_handler(shards: shard_queue.ShardService) -> grpc.GenericRpcHandler:
    return grpc_frames.generic_handler(SHARDS_SERVICE, ShardsServicer(shards))


class ShardsClient:
    """Calls the Shards service of the task at ``address`` (a ``shard_queue.ShardsEndpoint``, answering as
    ``shard_queue.LocalShards`` does); failures are OpErrors (UnavailableError: retry)."""

    def __init__(self, address: str) -> None:
        self.address = address
        user_authority.ensure_for([address])
        self._channel = peer_channel.PeerChannel(address, tls.from_env(), grpc_frames.grpc_options(
            grpc_frames.channel_options(limits.ServerLimits.from_env().grpc_max_message_bytes)), SHARDS_SERVICE)

    def next_shard(self, dataset: str, spec: shard_queue.ShardsSpec, task: str, client: str,
                   finished_lease: int) -> shard_queue.Assignment:
        request = shards_pb2.NextShardRequest(dataset=dataset, spec=spec_to_proto(spec), task=task, client=client,
                                              finished_lease=finished_lease)
        response: shards_pb2.NextShardResponse = self._call(
            "NextShard", lambda stub: stub.NextShard(request, timeout=CALL_TIMEOUT_SECONDS))
        return shard_queue.Assignment(_OUTCOME_NAMES[response.outcome], epoch=response.shard.epoch,
                                      index=response.shard.index if response.HasField("shard") else -1,
                                      lease=response.lease, retry_after_seconds=response.retry_after_seconds,
                                      reason=response.reason)

    def renew(self, dataset: str, client: str, leases: Sequence[int], release: bool = False) -> list[int]:
        request = shards_pb2.RenewLeasesRequest(dataset=dataset, client=client, leases=list(leases), release=release)
        response = self._call("RenewLeases", lambda stub: stub.RenewLeases(request, timeout=CALL_TIMEOUT_SECONDS))
        return list(response.lost_leases)

    def open(self, dataset: str, spec: shard_queue.ShardsSpec, state: Optional[Sequence[int]]) -> None:
        request = shards_pb2.OpenShardsRequest(dataset=dataset, spec=spec_to_proto(spec), state=list(state or []))
        self._call("OpenShards", lambda stub: stub.OpenShards(request, timeout=CALL_TIMEOUT_SECONDS))

    def state(self, dataset: str, known_version: int = 0) -> shard_queue.ShardsSnapshot:
        """The state of ``dataset``, or only its version and progress when it is ``known_version``."""
        request = shards_pb2.ShardsStateRequest(dataset=dataset, known_version=known_version)
        response: shards_pb2.ShardsStateResponse = self._call(
            "GetShardsState", lambda stub: stub.GetShardsState(request, timeout=CALL_TIMEOUT_SECONDS))
        return shard_queue.ShardsSnapshot(
            state=list(response.state), epoch=response.epoch, fraction_done=response.fraction_done,
            failed_shards=list(response.failed_shards), waiting_clients=response.waiting_clients,
            version=response.version, unchanged=response.unchanged)

    def _call(self, method: str, fn: Any) -> Any:
        return clients.call(f"{method} at {self.address}", self._channel, fn)

    def close(self) -> None:
        self._channel.close()
