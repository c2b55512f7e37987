"""A PS's standby (``spec.replicaSpecs.PS.replication.standby``): its Deployment, Service and NetworkPolicy.

Why it exists: a job with one parameter server has no other PS to hold its live replica, so a
standby task does (``tensorgrid ps-standby``, serving only the runtime's Replication service). It
must outlive the PS it stands by for, so it is a pod of its own: a Deployment of one pod (the
kubelet and the Deployment bring it back; a standby made again gets the whole state from the PS at
its next push), behind the headless Service ``<job>-ps-<index>-standby`` whose DNS name the PS
dials (``api.ps_replication.standby_address``). It prefers a node other than its PS's: a node lost
with both loses the replica (docs/fault-tolerance.md).

The pod runs the PS template's main container image with its resources (it holds a copy of the
PS's state, so it needs about the PS's memory), env, node selector and tolerations; it drops the
PS's volumes, probes and other containers, which are the program's. It mounts its own certificate
(``<job>-ps-<index>-standby-tls``, signed by the job's CA, ``cluster.ensure_objects``).

The objects carry ``tensorgrid.io/ps-standby-of: <job>``, not the job-name label of replicas (the
reconcile counts every pod and Service with that label as a replica). Owned by the job; pure
functions of it.

A standby takes over its PS when the PS's pod is lost (``reconcile.ps_takeover`` decides): it has
what the PS pod would have to become ``ps:<index>`` (the job's ``TF_CONFIG``, the PS's data and
metrics ports and replication variables, a certificate naming the PS's Service too), and the
annotation ``tensorgrid.io/take-over`` reaches it as a file (a downward API volume, written by the
kubelet) that ``tensorgrid ps-standby --take-over-file`` watches. :func:`takeover_patch` is the one
metadata patch that makes a standby pod the PS's: the replica's labels (so the PS's headless Service
selects it and the reconcile counts it as ``ps-<index>``), the job as its controller (so its
ReplicaSet lets it go and starts a new standby), and the annotation.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

from tensorgrid_operator.api import ps_replication
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.resources import manifests
from tensorgrid_operator.resources import pod_security

Obj = dict[str, Any]
LABEL_STANDBY_OF = "tensorgrid.io/ps-standby-of"
CONTAINER = "ps-standby"
COMPONENT = "ps-standby"
# The PS template's pod fields a standby keeps: where it may run and how it pulls its image.
_POD_FIELDS = ("nodeSelector", "tolerations", "imagePullSecrets", "securityContext", "priorityClassName")
_CONTAINER_FIELDS = ("image", "imagePullPolicy", "resources", "securityContext", "env")
TAKE_OVER_VOLUME = "take-over"
TAKE_OVER_DIR = "/etc/tensorgrid/take-over"
TAKE_OVER_FILE = "task"


def standby_labels(job_name: str, index: int) -> dict[str, str]:
    return {LABEL_STANDBY_OF: job_name, spec_lib.LABEL_REPLICA_INDEX: str(index)}


def _labelled(job_name: str, index: int) -> dict[str, str]:
    """The standby's labels and the recommended ones, on its objects and its pod (never in a selector)."""
    return {**manifests.recommended_labels(job_name, COMPONENT), **standby_labels(job_name, index)}


def _metadata(job: Mapping[str, Any], index: int) -> Obj:
    meta = job["metadata"]
    return {"name": ps_replication.standby_name(meta["name"], index), "namespace": meta["namespace"],
            "labels": _labelled(meta["name"], index), "ownerReferences": [manifests.owner_reference(job)]}


def _container(job: Mapping[str, Any], job_spec: spec_lib.JobSpec, ps_main: Mapping[str, Any], index: int) -> Obj:
    """The standby's container: ``tensorgrid ps-standby``, with what it needs to become ``ps:<index>``."""
    meta = job["metadata"]
    container: Obj = {k: copy.deepcopy(ps_main[k]) for k in _CONTAINER_FIELDS if k in ps_main}
    address = ps_replication.standby_address(meta["name"], meta["namespace"], index)
    key = spec_lib.ReplicaKey(spec_lib.ReplicaType.PS, index)
    data_port = manifests.replica_port(job_spec, key.rtype, spec_lib.DATA_PORT_NAME)
    metrics_port = manifests.replica_port(job_spec, key.rtype, spec_lib.METRICS_PORT_NAME)
    own = {ps_replication.STANDBY_FOR_ENV: ps_replication.standby_for(index),
           manifests.TLS_DIR_ENV: manifests.TLS_MOUNT_PATH,
           # What the PS pod has, for the server it starts when it takes over (its task is read then).
           "TF_CONFIG": manifests.tf_config(manifests.cluster_json(meta["name"], meta["namespace"], job_spec), key),
           "TENSORGRID_DATA_PORT": str(data_port),
           "TENSORGRID_METRICS_PORT": str(metrics_port),
           **dict(ps_replication.ps_env(job_spec.ps_replication, meta["name"], meta["namespace"], index))}
    container["env"] = [e for e in container.get("env") or [] if e.get("name") not in own] + [
        {"name": name, "value": value} for name, value in own.items()]
    container.update(
        name=CONTAINER,
        command=["tensorgrid", "ps-standby", "--address", address,
                 "--take-over-file", f"{TAKE_OVER_DIR}/{TAKE_OVER_FILE}"],
        ports=[{"name": spec_lib.PORT_NAME, "containerPort": ps_replication.STANDBY_PORT, "protocol": "TCP"},
               {"name": spec_lib.DATA_PORT_NAME, "containerPort": data_port, "protocol": "TCP"},
               {"name": spec_lib.METRICS_PORT_NAME, "containerPort": metrics_port, "protocol": "TCP"}],
        volumeMounts=[{"name": manifests.TLS_VOLUME, "mountPath": manifests.TLS_MOUNT_PATH, "readOnly": True},
                      {"name": TAKE_OVER_VOLUME, "mountPath": TAKE_OVER_DIR, "readOnly": True}])
    return container


def _take_over_volume() -> Obj:
    """The annotation ``tensorgrid.io/take-over`` as a file (empty while it is absent), kept current by the kubelet."""
    field = f"metadata.annotations['{ps_replication.TAKE_OVER_ANNOTATION}']"
    return {"name": TAKE_OVER_VOLUME,
            "downwardAPI": {"items": [{"path": TAKE_OVER_FILE, "fieldRef": {"fieldPath": field}}]}}


def takeover_patch(job: Mapping[str, Any], job_spec: spec_lib.JobSpec, index: int, epoch: int) -> Obj:
    """The metadata patch that makes a standby pod ``ps-<index>``: the replica's labels (its Service
    selects it; the reconcile counts it), none of the standby's (the standby Service and the
    ReplicaSet no longer select it), the job as its only owner and controller, and the annotation
    that tells it.

    A strategic merge patch (what the pod API takes for a patch of a dict): it merges
    ``ownerReferences`` by uid, and a pod may have one controller, so the list is replaced whole
    (``$patch: replace``) to drop the ReplicaSet's."""
    key = spec_lib.ReplicaKey(spec_lib.ReplicaType.PS, index)
    labels: dict[str, Any] = {**manifests.replica_labels(job["metadata"]["name"], key, spec_lib.chief_key(job_spec)),
                              spec_lib.LABEL_RESTART_EPOCH: str(epoch), LABEL_STANDBY_OF: None}
    return {"metadata": {"labels": labels,
                         "annotations": {ps_replication.TAKE_OVER_ANNOTATION: ps_replication.standby_for(index)},
                         "ownerReferences": [{"$patch": "replace"}, manifests.owner_reference(job)]}}


def deployment(job: Mapping[str, Any], job_spec: spec_lib.JobSpec, index: int, tls_secret: str) -> Obj:
    """The standby of PS ``index``: one pod, never two at once (``Recreate``: its Service names one holder)."""
    template = job_spec.replica_specs[spec_lib.ReplicaType.PS].template
    ps_pod = template.get("spec") or {}
    ps_main = manifests.main_container(ps_pod)
    if ps_main is None:
        raise ValueError("spec.replicaSpecs.PS.template has no container whose image the standby could run")
    job_name = job["metadata"]["name"]
    labels = standby_labels(job_name, index)
    pod_spec: Obj = {k: copy.deepcopy(ps_pod[k]) for k in _POD_FIELDS if k in ps_pod}
    pod_spec.update(
        containers=[_container(job, job_spec, ps_main, index)],
        volumes=[{"name": manifests.TLS_VOLUME, "secret": {"secretName": tls_secret}}, _take_over_volume()],
        automountServiceAccountToken=False,
        affinity={"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100,
            "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {
                spec_lib.LABEL_JOB_NAME: job_name, spec_lib.LABEL_REPLICA_TYPE: spec_lib.ReplicaType.PS.task_type,
                spec_lib.LABEL_REPLICA_INDEX: str(index)}}}}]}})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(job, index),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": _labelled(job_name, index)},
                         "spec": pod_security.with_restricted_defaults(pod_spec)},
        },
    }


def service(job: Mapping[str, Any], index: int) -> Obj:
    """The headless Service whose DNS name is the standby's address (``TENSORGRID_PS_REPLICA_ADDRESS``)."""
    port = ps_replication.STANDBY_PORT
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(job, index),
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                 "selector": standby_labels(job["metadata"]["name"], index),
                 "ports": [{"name": spec_lib.PORT_NAME, "port": port, "targetPort": port, "protocol": "TCP"}]},
    }


def network_policy(job: Mapping[str, Any], index: int) -> Obj:
    """Only the job's pods reach the standby (its PS pushes to it and, made again, fetches from it)."""
    job_name = job["metadata"]["name"]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(job, index),
        "spec": {"podSelector": {"matchLabels": standby_labels(job_name, index)}, "policyTypes": ["Ingress"],
                 "ingress": [{"from": [{"podSelector": {"matchLabels": {spec_lib.LABEL_JOB_NAME: job_name}}}],
                              "ports": [{"port": ps_replication.STANDBY_PORT, "protocol": "TCP"}]}]},
    }


def standby_indices(job_spec: spec_lib.JobSpec) -> range:
    """The PS indices that have a standby: every PS when ``standby`` is on, none otherwise."""
    replication = job_spec.ps_replication
    return range(job_spec.replicas(spec_lib.ReplicaType.PS) if replication.enabled and replication.standby else 0)


def job_objects(job: Mapping[str, Any], job_spec: spec_lib.JobSpec, with_network_policy: bool,
                job_wide_tls: bool = False) -> list[Obj]:
    """Every standby's Deployment, Service and (with the operator's NetworkPolicies) NetworkPolicy.

    ``ValueError`` when a standby's name would not be a DNS label, or the PS template has no container.
    """
    job_name = job["metadata"]["name"]
    objects: list[Obj] = []
    for index in standby_indices(job_spec):
        name = ps_replication.standby_name(job_name, index)
        if len(name) > spec_lib.MAX_NAME_LENGTH:
            raise ValueError(f"the standby's name {name} is longer than {spec_lib.MAX_NAME_LENGTH} characters: use a "
                             f"shorter job name")
        secret = (manifests.job_wide_tls_secret_name(job_name) if job_wide_tls
                  else manifests.replica_tls_secret_name(name))
        objects += [deployment(job, job_spec, index, secret), service(job, index)]
        if with_network_policy:
            objects.append(network_policy(job, index))
    return objects
