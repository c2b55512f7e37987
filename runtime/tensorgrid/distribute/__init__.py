"""The ``tf.distribute`` namespace: only what TF1 parameter-server programs use (cluster resolvers)."""

from tensorgrid.distribute import cluster_resolver

__all__ = ["cluster_resolver"]
