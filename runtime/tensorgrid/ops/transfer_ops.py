"""Op types that move tensors between tasks: ``_Send`` and ``_Recv``.

Programs never build these: the master inserts a pair on every edge that crosses
tasks when it partitions a graph. Both carry the rendezvous key that names the
edge (source device and incarnation, destination device, tensor).
"""

from __future__ import annotations

from tensorgrid.framework import op_registry

SEND = "_Send"
RECV = "_Recv"

op_registry.register_op(SEND, stateful=True)
op_registry.register_op(RECV, stateful=True)
op_registry.NotDifferentiable(SEND)
op_registry.NotDifferentiable(RECV)
