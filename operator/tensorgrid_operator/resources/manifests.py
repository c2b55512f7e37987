"""The pods and headless Services a TrainingJob owns, and the TF_CONFIG they carry.

This is the operator side of the "Contracts between the halves" in docs/architecture.md:
Kubeflow-compatible TF_CONFIG, ``<job>-<type>-<index>`` names, one headless Service
per pod, the tensorgrid.io labels, owner references, declared ports. Pure functions
of the job object; nothing here talks to the API server.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Mapping, Optional

from tensorgrid_operator.api import ps_replication
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.resources import kueue
from tensorgrid_operator.resources import pod_security

Obj = dict[str, Any]

# How long a parameter server waits for the other training tasks once the chief has
# finished, before it stops anyway (the runtime's default: 60 s).
PS_GRACE_ENV = "TENSORGRID_PS_GRACE_SECONDS"
# Under successPolicy AllWorkers, without activeDeadlineSeconds: workers may finish long
# after the chief, and the PS must outlive them all. It still stops as soon as every
# training task has reported finishing, and the operator stops it when the job ends.
ALL_WORKERS_PS_GRACE_SECONDS = 30 * 24 * 3600

# The BLAS threads of a task (the runtime's default when its config sets none): the main
# container's CPU limit, else its request, rounded up to whole cores. Without it each task
# would take a thread per core of the node, and numpy's OpenBLAS threads spin between calls:
# three 250m pods of a job on a 2-core node trained 10 times slower with 2 threads each.
INTRA_OP_THREADS_ENV = "TENSORGRID_INTRA_OP_THREADS"

# Where the chief's runtime writes its final figures when it ends: the container's termination
# message, which the kubelet keeps in the pod's status after the process (and its metrics) are gone.
FINAL_FIGURES_PATH_ENV = "TENSORGRID_TERMINATION_MESSAGE_PATH"
TERMINATION_LOG = "/dev/termination-log"

# The most bytes of TF_CONFIG a pod gets: Linux refuses to start a process with an environment
# string longer than MAX_ARG_STRLEN (32 pages, 131072 bytes), so a container with a longer
# TF_CONFIG could never start. About 3,000 replicas with short job and namespace names.
MAX_TF_CONFIG_BYTES = 131072

# Mutual TLS between a job's pods: each replica's Secret of job_certificates.py, mounted into
# its main container, whose runtime finds it through TLS_DIR_ENV.
TLS_DIR_ENV = "TENSORGRID_TLS_DIR"
TLS_VOLUME = "tensorgrid-tls"
TLS_MOUNT_PATH = "/var/run/tensorgrid/tls"


def replica_tls_secret_name(pod_name: str) -> str:
    """The Secret holding one replica's certificate and key, and the job's CA certificate."""
    return f"{pod_name}-tls"


def job_wide_tls_secret_name(job_name: str) -> str:
    """The one Secret every replica of a job mounted before per-replica certificates (kept for
    the jobs an earlier operator started: ``certificate_secrets``)."""
    return f"{job_name}-tls"


def owner_reference(job: Mapping[str, Any]) -> Obj:
    """Makes the job the controller of an object, so garbage collection follows the job."""
    meta = job["metadata"]
    return {
        "apiVersion": spec_lib.API_VERSION,
        "kind": spec_lib.KIND,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


# Kubernetes' recommended labels (app.kubernetes.io/*), on every pod and Service the operator makes
# (and their Deployments), for the tools that know no tensorgrid.io label (dashboards, cost reports,
# policy engines). Never in a selector: the tensorgrid.io labels select, and a template's own
# app.kubernetes.io values win on its pods.
APP_NAME = "tensorgrid"
MANAGED_BY = "tensorgrid-operator"


def recommended_labels(job_name: str, component: str, app_name: str = APP_NAME) -> dict[str, str]:
    """What the object runs (``app_name``), for which job (``instance``), in which role (``component``:
    a replica type's task type, ``tensorboard``, ``ps-standby``), as part of tensorgrid, made by its operator."""
    return {
        "app.kubernetes.io/name": app_name,
        "app.kubernetes.io/instance": job_name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": APP_NAME,
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }


def replica_labels(job_name: str, key: spec_lib.ReplicaKey, chief: Optional[spec_lib.ReplicaKey]) -> dict[str, str]:
    labels = {
        spec_lib.LABEL_JOB_NAME: job_name,
        spec_lib.LABEL_REPLICA_TYPE: key.rtype.task_type,
        spec_lib.LABEL_REPLICA_INDEX: str(key.index),
    }
    if key == chief:
        labels[spec_lib.LABEL_JOB_ROLE] = "chief"
    return labels


def main_container(pod_spec: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    """The container named ``tensorgrid``, else the one named ``tensorflow`` (Kubeflow TFJob's), else the first."""
    containers: list[Mapping[str, Any]] = pod_spec.get("containers") or []
    for name in (spec_lib.MAIN_CONTAINER, spec_lib.KUBEFLOW_MAIN_CONTAINER):
        for container in containers:
            if container.get("name") == name:
                return container
    return containers[0] if containers else None


def replica_port(job_spec: spec_lib.JobSpec, rtype: spec_lib.ReplicaType, name: str = spec_lib.PORT_NAME) -> int:
    """A port of a replica type: the main container's port of that name, else the default.

    The defaults: 2222 for gRPC (``tensorgrid``), the gRPC port + 1 for the data channel
    (``tensorgrid-data``), 9090 for the metrics (``metrics``).
    """
    declared = _declared_port(job_spec, rtype, name)
    if declared is not None:
        return declared
    if name == spec_lib.METRICS_PORT_NAME:
        return spec_lib.METRICS_PORT
    return replica_port(job_spec, rtype) + 1 if name == spec_lib.DATA_PORT_NAME else spec_lib.DEFAULT_PORT


def _declared_port(job_spec: spec_lib.JobSpec, rtype: spec_lib.ReplicaType, name: str) -> Optional[int]:
    replica = job_spec.replica_specs.get(rtype)
    container = main_container((replica.template.get("spec") or {}) if replica else {})
    for port in (container or {}).get("ports") or []:
        if port.get("name") == name and port.get("containerPort"):
            return int(port["containerPort"])
    return None


def cluster_spec(job_name: str, namespace: str, job_spec: spec_lib.JobSpec) -> dict[str, list[str]]:
    """TF_CONFIG's ``cluster``: every role but Evaluator (TensorFlow rejects an evaluator in it)."""
    cluster: dict[str, list[str]] = {}
    for rtype in spec_lib.REPLICA_TYPES:
        count = job_spec.replicas(rtype)
        if rtype is spec_lib.ReplicaType.EVALUATOR or count == 0:
            continue
        port = replica_port(job_spec, rtype)
        cluster[rtype.task_type] = [
            f"{spec_lib.pod_name(job_name, spec_lib.ReplicaKey(rtype, i))}.{namespace}.svc:{port}" for i in range(count)
        ]
    return cluster


def cluster_json(job_name: str, namespace: str, job_spec: spec_lib.JobSpec) -> str:
    """TF_CONFIG's ``cluster`` as JSON, computed once per job and reconcile pass, not once per pod.

    Raises ``ValueError`` when the TF_CONFIG it makes would not fit in one environment
    variable (``MAX_TF_CONFIG_BYTES``): such a container could never start.
    """
    cluster = cluster_spec(job_name, namespace, job_spec)
    text = json.dumps(cluster, sort_keys=True)
    total = sum(len(addresses) for addresses in cluster.values())
    # The longest task any replica gets: the longest type name, the largest index.
    size = len(tf_config(text, spec_lib.ReplicaKey(spec_lib.ReplicaType.EVALUATOR, total)).encode())
    if size > MAX_TF_CONFIG_BYTES:
        raise ValueError(f"TF_CONFIG for {total} replicas of job {job_name} in namespace {namespace} would be "
                         f"{size} bytes, over the {MAX_TF_CONFIG_BYTES} bytes an environment variable can hold "
                         f"(Linux's MAX_ARG_STRLEN): use fewer replicas or a shorter job name and namespace")
    return text


def tf_config(cluster: str, key: spec_lib.ReplicaKey) -> str:
    """The TF_CONFIG of one replica, around the job's ``cluster_json``.

    The same bytes as ``json.dumps({"cluster", "environment", "task"}, sort_keys=True)``.
    """
    task = json.dumps({"index": key.index, "type": key.rtype.task_type})
    return f'{{"cluster": {cluster}, "environment": "cloud", "task": {task}}}'


def cpu_threads(container: Mapping[str, Any]) -> Optional[int]:
    """Whole cores of ``container``'s CPU limit, else of its request (``250m`` -> 1,
    ``1.5`` -> 2); None when it declares neither or the quantity is not a CPU quantity (the
    API server then refuses the pod, naming it)."""
    resources = container.get("resources") or {}
    quantity = (resources.get("limits") or {}).get("cpu") or (resources.get("requests") or {}).get("cpu")
    if quantity is None:
        return None
    text = str(quantity).strip()
    scale = 1000.0
    if text.endswith("m"):
        text, scale = text[:-1], 1.0
    try:
        millicores = float(text) * scale
    except ValueError:
        return None
    if not millicores > 0 or millicores == float("inf"):
        return None
    return max(1, -(-int(millicores) // 1000))


def _set_env(container: Obj, name: str, value: str) -> None:
    env = [e for e in container.get("env") or [] if e.get("name") != name]
    env.append({"name": name, "value": value})
    container["env"] = env


def _default_env(container: Obj, name: str, value: str) -> None:
    """``_set_env`` unless the template's container declares ``name`` itself: its value wins."""
    if name not in {e.get("name") for e in container.get("env") or []}:
        _set_env(container, name, value)


def ps_grace_seconds(job_spec: spec_lib.JobSpec) -> Optional[int]:
    """The PS grace period the operator sets: none (the runtime's 60 s) unless every worker decides success.

    Under ``AllWorkers`` a PS stopping 60 s after the chief would cut off the workers still
    training: it waits the job's activeDeadlineSeconds (the job cannot run longer), or 30 days.
    """
    if job_spec.success_policy is not spec_lib.SuccessPolicy.ALL_WORKERS:
        return None
    deadline = job_spec.run_policy.active_deadline_seconds
    return deadline if deadline is not None else ALL_WORKERS_PS_GRACE_SECONDS


def _declare_port(container: Obj, name: str, number: int) -> None:
    ports = container.setdefault("ports", [])
    if any(p.get("name") == name or p.get("containerPort") == number for p in ports):
        return
    ports.append({"name": name, "containerPort": number, "protocol": "TCP"})


def _mount_tls(main: Obj, pod_spec: Obj, secret_name: str) -> None:
    """Mounts the replica's TLS Secret read-only into the main container and points the runtime at it.

    A template that sets ``TENSORGRID_TLS_DIR`` itself (its own certificates, e.g. from
    cert-manager) keeps its value, and the Secret is mounted all the same.
    """
    pod_spec["volumes"] = _with_tls_volume(pod_spec.get("volumes") or [], secret_name)
    mounts = [m for m in main.get("volumeMounts") or [] if m.get("name") != TLS_VOLUME]
    mounts.append({"name": TLS_VOLUME, "mountPath": TLS_MOUNT_PATH, "readOnly": True})
    main["volumeMounts"] = mounts
    _default_env(main, TLS_DIR_ENV, TLS_MOUNT_PATH)


def _with_tls_volume(volumes: list[Obj], secret_name: str) -> list[Obj]:
    return [v for v in volumes if v.get("name") != TLS_VOLUME] + [
        {"name": TLS_VOLUME, "secret": {"secretName": secret_name}}]


def with_job_wide_tls(pod: Mapping[str, Any], job_name: str) -> Obj:
    """``pod`` mounting its job's one ``<job>-tls`` Secret instead of its replica's: for a job whose
    running pods show that Secret's certificate (an earlier operator's), so the new pod is trusted."""
    pod_spec = dict(pod["spec"])
    pod_spec["volumes"] = _with_tls_volume(pod_spec.get("volumes") or [], job_wide_tls_secret_name(job_name))
    return {**pod, "spec": pod_spec}


def build_pod(job: Mapping[str, Any], job_spec: spec_lib.JobSpec, key: spec_lib.ReplicaKey, epoch: int = 0,
              cluster: Optional[str] = None) -> Obj:
    """The pod for one replica: the user's template plus names, labels, TF_CONFIG and ports.

    ``cluster`` is the job's ``cluster_json``, computed once per pass by the caller
    (computed here when not given).

    ``restartPolicy`` is always ``Never``: the operator, not the kubelet, decides about
    restarts, so it sees every exit code and ``backoffLimit`` bounds every retry. The
    pod is labelled with the job's restart ``epoch``, so the pods of a run that a
    whole-job restart (by an earlier operator) replaced are known even after an upgrade.
    """
    meta = job["metadata"]
    job_name, namespace = meta["name"], meta["namespace"]
    template = copy.deepcopy(dict(job_spec.replica_specs[key.rtype].template))
    tmeta = template.get("metadata") or {}
    # Pod Security's restricted profile for every field the template leaves out (its own settings win).
    pod_spec: Obj = pod_security.with_restricted_defaults(template.get("spec") or {})
    labels = {**recommended_labels(job_name, key.rtype.task_type), **(tmeta.get("labels") or {})}
    labels.update(replica_labels(job_name, key, spec_lib.chief_key(job_spec)))
    labels[spec_lib.LABEL_RESTART_EPOCH] = str(epoch)
    annotations = dict(tmeta.get("annotations") or {})
    # A job submitted to a Kueue queue: every pod joins its one pod group (the job's labels win).
    group_labels, group_annotations = kueue.pod_metadata(
        job, sum(job_spec.replicas(rtype) for rtype in spec_lib.REPLICA_TYPES))
    labels.update(group_labels)
    annotations.update(group_annotations)
    pod_spec["restartPolicy"] = "Never"
    # Training needs no API access: no token in the pod unless the template asks for one.
    pod_spec.setdefault("automountServiceAccountToken", False)
    container = main_container(pod_spec)
    if container is not None:
        main: Obj = dict(container)
        if cluster is None:
            cluster = cluster_json(job_name, namespace, job_spec)
        _set_env(main, "TF_CONFIG", tf_config(cluster, key))
        metrics_port = replica_port(job_spec, key.rtype, spec_lib.METRICS_PORT_NAME)
        _set_env(main, "TENSORGRID_METRICS_PORT", str(metrics_port))
        data_port = replica_port(job_spec, key.rtype, spec_lib.DATA_PORT_NAME)
        _set_env(main, "TENSORGRID_DATA_PORT", str(data_port))
        if key == spec_lib.chief_key(job_spec):  # the chief's final figures (reconcile.progress.final_progress)
            _default_env(main, FINAL_FIGURES_PATH_ENV, str(main.get("terminationMessagePath") or TERMINATION_LOG))
        grace = ps_grace_seconds(job_spec)
        if key.rtype is spec_lib.ReplicaType.PS and grace is not None:
            _default_env(main, PS_GRACE_ENV, str(grace))
        if key.rtype is spec_lib.ReplicaType.PS:
            for name, value in ps_replication.ps_env(job_spec.ps_replication, job_name, namespace, key.index):
                _set_env(main, name, value)
        threads = cpu_threads(main)
        if threads is not None:
            _default_env(main, INTRA_OP_THREADS_ENV, str(threads))
        _mount_tls(main, pod_spec, replica_tls_secret_name(spec_lib.pod_name(job_name, key)))
        main["ports"] = [dict(p) for p in main.get("ports") or []]
        _declare_port(main, spec_lib.PORT_NAME, replica_port(job_spec, key.rtype))
        _declare_port(main, spec_lib.DATA_PORT_NAME, data_port)
        _declare_port(main, spec_lib.METRICS_PORT_NAME, metrics_port)
        pod_spec["containers"] = [main if c is container else c for c in pod_spec["containers"]]
    metadata: Obj = {
        "name": spec_lib.pod_name(job_name, key),
        "namespace": namespace,
        "labels": labels,
        "ownerReferences": [owner_reference(job)],
    }
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def build_service(job: Mapping[str, Any], job_spec: spec_lib.JobSpec, key: spec_lib.ReplicaKey) -> Obj:
    """The headless Service giving the pod its stable DNS name ``<pod>.<ns>.svc``.

    ``publishNotReadyAddresses``: peers must resolve each other while they start up,
    before any readiness probe passes (TF servers dial their peers at start).
    """
    meta = job["metadata"]
    job_name = meta["name"]
    selector = replica_labels(job_name, key, None)
    port = replica_port(job_spec, key.rtype)
    data_port = replica_port(job_spec, key.rtype, spec_lib.DATA_PORT_NAME)
    metrics_port = replica_port(job_spec, key.rtype, spec_lib.METRICS_PORT_NAME)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": spec_lib.pod_name(job_name, key),
            "namespace": meta["namespace"],
            "labels": {**recommended_labels(job_name, key.rtype.task_type),
                       **replica_labels(job_name, key, spec_lib.chief_key(job_spec))},
            "ownerReferences": [owner_reference(job)],
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector,
            "ports": [
                {"name": spec_lib.PORT_NAME, "port": port, "targetPort": port, "protocol": "TCP"},
                {"name": spec_lib.DATA_PORT_NAME, "port": data_port, "targetPort": data_port, "protocol": "TCP"},
                {"name": spec_lib.METRICS_PORT_NAME, "port": metrics_port, "targetPort": metrics_port,
                 "protocol": "TCP"},
            ],
        },
    }
