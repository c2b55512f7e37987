"""Kubernetes API calls the operator makes, with the outcomes that are not errors folded in.

Synchronous (the ``kubernetes`` client library is); the controller runs these on a thread
pool (``running_operator``). Creating something that already exists and deleting something already gone
are the normal results of a level-triggered reconciler racing with itself or a
restart, so they return quietly; everything else unexpected is counted in
``tensorgrid_operator_api_errors_total`` and raised (:func:`error_details` reads the
status code and the API server's message out of what was raised).
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any, Callable, Mapping, Optional

import kubernetes
from kubernetes.client import exceptions as kube_exceptions

from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator import metrics
from tensorgrid_operator.reconcile import indexed
from tensorgrid_operator.resources import cert_manager
from tensorgrid_operator.resources import ps_standby

Obj = dict[str, Any]
# Objects per page of a consistent LIST (``Kube.list_pods``): a job's pods are parsed a page at a time.
LIST_PAGE = 100


class ConflictError(Exception):
    """The job changed since it was read: reconcile again from a fresh read."""


def load_config(kubeconfig: Optional[str]) -> kubernetes.client.Configuration:
    """A client configuration from ``kubeconfig``, $KUBECONFIG/~/.kube/config, or the pod's service account."""
    configuration = kubernetes.client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if not path:
        try:
            kubernetes.config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            return configuration
        except kubernetes.config.ConfigException:
            path = os.path.expanduser("~/.kube/config")
    # The client library reads $KUBECONFIG once, at import: pass the path explicitly.
    kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=path, client_configuration=configuration)
    return configuration


def quantities_as_strings(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pod with its containers' resource quantities as strings (``nvidia.com/gpu: 1`` -> ``"1"``).

    The API server takes a number for a quantity, and a template kept whole by the CRD (Kubeflow's
    own TFJob examples ask for ``nvidia.com/gpu: 1``) stores one, but the client library refuses to
    send anything but a string there: every creation of such a pod failed before it left the operator.
    """
    spec = pod.get("spec") or {}
    if not any(isinstance(q, (int, float)) for key in ("containers", "initContainers") for c in spec.get(key) or []
               for amounts in (c.get("resources") or {}).values() if isinstance(amounts, Mapping)
               for q in amounts.values()):
        return pod
    copied: dict[str, Any] = json.loads(json.dumps(pod))
    for key in ("containers", "initContainers"):
        for container in copied["spec"].get(key) or []:
            for amounts in (container.get("resources") or {}).values():
                if isinstance(amounts, dict):
                    amounts.update({name: str(q) for name, q in amounts.items()
                                    if isinstance(q, (int, float)) and not isinstance(q, bool)})
    return copied


class Kube:
    """The calls a reconcile needs, on one shared connection pool."""

    def __init__(self, configuration: kubernetes.client.Configuration, pool_size: int) -> None:
        configuration.connection_pool_maxsize = pool_size
        self._api = kubernetes.client.ApiClient(configuration)
        self._core = kubernetes.client.CoreV1Api(self._api)
        self._custom = kubernetes.client.CustomObjectsApi(self._api)
        self._networking = kubernetes.client.NetworkingV1Api(self._api)
        self._policy = kubernetes.client.PolicyV1Api(self._api)
        self._apps = kubernetes.client.AppsV1Api(self._api)  # a job's TensorBoard Deployment only
        # Custom objects of a gang scheduler's group (podgroups.py), apart from the TrainingJobs': the
        # RBAC test derives their permissions from this attribute and the scheduler's API.
        self._pod_groups = kubernetes.client.CustomObjectsApi(self._api)
        # Custom objects of cert-manager (cert_manager.py), in its mode only: the RBAC test derives their
        # permissions from this attribute and cert_manager.PLURALS.
        self._cert_manager = kubernetes.client.CustomObjectsApi(self._api)

    def close(self) -> None:
        self._api.close()  # type: ignore[no-untyped-call]

    def get_job(self, namespace: str, name: str) -> Optional[Obj]:
        try:
            response = self._custom.get_namespaced_custom_object(
                spec_lib.GROUP, spec_lib.VERSION, namespace, spec_lib.PLURAL, name, _preload_content=False)
            job: Obj = _json(response)
            return job
        except kube_exceptions.ApiException as e:
            if e.status == 404:
                return None
            raise _counted("get_job", e)

    def list_pods(self, namespace: str, job_name: str) -> list[Obj]:
        """The job's pods, as the indexes keep them (``indexed.pod``)."""
        return self._list("list_pods", self._core.list_namespaced_pod, namespace, job_name, indexed.pod)

    def list_services(self, namespace: str, job_name: str) -> list[Obj]:
        """The job's Services, as the indexes keep them (``indexed.service``)."""
        return self._list("list_services", self._core.list_namespaced_service, namespace, job_name,
                          indexed.service)

    def list_standby_pods(self, namespace: str, job_name: str) -> list[Obj]:
        """The pods of the job's PS standbys (``resources.ps_standby``), as the indexes keep pods."""
        return self._list("list_pods", self._core.list_namespaced_pod, namespace, job_name, indexed.pod,
                          ps_standby.LABEL_STANDBY_OF)

    def _list(self, operation: str, fn: Any, namespace: str, job_name: str,
              project: Callable[[Obj], Obj], label: str = spec_lib.LABEL_JOB_NAME) -> list[Obj]:
        """A consistent read, in pages of ``LIST_PAGE``, each projected before the next is read.

        A list without resourceVersion is a consistent read: it sees every object this
        operator created before, so nothing is created twice; its later pages (``continue``)
        are read at the first one's resourceVersion, so the pages are one snapshot. Whole,
        the pods of a job of 2,000 replicas are 2,000 TF_CONFIGs of 80 KB: read at once,
        hundreds of MB as bytes, text and parsed objects together.
        """
        items: list[Obj] = []
        token: Optional[str] = None
        while True:
            try:
                result = _json(fn(namespace, label_selector=f"{label}={job_name}",
                                  limit=LIST_PAGE, _continue=token, _preload_content=False))
            except kube_exceptions.ApiException as e:
                raise _counted(operation, e)
            items.extend(project(item) for item in result["items"])
            token = (result.get("metadata") or {}).get("continue")
            if not token:
                return items

    def create_pod(self, pod: Mapping[str, Any]) -> None:
        self._create("create_pod", self._core.create_namespaced_pod, quantities_as_strings(pod))

    def create_service(self, service: Mapping[str, Any]) -> None:
        self._create("create_service", self._core.create_namespaced_service, service)

    def get_secret(self, namespace: str, name: str) -> Optional[Obj]:
        try:
            secret: Obj = _json(self._core.read_namespaced_secret(name, namespace, _preload_content=False))
            return secret
        except kube_exceptions.ApiException as e:
            if e.status == 404:
                return None
            raise _counted("get_secret", e)

    def create_secret(self, secret: Mapping[str, Any]) -> bool:
        """``False`` when a Secret of that name exists already (whose it is, the caller reads)."""
        return self._create("create_secret", self._core.create_namespaced_secret, secret)

    def create_network_policy(self, policy: Mapping[str, Any]) -> bool:
        return self._create("create_network_policy", self._networking.create_namespaced_network_policy, policy)

    def create_pod_disruption_budget(self, budget: Mapping[str, Any]) -> bool:
        return self._create("create_pod_disruption_budget", self._policy.create_namespaced_pod_disruption_budget, budget)

    def create_deployment(self, deployment: Mapping[str, Any]) -> bool:
        return self._create("create_deployment", self._apps.create_namespaced_deployment, deployment)

    def create_pod_group(self, group: str, version: str, plural: str, pod_group: Mapping[str, Any]) -> bool:
        """Creates a gang scheduler's PodGroup; ``False`` if it already existed. A 404 (the scheduler's
        CRD is not installed) is raised, for the caller to say so."""
        return self._create("create_pod_group", functools.partial(
            self._pod_groups.create_namespaced_custom_object, group, version), dict(pod_group), plural)

    def get_pod_group(self, group: str, version: str, plural: str, namespace: str, name: str) -> Optional[Obj]:
        """A gang scheduler's PodGroup; ``None`` when it (or its CRD) does not exist."""
        try:
            found: Obj = _json(self._pod_groups.get_namespaced_custom_object(
                group, version, namespace, plural, name, _preload_content=False))
            return found
        except kube_exceptions.ApiException as e:
            if e.status == 404:
                return None
            raise _counted("get_pod_group", e)

    def patch_pod_group(self, group: str, version: str, plural: str, namespace: str, name: str,
                        patch: Mapping[str, Any]) -> Optional[Obj]:
        """One merge PATCH of a gang scheduler's PodGroup; the group as patched, ``None`` when it is gone."""
        try:
            found: Obj = _json(self._pod_groups.patch_namespaced_custom_object(
                group, version, namespace, plural, name, dict(patch),
                _content_type="application/merge-patch+json", _preload_content=False))
            return found
        except kube_exceptions.ApiException as e:
            if e.status == 404:
                return None
            raise _counted("patch_pod_group", e)

    def create_cert_manager_object(self, obj: Mapping[str, Any]) -> bool:
        """Creates a cert-manager Issuer or Certificate; ``False`` if one of that name exists (whose it is,
        the caller reads). A 404 (cert-manager's CRDs are not installed) is raised, for the caller to say so."""
        return self._create("create_cert_manager_object", functools.partial(
            self._cert_manager.create_namespaced_custom_object, cert_manager.GROUP, cert_manager.VERSION),
            dict(obj), cert_manager.PLURALS[obj["kind"]])

    def get_cert_manager_object(self, kind: str, namespace: str, name: str) -> Optional[Obj]:
        try:
            found: Obj = _json(self._cert_manager.get_namespaced_custom_object(
                cert_manager.GROUP, cert_manager.VERSION, namespace, cert_manager.PLURALS[kind], name,
                _preload_content=False))
            return found
        except kube_exceptions.ApiException as e:
            if e.status == 404:
                return None
            raise _counted("get_cert_manager_object", e)

    def cert_manager_resources(self) -> Optional[set[str]]:
        """The resources the API server serves in cert-manager.io/v1 (discovery, which every client may read);
        ``None`` when it does not serve the group at all."""
        try:
            answer = _json(self._cert_manager.get_api_resources(cert_manager.GROUP, cert_manager.VERSION,
                                                                _preload_content=False))
        except kube_exceptions.ApiException as e:
            if e.status == 404:
                return None
            raise _counted("cert_manager_resources", e)
        return {str(r.get("name")) for r in answer.get("resources") or []}

    def _create(self, operation: str, fn: Any, obj: Mapping[str, Any], plural: Optional[str] = None) -> bool:
        """Whether the object was created (``False``: one of that name exists already). ``plural``:
        a custom object's, which ``fn`` takes after the namespace."""
        namespace = obj["metadata"]["namespace"]
        try:
            _discard(fn(namespace, plural, obj, _preload_content=False) if plural else
                     fn(namespace, obj, _preload_content=False))
        except kube_exceptions.ApiException as e:
            if e.status == 409:
                return False  # AlreadyExists: an earlier reconcile (or another replica) made it
            raise _counted(operation, e)
        return True

    def delete_pod(self, namespace: str, name: str, uid: str, force: bool = False) -> None:
        """Delete the pod of that uid; ``force``: with a grace period of 0 (no wait for its kubelet)."""
        body = kubernetes.client.V1DeleteOptions(preconditions=kubernetes.client.V1Preconditions(uid=uid),
                                                 grace_period_seconds=0 if force else None)
        try:
            _discard(self._core.delete_namespaced_pod(name, namespace, body=body, _preload_content=False))
        except kube_exceptions.ApiException as e:
            if e.status in (404, 409):
                return  # gone already, or a newer pod of that name (uid precondition)
            raise _counted("delete_pod", e)

    def patch_pod_metadata(self, namespace: str, name: str, uid: str, patch: Mapping[str, Any]) -> bool:
        """A merge patch of a pod's metadata, applied only to the pod of that uid: ``False`` when that pod
        is gone (or replaced by a newer one of its name)."""
        # The uid in the patch is a precondition: for a newer pod of that name the API server
        # answers 422 "metadata.uid: field is immutable" and changes nothing.
        body = {"metadata": {**patch.get("metadata", {}), "uid": uid}}
        try:
            _discard(self._core.patch_namespaced_pod(name, namespace, body, _preload_content=False))
        except kube_exceptions.ApiException as e:
            if e.status == 404 or (e.status == 422 and "metadata.uid" in str(e.body)):
                return False  # gone already, or a newer pod of that name
            raise _counted("patch_pod", e)
        return True

    def delete_service(self, namespace: str, name: str) -> None:
        try:
            _discard(self._core.delete_namespaced_service(name, namespace, _preload_content=False))
        except kube_exceptions.ApiException as e:
            if e.status == 404:
                return
            raise _counted("delete_service", e)

    def patch_status(self, job: Mapping[str, Any], status: Mapping[str, Any]) -> Obj:
        """One merge PATCH of the status subresource, guarded by the resourceVersion that was read."""
        meta = job["metadata"]
        body = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": dict(status)}
        try:
            result = self._custom.patch_namespaced_custom_object_status(
                spec_lib.GROUP, spec_lib.VERSION, meta["namespace"], spec_lib.PLURAL, meta["name"], body,
                _preload_content=False)
        except kube_exceptions.ApiException as e:
            if e.status in (404, 409):
                raise ConflictError(f"{meta['namespace']}/{meta['name']} changed: {e.reason}") from None
            raise _counted("patch_status", e)
        patched: Obj = _json(result)
        return patched

    def list_jobs(self, namespace: Optional[str]) -> list[Obj]:
        """The TrainingJobs of a namespace, or of every namespace (``None``)."""
        try:
            if namespace is None:
                result = self._custom.list_cluster_custom_object(spec_lib.GROUP, spec_lib.VERSION, spec_lib.PLURAL,
                                                                 _preload_content=False)
            else:
                result = self._custom.list_namespaced_custom_object(spec_lib.GROUP, spec_lib.VERSION, namespace,
                                                                    spec_lib.PLURAL, _preload_content=False)
        except kube_exceptions.ApiException as e:
            raise _counted("list_jobs", e)
        items: list[Obj] = _json(result)["items"]
        return items

    def remove_finalizer(self, job: Mapping[str, Any], finalizer: str) -> bool:
        """Remove one finalizer from a job, leaving the others; ``False`` if the job changed or is gone.

        A JSON patch that first tests the entry is still where it was read, so a concurrent
        change to the list is never overwritten.
        """
        meta = job["metadata"]
        index = list(meta.get("finalizers") or []).index(finalizer)
        patch = [{"op": "test", "path": f"/metadata/finalizers/{index}", "value": finalizer},
                 {"op": "remove", "path": f"/metadata/finalizers/{index}"}]
        try:
            _discard(self._custom.patch_namespaced_custom_object(
                spec_lib.GROUP, spec_lib.VERSION, meta["namespace"], spec_lib.PLURAL, meta["name"], patch,
                _content_type="application/json-patch+json", _preload_content=False))
        except kube_exceptions.ApiException as e:
            if e.status in (404, 409, 422):
                return False  # gone, or the list changed (the test failed): read again
            raise _counted("remove_finalizer", e)
        return True

    def delete_job(self, job: Mapping[str, Any]) -> None:
        meta = job["metadata"]
        body = kubernetes.client.V1DeleteOptions(
            propagation_policy="Background", preconditions=kubernetes.client.V1Preconditions(uid=meta["uid"]))
        try:
            self._custom.delete_namespaced_custom_object(
                spec_lib.GROUP, spec_lib.VERSION, meta["namespace"], spec_lib.PLURAL, meta["name"], body=body)
        except kube_exceptions.ApiException as e:
            if e.status in (404, 409):
                return
            raise _counted("delete_job", e)


PEERING_GROUP, PEERING_VERSION = "kopf.dev", "v1"


def missing_peering_objects(configuration: kubernetes.client.Configuration, name: str,
                            namespaces: tuple[str, ...]) -> list[str]:
    """Which of the kopf peering objects named ``name`` do not exist (an absent CRD: all of them),
    named as ``kubectl get`` would."""
    return [label for label, found in peering_objects(configuration, name, namespaces).items() if found is None]


def peering_objects(configuration: kubernetes.client.Configuration, name: str,
                    namespaces: tuple[str, ...]) -> dict[str, Optional[Obj]]:
    """The kopf peering objects named ``name``, by their ``kubectl get`` name (``None``: it does not exist).

    One ClusterKopfPeering when the operator watches every namespace, else one KopfPeering
    in each watched namespace. A LIST by name, not a GET: kopf's peering already needs
    ``list`` on them, so no extra RBAC.
    """
    api = kubernetes.client.ApiClient(configuration)
    custom = kubernetes.client.CustomObjectsApi(api)
    by_name = f"metadata.name={name}"
    objects: dict[str, Optional[Obj]] = {}
    try:
        for namespace in namespaces or ("",):
            label = f"kopfpeering/{name} -n {namespace}" if namespace else f"clusterkopfpeering/{name}"
            try:
                if namespace:
                    found = custom.list_namespaced_custom_object(PEERING_GROUP, PEERING_VERSION, namespace,
                                                                 "kopfpeerings", field_selector=by_name,
                                                                 _preload_content=False)
                else:
                    found = custom.list_cluster_custom_object(PEERING_GROUP, PEERING_VERSION, "clusterkopfpeerings",
                                                              field_selector=by_name, _preload_content=False)
                items = _json(found)["items"]
            except kube_exceptions.ApiException as e:
                if e.status != 404:
                    raise _counted("list_peerings", e)
                items = []  # no such CRD
            objects[label] = dict(items[0]) if items else None
    finally:
        api.close()  # type: ignore[no-untyped-call]
    return objects


def _json(response: Any) -> Any:
    return json.loads(response.data)


def _discard(response: Any) -> None:
    """Read an unparsed answer to its end and hand its connection back to the pool.

    With ``_preload_content=False`` (which spares parsing the answer into model objects) an
    answer nobody reads keeps its connection: the pool opens a new one, with a new TLS
    handshake on both sides, for the next call. At 5,000 creations that handshake was half
    the operator's API-thread time and a share of the API server's CPU.
    """
    response.drain_conn()
    response.release_conn()


def error_details(e: Exception) -> tuple[Optional[int], str]:
    """The HTTP status and the API server's message of a failed call; no status when no answer came."""
    if not isinstance(e, kube_exceptions.ApiException):
        return None, f"{type(e).__name__}: {e}"
    try:
        return e.status, str(json.loads(e.body or "").get("message") or e.reason)
    except (TypeError, ValueError, AttributeError):
        return e.status, str(e.reason)


def _counted(operation: str, e: kube_exceptions.ApiException) -> kube_exceptions.ApiException:
    metrics.API_ERRORS.labels(operation=operation).inc()
    return e
