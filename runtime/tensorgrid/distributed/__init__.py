"""The distributed layer: clusters, partitioning, the Master and Worker services, and
the wire between tasks.

This folder is the protocol-free core, as TensorFlow's ``distributed_runtime`` keeps
master.cc and worker.cc above its ``rpc/`` folder: ``cluster`` (ClusterSpec,
TF_CONFIG), ``partition`` (a step's graph split by task with Send/Recv pairs),
``graph_codec`` (graphs to and from ``protos/tensorgrid/v1``, whose generated code is
``tensorgrid.v1``), ``master`` and ``worker`` (the services' logic),
``worker_interface`` (what a local worker and a remote client both are) and
``limits`` (a task's resource bounds). None of it imports ``grpc``.

The ``rpc`` package binds them to the wire: ``rpc.server`` (``tf.train.Server``)
hosts a master and a worker, ``rpc.services`` serves them on gRPC and the data
channel, ``rpc.clients`` calls them, and ``rpc.transport`` moves tensors as a header
plus raw chunks with no message-size limit. It is the only code that imports
``grpc``; it imports the core, never the reverse (the graph codec aside, which
encodes tensor attributes with ``rpc.transport.wire``, the protocol-free tensor codec).
Nothing is re-exported here: the public names live in ``tensorgrid`` itself.
"""
