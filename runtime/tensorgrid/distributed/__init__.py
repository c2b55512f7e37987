"""The distributed layer: clusters, partitioning, the Master and Worker services, and
the wire between tasks.

It is the only layer that imports ``grpc``. The wire format is
``protos/tensorgrid/v1`` (generated code in ``tensorgrid.v1``); ``graph_codec`` maps
graphs to it and the ``transport`` package moves tensors as a header plus raw chunks
(or over a raw TCP data channel when the peer can reach it), with no message-size
limit. A task: ``server`` (``tf.train.Server``) hosts a ``master`` and a ``worker``;
``services`` serves them on gRPC and the data channel, ``clients`` calls them
(``step_calls``: the calls of every step, on both protocols); ``worker_interface``
is what a local worker and a remote client both are; ``ports`` says where a task
listens. Nothing is re-exported here: the public names live in ``tensorgrid`` itself.
"""
