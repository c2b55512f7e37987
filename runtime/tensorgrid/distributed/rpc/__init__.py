"""The gRPC bindings of the distributed layer, and the wire they travel on.

The protocol-free core (``cluster``, ``partition``, ``graph_codec``, ``master``,
``worker``, ``worker_interface``, ``limits``) sits one folder up and imports nothing
of this package but the tensor codec (``transport.wire``, which the graph codec uses),
as TensorFlow's ``distributed_runtime`` keeps its gRPC bindings in ``rpc/``: ``server`` (``tf.train.Server``) hosts a master and a worker; ``services``
serves them on gRPC and the data channel, ``clients`` calls them (``step_calls``: the
calls of every step, on both protocols); ``session_targets`` says where a session target
leads; ``ports`` where a task listens; ``sender_names`` which tasks a client may push
tensors for; ``certificates`` makes a CA for loopback clusters; the ``transport``
package moves tensors as a header plus raw chunks, on gRPC or a raw TCP data channel.
This package and the generated protos (``tensorgrid.v1``) are the only code that
imports ``grpc``.
"""
