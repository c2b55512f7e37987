"""The calls of every step, RunStep, RunGraph and PushTensors, and how each travels.

Each is written once (``services.py``) and served on two protocols: gRPC (a unary
method, bundles, and its streaming twin ``<name>Stream``, frames) and the data
channel (a call by number: the request message as control bytes, tensors raw). This
table is what both sides agree on; docs/data-channel.md shows it as a message table.
"""

from __future__ import annotations

import dataclasses

from google.protobuf import message as message_lib

from tensorgrid.distributed.rpc.transport import data_channel
from tensorgrid.v1 import master_pb2
from tensorgrid.v1 import worker_pb2


@dataclasses.dataclass(frozen=True)
class StepCall:
    """One call of a step's hot path."""

    name: str
    """The gRPC method (Master or Worker service); ``name + "Stream"`` is its streaming twin."""
    method: data_channel.Method
    """Its number on the data channel."""
    frame_type: type[message_lib.Message]
    """The frame message of its gRPC form: a ``request`` control frame, then tensors
    (and, where ``replies_with_frames``, a ``response`` control frame, then tensors back)."""
    request_type: type[message_lib.Message]
    response_type: type[message_lib.Message]
    replies_with_frames: bool
    """Whether the gRPC reply is frames, else the plain ``response_type`` message."""

    @property
    def stream_name(self) -> str:
        return self.name + "Stream"


RUN_STEP = StepCall("RunStep", data_channel.Method.RUN_STEP, master_pb2.RunStepFrame, master_pb2.RunStepRequest,
                    master_pb2.RunStepResponse, replies_with_frames=True)
RUN_GRAPH = StepCall("RunGraph", data_channel.Method.RUN_GRAPH, worker_pb2.RunGraphFrame,
                     worker_pb2.RunGraphRequest, worker_pb2.RunGraphResponse, replies_with_frames=True)
PUSH_TENSORS = StepCall("PushTensors", data_channel.Method.PUSH_TENSORS, worker_pb2.PushTensorsFrame,
                        worker_pb2.PushTensorsRequest, worker_pb2.PushTensorsResponse, replies_with_frames=False)
