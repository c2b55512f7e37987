"""The distributed layer: clusters, partitioning, the Master and Worker services, and
the wire between tasks.

It is the only layer that imports ``grpc``. The wire format is
``protos/tensorgrid/v1`` (generated code in ``tensorgrid.v1``); ``graph_codec`` maps
graphs to it and ``transport`` moves tensors as a header plus raw chunks (or over a
raw TCP data channel when the peer can reach it), with no message-size limit.
Nothing is re-exported here: the public names live in ``tensorgrid`` itself.
"""
