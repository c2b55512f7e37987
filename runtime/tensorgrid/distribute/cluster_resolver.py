"""``tf.distribute.cluster_resolver.TFConfigClusterResolver``: the cluster from ``TF_CONFIG``."""

from __future__ import annotations

from typing import Any, Optional

from tensorgrid.distributed import cluster as cluster_lib


class TFConfigClusterResolver:
    """Reads ``TF_CONFIG`` each time it is asked, as TensorFlow's resolver does."""

    def __init__(self, task_type: Optional[str] = None, task_id: Optional[int] = None,
                 rpc_layer: Optional[str] = None, environment: Optional[str] = None) -> None:
        self._task_type = task_type
        self._task_id = task_id
        self._rpc_layer = rpc_layer
        self._environment = environment

    def _config(self) -> cluster_lib.TFConfig:
        return cluster_lib.TFConfig.from_env()

    def cluster_spec(self) -> cluster_lib.ClusterSpec:
        return self._config().cluster

    @property
    def task_type(self) -> Optional[str]:
        return self._task_type if self._task_type is not None else self._config().task_type

    @task_type.setter
    def task_type(self, value: Optional[str]) -> None:
        self._task_type = value

    @property
    def task_id(self) -> Optional[int]:
        return self._task_id if self._task_id is not None else self._config().task_index

    @task_id.setter
    def task_id(self, value: Optional[int]) -> None:
        self._task_id = value

    @property
    def rpc_layer(self) -> Optional[str]:
        """The one given, else TF_CONFIG's ``rpc_layer``, else None (as TensorFlow's)."""
        return self._rpc_layer if self._rpc_layer is not None else self._config().rpc_layer

    @rpc_layer.setter
    def rpc_layer(self, value: Optional[str]) -> None:
        self._rpc_layer = value

    @property
    def environment(self) -> str:
        return self._environment if self._environment is not None else self._config().environment

    def master(self, task_type: Optional[str] = None, task_id: Optional[int] = None,
               rpc_layer: Optional[str] = None) -> str:
        """The address of the given task (default: this task) with the ``rpc_layer://`` prefix when
        there is an rpc layer (``tf.Session`` takes either); '' when there is no cluster, or when
        it is this one task (as TensorFlow's: an in-process session)."""
        task_type = task_type if task_type is not None else self.task_type
        task_id = task_id if task_id is not None else self.task_id
        cluster = self.cluster_spec()
        if task_type is None or task_id is None or not cluster or task_type not in cluster.jobs:
            return ""
        if len(cluster.all_tasks()) == 1:
            return ""
        layer = rpc_layer or self.rpc_layer
        address = cluster.task_address(task_type, task_id)
        return f"{layer}://{address}" if layer else address

    def num_accelerators(self, task_type: Optional[str] = None, task_id: Optional[int] = None,
                         config_proto: Any = None) -> dict[str, int]:
        from tensorgrid.kernels import cupy_backend

        count = cupy_backend.device_count()
        return {"GPU": count} if count else {}
