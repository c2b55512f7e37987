"""The API calls of serving Kubeflow's TFJob (``--serve-tfjob``): the TFJob CRD, the TFJobs, and the
TrainingJob that runs each.

Apart from ``kube`` because only an operator serving TFJob makes them: the chart grants their
permissions with ``kubeflowTFJob.enabled`` only (charts/tensorgrid-operator/templates/rbac.yaml),
and tests/charts/test_rbac.py derives the default chart's rules from ``kube`` alone.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Optional

import kubernetes
from kubernetes.client import exceptions as kube_exceptions

from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.api import tfjob_serving

Obj = dict[str, Any]


def _read_or_none(read: Callable[[], Any]) -> Optional[Obj]:
    """What ``read`` (a GET with ``_preload_content=False``) answered, as JSON; None for 404."""
    try:
        response = read()
    except kube_exceptions.ApiException as e:
        if e.status == 404:
            return None
        raise
    found: Obj = _json(response)
    return found


def _json(response: Any) -> Any:
    """The parsed body of a call made with ``_preload_content=False`` (an urllib3 response)."""
    return json.loads(response.data)


class TFJobCalls:
    """The calls on the client of a running operator (``kube.Kube``'s configuration)."""

    def __init__(self, configuration: kubernetes.client.Configuration) -> None:
        self._api = kubernetes.client.ApiClient(configuration)
        self._custom = kubernetes.client.CustomObjectsApi(self._api)
        self._extensions = kubernetes.client.ApiextensionsV1Api(self._api)

    def close(self) -> None:
        self._api.close()  # type: ignore[no-untyped-call]

    def get_crd(self) -> Optional[Obj]:
        """The cluster's tfjobs.kubeflow.org CRD (``None``: there is none)."""
        return _read_or_none(lambda: self._extensions.read_custom_resource_definition(
            tfjob_serving.CRD_NAME, _preload_content=False))

    def get_tfjob(self, namespace: str, name: str) -> Optional[Obj]:
        return self._get(tfjob_serving.GROUP, tfjob_serving.VERSION, tfjob_serving.PLURAL, namespace, name)

    def get_training_job(self, namespace: str, name: str) -> Optional[Obj]:
        return self._get(spec_lib.GROUP, spec_lib.VERSION, spec_lib.PLURAL, namespace, name)

    def _get(self, group: str, version: str, plural: str, namespace: str, name: str) -> Optional[Obj]:
        return _read_or_none(lambda: self._custom.get_namespaced_custom_object(
            group, version, namespace, plural, name, _preload_content=False))

    def create_training_job(self, job: Mapping[str, Any]) -> bool:
        """Whether it was created (``False``: one of that name exists)."""
        try:
            self._custom.create_namespaced_custom_object(spec_lib.GROUP, spec_lib.VERSION,
                                                         job["metadata"]["namespace"], spec_lib.PLURAL, dict(job),
                                                         _preload_content=False).release_conn()  # type: ignore[attr-defined]
        except kube_exceptions.ApiException as e:
            if e.status == 409:
                return False
            raise
        return True

    def patch_tfjob_status(self, tfjob: Mapping[str, Any], status: Mapping[str, Any]) -> Optional[Obj]:
        """One merge PATCH of the TFJob's status subresource, guarded by the resourceVersion read
        (``None``: the TFJob changed or is gone; read it again)."""
        meta = tfjob["metadata"]
        body = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": dict(status)}
        try:
            response = self._custom.patch_namespaced_custom_object_status(
                tfjob_serving.GROUP, tfjob_serving.VERSION, meta["namespace"], tfjob_serving.PLURAL, meta["name"],
                body, _preload_content=False)
        except kube_exceptions.ApiException as e:
            if e.status in (404, 409):
                return None
            raise
        patched: Obj = _json(response)
        return patched

    def delete_tfjob(self, tfjob: Mapping[str, Any]) -> None:
        """Delete the TFJob of that uid and, in the background, what it owns (its TrainingJob, then the pods)."""
        meta = tfjob["metadata"]
        body = kubernetes.client.V1DeleteOptions(
            propagation_policy="Background", preconditions=kubernetes.client.V1Preconditions(uid=meta["uid"]))
        try:
            self._custom.delete_namespaced_custom_object(tfjob_serving.GROUP, tfjob_serving.VERSION,
                                                         meta["namespace"], tfjob_serving.PLURAL, meta["name"],
                                                         body=body)
        except kube_exceptions.ApiException as e:
            if e.status not in (404, 409):
                raise
