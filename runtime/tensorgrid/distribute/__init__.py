"""The ``tf.distribute`` namespace: only what TF1 parameter-server programs use (cluster resolvers, and
``Server``, the same class as ``tf.train.Server``)."""

from tensorgrid.distribute import cluster_resolver
from tensorgrid.distributed.rpc.server import Server

__all__ = ["Server", "cluster_resolver"]
