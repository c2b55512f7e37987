"""A TensorBoard over a job's summaries (``spec.tensorboard``): its Deployment, Service and NetworkPolicy.

Why it exists: users watch a job's loss curve while it trains. A job's tasks write their
event files (``tf.summary.FileWriter``) under a directory of their own file system; the
TensorBoard can read them only where that directory is on a volume that several pods
share (a PersistentVolumeClaim of access mode ReadWriteMany, NFS, ...). So the operator
finds, in the chief's (else worker 0's) template, the volume mounted at or above
``spec.tensorboard.logDir``, and mounts the same volume read-only at the same path in
one TensorBoard pod: ``tensorboard --logdir <logDir>`` on port 6006, behind the Service
``<job>-tensorboard``. A per-pod volume (``emptyDir``, a Secret, ...) is refused with a
message naming it: a TensorBoard on it would show nothing.

The objects carry the label ``tensorgrid.io/tensorboard-of: <job>``, not the job-name label
of the job's replicas: the reconcile counts every pod and Service with that label as a
replica. They are owned by the job (garbage-collected with it). Pure functions of the job;
``cluster.ensure_objects`` creates them.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Optional

from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.resources import manifests
from tensorgrid_operator.resources import pod_security

Obj = dict[str, Any]
LABEL_TENSORBOARD_OF = "tensorgrid.io/tensorboard-of"
PORT = 6006
PORT_NAME = "tensorboard"
CONTAINER = "tensorboard"
NAME_SUFFIX = "-tensorboard"
DEFAULT_RESOURCES: Mapping[str, Any] = {"requests": {"cpu": "100m", "memory": "256Mi"},
                                         "limits": {"memory": "1Gi"}}
# Volumes whose files only their own pod sees: a TensorBoard mounting one would read nothing the job wrote.
PER_POD_VOLUMES = ("emptyDir", "secret", "configMap", "downwardAPI", "projected", "ephemeral")
# TensorBoard writes its instance files under $TMPDIR (its root file system is read-only here).
SCRATCH_VOLUME = "tensorboard-tmp"
SCRATCH_PATH = "/tmp"


def name(job_name: str) -> str:
    """``<job>-tensorboard``: the Deployment's, the Service's and the NetworkPolicy's name."""
    return f"{job_name}{NAME_SUFFIX}"


def port_forward_command(job_name: str, namespace: str, local_port: int = PORT) -> list[str]:
    """The ``kubectl port-forward`` that makes the job's TensorBoard http://localhost:<local_port>/."""
    return ["kubectl", "port-forward", "--namespace", namespace, f"service/{name(job_name)}", f"{local_port}:{PORT}"]


def _source(job_spec: spec_lib.JobSpec) -> tuple[spec_lib.ReplicaKey, Mapping[str, Any]]:
    key = spec_lib.chief_key(job_spec)
    if key is None:
        raise ValueError("spec.tensorboard: the job has no Chief and no Worker, whose log directory it would show")
    return key, job_spec.replica_specs[key.rtype].template.get("spec") or {}


def log_volume(job_spec: spec_lib.JobSpec) -> tuple[Obj, Obj]:
    """(volume, volume mount) of the chief's (else worker 0's) main container that holds ``logDir``,
    the mount made read-only; ``ValueError`` naming the log directory when there is none, or when
    that volume is not shared between pods."""
    log_dir = job_spec.tensorboard.log_dir
    key, pod_spec = _source(job_spec)
    where = f"spec.replicaSpecs.{key.rtype.value}.template"
    main = manifests.main_container(pod_spec) or {}
    mounts = [m for m in main.get("volumeMounts") or [] if _under(log_dir, str(m.get("mountPath") or ""))]
    if not mounts:
        paths = ", ".join(str(m.get("mountPath")) for m in main.get("volumeMounts") or []) or "none"
        raise ValueError(f"spec.tensorboard.logDir {log_dir!r} is on no volume of {where}'s main container "
                         f"(its volume mounts: {paths}); mount a shared volume (a ReadWriteMany "
                         f"PersistentVolumeClaim, NFS) at or above it, so the TensorBoard can read it")
    mount = max(mounts, key=lambda m: len(str(m["mountPath"])))
    volumes = {str(v.get("name")): v for v in pod_spec.get("volumes") or []}
    volume = volumes.get(str(mount.get("name")))
    if volume is None:
        raise ValueError(f"{where}: the volume mount {mount.get('name')!r} names no volume of the pod")
    per_pod = [kind for kind in PER_POD_VOLUMES if kind in volume]
    if per_pod:
        raise ValueError(f"spec.tensorboard.logDir {log_dir!r} is on volume {volume['name']!r}, an {per_pod[0]} "
                         f"that only its own pod sees; use a shared volume (a ReadWriteMany "
                         f"PersistentVolumeClaim, NFS) so the TensorBoard can read it")
    read_only = {k: v for k, v in mount.items() if k in ("name", "mountPath", "subPath", "subPathExpr")}
    read_only["readOnly"] = True
    return copy.deepcopy(dict(volume)), read_only


def _under(path: str, mount_path: str) -> bool:
    mount_path = mount_path.rstrip("/") or "/"
    return mount_path == "/" or path == mount_path or path.startswith(mount_path + "/")


def _labels(job_name: str) -> dict[str, str]:
    return {**manifests.recommended_labels(job_name, "tensorboard", app_name="tensorboard"),
            LABEL_TENSORBOARD_OF: job_name}


def _metadata(job: Mapping[str, Any], labels: Mapping[str, str]) -> Obj:
    meta = job["metadata"]
    return {"name": name(meta["name"]), "namespace": meta["namespace"], "labels": dict(labels),
            "ownerReferences": [manifests.owner_reference(job)]}


def deployment(job: Mapping[str, Any], job_spec: spec_lib.JobSpec) -> Obj:
    """One TensorBoard pod over ``logDir``: the chief's image (or ``spec.tensorboard.image``), its
    pull secrets, pod security context and service account, the log volume read-only."""
    job_name = job["metadata"]["name"]
    board = job_spec.tensorboard
    key, pod_spec = _source(job_spec)
    main = manifests.main_container(pod_spec) or {}
    image: Optional[str] = board.image or main.get("image")
    if not image:
        raise ValueError(f"spec.tensorboard.image is not set and spec.replicaSpecs.{key.rtype.value}'s main "
                         f"container names no image to run TensorBoard from")
    volume, mount = log_volume(job_spec)
    container: Obj = {
        "name": CONTAINER,
        "image": image,
        "command": ["tensorboard", "--logdir", board.log_dir, "--host", "0.0.0.0", "--port", str(PORT)],
        "env": [{"name": "TMPDIR", "value": SCRATCH_PATH}, {"name": "HOME", "value": SCRATCH_PATH}],
        "ports": [{"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/", "port": PORT_NAME}, "periodSeconds": 10},
        "resources": copy.deepcopy(dict(board.resources or DEFAULT_RESOURCES)),
        "volumeMounts": [mount, {"name": SCRATCH_VOLUME, "mountPath": SCRATCH_PATH}],
        "securityContext": {"readOnlyRootFilesystem": True},
    }
    if main.get("imagePullPolicy") and not board.image:
        container["imagePullPolicy"] = main["imagePullPolicy"]
    template_spec: Obj = {
        "containers": [container],
        "volumes": [volume, {"name": SCRATCH_VOLUME, "emptyDir": {"sizeLimit": "256Mi"}}],
        "automountServiceAccountToken": False,
    }
    for field in ("securityContext", "imagePullSecrets", "serviceAccountName", "nodeSelector", "tolerations"):
        if pod_spec.get(field):
            template_spec[field] = copy.deepcopy(pod_spec[field])
    labels = _labels(job_name)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(job, labels),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {LABEL_TENSORBOARD_OF: job_name}},
            "template": {"metadata": {"labels": labels},
                         "spec": pod_security.with_restricted_defaults(template_spec)},
        },
    }


def service(job: Mapping[str, Any]) -> Obj:
    """``<job>-tensorboard``, port 6006 to the TensorBoard pod."""
    job_name = job["metadata"]["name"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(job, _labels(job_name)),
        "spec": {"selector": {LABEL_TENSORBOARD_OF: job_name},
                 "ports": [{"name": PORT_NAME, "port": PORT, "targetPort": PORT_NAME, "protocol": "TCP"}]},
    }


def network_policy(job: Mapping[str, Any]) -> Obj:
    """Ingress to the TensorBoard pod on its http port only. Labelled with the job's name (not its
    pods' selector), so the operator's NetworkPolicy watch notices its deletion and makes it again."""
    job_name = job["metadata"]["name"]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(job, {**_labels(job_name), spec_lib.LABEL_JOB_NAME: job_name}),
        "spec": {"podSelector": {"matchLabels": {LABEL_TENSORBOARD_OF: job_name}}, "policyTypes": ["Ingress"],
                 "ingress": [{"ports": [{"port": PORT_NAME, "protocol": "TCP"}]}]},
    }


def job_objects(job: Mapping[str, Any], job_spec: spec_lib.JobSpec, with_network_policy: bool) -> list[Obj]:
    """What ``spec.tensorboard`` asks for (nothing when it is off); ``ValueError`` when it cannot be made."""
    if not job_spec.tensorboard.enabled:
        return []
    job_name = job["metadata"]["name"]
    if len(name(job_name)) > spec_lib.MAX_NAME_LENGTH:
        raise ValueError(f"spec.tensorboard: the TensorBoard's Service name {name(job_name)!r} would exceed "
                         f"{spec_lib.MAX_NAME_LENGTH} characters; a job with a TensorBoard has a name of at most "
                         f"{spec_lib.MAX_NAME_LENGTH - len(NAME_SUFFIX)}")
    objects = [deployment(job, job_spec), service(job)]
    return objects + [network_policy(job)] if with_network_policy else objects
