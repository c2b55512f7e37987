"""Kubeflow's ``kubeflow.org/v1 TFJob`` (training-operator v1.9) as a ``tensorgrid.io/v1 TrainingJob``.

Why it exists: the users of this operator come from Kubeflow's TFJob, whose manifests differ in
field names (``tfReplicaSpecs``, ``Master``, lower-case role keys) and, worse, in defaults that a
plain rename would silently change (restartPolicy Never there, ExitCode here; cleanPodPolicy
None there, Running here; no backoffLimit there means no limit). ``convert_tfjob`` writes every
such default out explicitly, so the TrainingJob behaves as the TFJob did, and returns a warning
for each field whose meaning changes or that is dropped, naming the field and why. What cannot be
converted raises ``ConversionError`` naming the field. ``tensorgrid-operator convert-tfjob`` is
its command (cli.py); docs/coming-from-tfjob.md its table.

Kubeflow's behaviour is read from training-operator v1.9.0: ``pkg/apis/kubeflow.org/v1``
(tensorflow_defaults.go, tensorflow_types.go, common_types.go), its TFJob webhook and controller.
Pure: no I/O, documents in, documents out.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Mapping, Optional, Sequence

from tensorgrid_operator.api import spec as spec_lib

TFJOB_API_VERSION = "kubeflow.org/v1"
TFJOB_KIND = "TFJob"
TFJOB_LIST_KIND = "TFJobList"
# Kubeflow's container and port names: TF_CONFIG goes to the container named ``tensorflow``
# (which its webhook requires), and the port named ``tfjob-port`` (default 2222) is the server's.
KUBEFLOW_CONTAINER = spec_lib.KUBEFLOW_MAIN_CONTAINER
KUBEFLOW_PORT_NAME = "tfjob-port"
# runPolicy.managedBy naming Kubeflow's own controller: the job is reconciled by the training-operator.
KUBEFLOW_CONTROLLER = "kubeflow.org/training-operator"
# TFJob without backoffLimit retries without limit; TrainingJob's backoffLimit is an int32.
UNLIMITED_BACKOFF = 2**31 - 1

# TFJob's defaults (SetDefaults_TFJob) where they differ from TrainingJob's.
TFJOB_DEFAULT_RESTART_POLICY = spec_lib.RestartPolicy.NEVER
TFJOB_DEFAULT_CLEAN_POD_POLICY = spec_lib.CleanPodPolicy.NONE

# TFJob's role keys (any case: Kubeflow's defaulting camel-cases them) and the TrainingJob role of each.
_ROLES = {
    "chief": spec_lib.ReplicaType.CHIEF,
    "master": spec_lib.ReplicaType.CHIEF,
    "ps": spec_lib.ReplicaType.PS,
    "worker": spec_lib.ReplicaType.WORKER,
    "evaluator": spec_lib.ReplicaType.EVALUATOR,
}
_TFJOB_ROLES = "Chief, Master, PS, Worker, Evaluator (any case)"
# The TrainingJob's replicaSpecs in TFJob's order of roles.
_ORDER = (spec_lib.ReplicaType.CHIEF, spec_lib.ReplicaType.PS, spec_lib.ReplicaType.WORKER,
          spec_lib.ReplicaType.EVALUATOR)
# Metadata a TrainingJob keeps; what the API server sets on an object it stored is dropped quietly.
_KEPT_METADATA = ("name", "generateName", "namespace", "labels", "annotations")
_SERVER_METADATA = frozenset({"uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
                              "deletionGracePeriodSeconds", "managedFields", "selfLink"})
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@dataclasses.dataclass(frozen=True)
class FieldWarning:
    """A field of the TFJob whose meaning changes in the TrainingJob, or that is dropped."""

    field: str
    """The TFJob's field, as a path (``spec.runPolicy.schedulingPolicy.minResources``)."""
    message: str
    """What happens to it and why."""

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class ConversionError(ValueError):
    """A TFJob that cannot be converted: ``field`` names the field at fault, ``reason`` says why, and
    ``document`` which document of a stream it is (empty for a single TFJob)."""

    def __init__(self, field: str, reason: str, document: str = "") -> None:
        super().__init__(f"{document + ': ' if document else ''}{field}: {reason}")
        self.field = field
        self.reason = reason
        self.document = document


@dataclasses.dataclass(frozen=True)
class Conversion:
    """One TFJob converted: the TrainingJob and the warnings about it."""

    training_job: dict[str, Any]
    warnings: tuple[FieldWarning, ...]


def role_of(key: str) -> Optional[spec_lib.ReplicaType]:
    """The TrainingJob role of a TFJob's role key (``Master`` is the chief; any case); ``None``: not a role."""
    return _ROLES.get(key.lower())


def is_tfjob(document: Any) -> bool:
    return isinstance(document, Mapping) and document.get("kind") == TFJOB_KIND \
        and str(document.get("apiVersion", "")).startswith("kubeflow.org/")


def convert_tfjob(tfjob: Mapping[str, Any]) -> Conversion:
    """The TrainingJob that runs as ``tfjob`` ran under Kubeflow's training-operator v1.9.

    Raises ``ConversionError`` naming the field for what a TrainingJob cannot express.
    """
    if tfjob.get("apiVersion") != TFJOB_API_VERSION or tfjob.get("kind") != TFJOB_KIND:
        raise ConversionError("apiVersion", f"{tfjob.get('apiVersion')!r} {tfjob.get('kind')!r} is not a TFJob; "
                                            f"valid: apiVersion {TFJOB_API_VERSION}, kind {TFJOB_KIND}")
    warnings: list[FieldWarning] = []
    metadata = _metadata(tfjob.get("metadata") or {}, warnings)
    if tfjob.get("status"):
        warnings.append(FieldWarning("status", "dropped: the operator writes a TrainingJob's status itself"))
    raw_spec = tfjob.get("spec")
    if not isinstance(raw_spec, Mapping):
        raise ConversionError("spec", "missing; a TFJob needs spec.tfReplicaSpecs")
    for key in raw_spec:
        if key not in ("tfReplicaSpecs", "runPolicy", "successPolicy", "enableDynamicWorker"):
            warnings.append(FieldWarning(f"spec.{key}", "dropped: not a field of TFJob v1 (its API server prunes it too)"))
    replica_specs = _replica_specs(raw_spec.get("tfReplicaSpecs"), warnings)
    run_policy = raw_spec.get("runPolicy") or {}
    spec: dict[str, Any] = {}
    managed_by = _managed_by(run_policy.get("managedBy"), warnings)
    if managed_by is not None:
        spec["managedBy"] = managed_by
    spec["replicaSpecs"] = {rtype.value: replica_specs[rtype] for rtype in _ORDER if rtype in replica_specs}
    spec["runPolicy"] = _run_policy(run_policy, replica_specs, warnings)
    spec["successPolicy"] = _success_policy(raw_spec.get("successPolicy"), replica_specs, warnings).value
    if raw_spec.get("enableDynamicWorker"):
        warnings.append(FieldWarning(
            "spec.enableDynamicWorker",
            "dropped: every replica's TF_CONFIG names the whole cluster (not the sparse one of dynamic workers), "
            "and a Worker that fails for good fails the job as any other"))
    if not any(int(replica_specs[t]["replicas"]) > 0 for t in (spec_lib.ReplicaType.CHIEF, spec_lib.ReplicaType.WORKER)
               if t in replica_specs):
        raise ConversionError("spec.tfReplicaSpecs", "needs a Worker or a Chief (Master) replica: a TrainingJob "
                                                     "ends when they do")
    warnings.extend(_semantic_warnings(replica_specs))
    warnings.extend(_keep_the_image_user(replica_specs))
    training_job = {"apiVersion": spec_lib.API_VERSION, "kind": spec_lib.KIND, "metadata": metadata, "spec": spec}
    try:
        spec_lib.parse_spec(spec)
    except ValueError as e:
        raise ConversionError("spec", f"the converted TrainingJob is not valid: {e}") from None
    return Conversion(training_job, tuple(warnings))


def _metadata(raw: Mapping[str, Any], warnings: list[FieldWarning]) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    for key in _KEPT_METADATA:
        if raw.get(key):
            metadata[key] = copy.deepcopy(raw[key])
    annotations = metadata.get("annotations")
    if annotations and _LAST_APPLIED in annotations:
        annotations.pop(_LAST_APPLIED)  # kubectl's record of the TFJob, not of this object
        if not annotations:
            metadata.pop("annotations")
    for key in raw:
        if key not in _KEPT_METADATA and key not in _SERVER_METADATA and raw[key]:
            warnings.append(FieldWarning(f"metadata.{key}", "dropped: it belongs to the TFJob object, not to a new "
                                                        "TrainingJob"))
    return metadata


def _replica_specs(raw: Any, warnings: list[FieldWarning]) -> dict[spec_lib.ReplicaType, dict[str, Any]]:
    if not isinstance(raw, Mapping) or not raw:
        raise ConversionError("spec.tfReplicaSpecs", f"required: one entry per role ({_TFJOB_ROLES})")
    converted: dict[spec_lib.ReplicaType, dict[str, Any]] = {}
    source: dict[spec_lib.ReplicaType, str] = {}
    for key, entry in raw.items():
        field = f"spec.tfReplicaSpecs.{key}"
        rtype = _ROLES.get(str(key).lower())
        if rtype is None:
            raise ConversionError(field, f"unknown replica type; valid: {_TFJOB_ROLES}")
        if rtype in source:
            raise ConversionError(field, f"the same role as spec.tfReplicaSpecs.{source[rtype]}: a TFJob has one "
                                         f"entry per role, and at most one of Chief and Master")
        source[rtype] = str(key)
        if str(key).lower() == "master":
            warnings.append(FieldWarning(field, "becomes Chief: its pod is <job>-chief-0 (not <job>-master-0) and its "
                                            "TF_CONFIG task type is \"chief\" (not \"master\")"))
        converted[rtype] = _replica_spec(entry, field, rtype)
    return converted


def _replica_spec(raw: Any, field: str, rtype: spec_lib.ReplicaType) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ConversionError(field, "must be a replica spec (replicas, restartPolicy, template)")
    for key in raw:
        if key not in ("replicas", "restartPolicy", "template"):
            raise ConversionError(f"{field}.{key}", "unknown field of a replica spec; valid: replicas, "
                                                    "restartPolicy, template")
    replicas = _int(raw.get("replicas", 1), f"{field}.replicas", minimum=0)
    if rtype is spec_lib.ReplicaType.CHIEF and replicas > 1:
        raise ConversionError(f"{field}.replicas", f"{replicas}: a job has at most one chief")
    policy = raw.get("restartPolicy") or TFJOB_DEFAULT_RESTART_POLICY.value
    if policy not in {p.value for p in spec_lib.RestartPolicy}:
        raise ConversionError(f"{field}.restartPolicy", f"unsupported value {policy!r}; valid: "
                                                        + ", ".join(p.value for p in spec_lib.RestartPolicy))
    return {"replicas": replicas, "restartPolicy": policy, "template": _template(raw.get("template"), field)}


def _template(raw: Any, field: str) -> dict[str, Any]:
    containers_field = f"{field}.template.spec.containers"
    template = copy.deepcopy(dict(raw)) if isinstance(raw, Mapping) else {}
    pod_spec = template.get("spec")
    containers = pod_spec.get("containers") if isinstance(pod_spec, Mapping) else None
    if not isinstance(containers, list) or not containers:
        raise ConversionError(containers_field, f"required: at least the container named {KUBEFLOW_CONTAINER}")
    names = [c.get("name") for c in containers if isinstance(c, Mapping)]
    if KUBEFLOW_CONTAINER not in names:
        raise ConversionError(containers_field, f"no container named {KUBEFLOW_CONTAINER} (TFJob requires one: it "
                                                f"gets TF_CONFIG); containers: {names}")
    if spec_lib.MAIN_CONTAINER in names:
        raise ConversionError(containers_field, f"a container named {spec_lib.MAIN_CONTAINER} would get TF_CONFIG "
                                                f"here instead of the one named {KUBEFLOW_CONTAINER}: rename it")
    for container in containers:
        if container.get("name") != KUBEFLOW_CONTAINER:
            continue
        for port in container.get("ports") or []:
            if port.get("name") == KUBEFLOW_PORT_NAME:
                port["name"] = spec_lib.PORT_NAME  # the server's port: the one TF_CONFIG names
    return template


def _run_policy(raw: Mapping[str, Any], replica_specs: Mapping[spec_lib.ReplicaType, Mapping[str, Any]],
                warnings: list[FieldWarning]) -> dict[str, Any]:
    field = "spec.runPolicy"
    clean = raw.get("cleanPodPolicy") or TFJOB_DEFAULT_CLEAN_POD_POLICY.value
    if clean not in {p.value for p in spec_lib.CleanPodPolicy}:
        raise ConversionError(f"{field}.cleanPodPolicy", f"unsupported value {clean!r}; valid: "
                                                         + ", ".join(p.value for p in spec_lib.CleanPodPolicy))
    backoff = raw.get("backoffLimit")
    run: dict[str, Any] = {
        "cleanPodPolicy": clean,
        "backoffLimit": UNLIMITED_BACKOFF if backoff is None else _int(backoff, f"{field}.backoffLimit", minimum=0),
    }
    if raw.get("activeDeadlineSeconds") is not None:
        run["activeDeadlineSeconds"] = _int(raw["activeDeadlineSeconds"], f"{field}.activeDeadlineSeconds", minimum=1)
    if raw.get("ttlSecondsAfterFinished") is not None:
        run["ttlSecondsAfterFinished"] = _int(raw["ttlSecondsAfterFinished"], f"{field}.ttlSecondsAfterFinished",
                                              minimum=0)
    if raw.get("suspend"):
        run["suspend"] = True
    if raw.get("schedulingPolicy"):
        total = sum(int(s["replicas"]) for s in replica_specs.values())
        run["schedulingPolicy"] = _scheduling_policy(raw["schedulingPolicy"], total, warnings)
    for key in raw:
        if key not in ("cleanPodPolicy", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished",
                       "suspend", "schedulingPolicy", "managedBy"):
            warnings.append(FieldWarning(f"{field}.{key}", "dropped: not a field of TFJob v1's runPolicy"))
    return run


def _managed_by(raw: Any, warnings: list[FieldWarning]) -> Optional[str]:
    """TrainingJob's spec.managedBy for TFJob's runPolicy.managedBy: none for Kubeflow's own controller."""
    field = "spec.runPolicy.managedBy"
    if not raw:
        return None
    if raw == KUBEFLOW_CONTROLLER:
        warnings.append(FieldWarning(field, f"dropped: {KUBEFLOW_CONTROLLER} is Kubeflow's training-operator; the "
                                            f"TrainingJob is run by tensorgrid's operator ({spec_lib.CONTROLLER_NAME})"))
        return None
    warnings.append(FieldWarning(field, f"becomes spec.managedBy {raw!r}: tensorgrid's operator leaves the job to "
                                        f"that controller, which must know TrainingJob"))
    return str(raw)


def _scheduling_policy(raw: Mapping[str, Any], total: int, warnings: list[FieldWarning]) -> dict[str, Any]:
    field = "spec.runPolicy.schedulingPolicy"
    policy: dict[str, Any] = {}
    if raw.get("minAvailable") is not None:
        minimum = _int(raw["minAvailable"], f"{field}.minAvailable", minimum=1)
        if minimum > total:
            raise ConversionError(f"{field}.minAvailable", f"{minimum} is more than the job's {total} replicas "
                                                           f"in all; valid: 1 to {total}")
        policy["minAvailable"] = minimum
    for key in ("queue", "priorityClass"):
        if raw.get(key):
            policy[key] = str(raw[key])
    if raw.get("scheduleTimeoutSeconds") is not None:
        policy["scheduleTimeoutSeconds"] = _int(raw["scheduleTimeoutSeconds"], f"{field}.scheduleTimeoutSeconds",
                                                minimum=1)
    if raw.get("minResources"):
        warnings.append(FieldWarning(f"{field}.minResources", "dropped: the operator's PodGroup asks for minAvailable "
                                                          "pods, not for an amount of resources"))
    for key in raw:
        if key not in ("minAvailable", "queue", "priorityClass", "scheduleTimeoutSeconds", "minResources"):
            warnings.append(FieldWarning(f"{field}.{key}", "dropped: not a field of TFJob v1's schedulingPolicy"))
    return policy


def _success_policy(raw: Any, replica_specs: Mapping[spec_lib.ReplicaType, Any],
                    warnings: list[FieldWarning]) -> spec_lib.SuccessPolicy:
    if raw in (None, ""):
        return spec_lib.SuccessPolicy.CHIEF
    if raw != spec_lib.SuccessPolicy.ALL_WORKERS.value:
        raise ConversionError("spec.successPolicy", f"unsupported value {raw!r}; valid: \"\" (the chief, else "
                                                    f"worker 0) or AllWorkers")
    if spec_lib.ReplicaType.CHIEF in replica_specs:
        warnings.append(FieldWarning("spec.successPolicy", "AllWorkers becomes Chief: a TFJob with a Chief (or Master) "
                                                       "succeeds when the chief does, whatever its successPolicy, "
                                                       "where a TrainingJob's AllWorkers would wait for every "
                                                       "worker too"))
        return spec_lib.SuccessPolicy.CHIEF
    return spec_lib.SuccessPolicy.ALL_WORKERS


def _semantic_warnings(replica_specs: Mapping[spec_lib.ReplicaType, Mapping[str, Any]]) -> list[FieldWarning]:
    """The differences in behaviour that no field of the TrainingJob can undo."""
    warnings: list[FieldWarning] = []
    for rtype, entry in replica_specs.items():
        field = f"spec.tfReplicaSpecs.{rtype.value}.restartPolicy"
        policy = entry["restartPolicy"]
        if policy == spec_lib.RestartPolicy.EXIT_CODE.value:
            warnings.append(FieldWarning(field, "ExitCode retries fewer codes: crash signals (132 SIGILL, 134 SIGABRT, "
                                            "135 SIGBUS, 136 SIGFPE, 139 SIGSEGV, ...) are permanent here, where "
                                            "TFJob retries every code of 128 or more"))
        elif policy in (spec_lib.RestartPolicy.ON_FAILURE.value, spec_lib.RestartPolicy.ALWAYS.value):
            warnings.append(FieldWarning(field, f"{policy}: a retry is a new pod the operator creates (same name, "
                                            f"emptyDir volumes and node not kept), not a container the kubelet "
                                            f"restarts in place"))
    if spec_lib.ReplicaType.EVALUATOR in replica_specs:
        warnings.append(FieldWarning("spec.tfReplicaSpecs.Evaluator", "the evaluator is not in TF_CONFIG's cluster here "
                                                                  "(TensorFlow refuses one there), and its failure "
                                                                  "does not fail the job as it does a TFJob's"))
    if sum(int(entry["replicas"]) for entry in replica_specs.values()) == 1:
        warnings.append(FieldWarning("spec.tfReplicaSpecs", "a single replica gets TF_CONFIG here (a one-task cluster); "
                                                        "a TFJob sets none for non-distributed training"))
    return warnings


def _keep_the_image_user(replica_specs: Mapping[spec_lib.ReplicaType, Mapping[str, Any]]) -> list[FieldWarning]:
    """``runAsNonRoot: false`` in each template that does not say who it runs as: a TFJob's pods run as
    their image's user, root included, where the operator's default (resources/pod_security.py) is
    non-root, which an image running as root (as TensorFlow's do) could not start under."""
    kept: list[str] = []
    for rtype, entry in replica_specs.items():
        pod_spec = entry["template"]["spec"]
        contexts = [pod_spec.get("securityContext") or {}] + [
            c.get("securityContext") or {} for key in ("initContainers", "containers") for c in pod_spec.get(key) or []]
        if any("runAsNonRoot" in context or "runAsUser" in context for context in contexts):
            continue
        pod_spec["securityContext"] = {**(pod_spec.get("securityContext") or {}), "runAsNonRoot": False}
        kept.append(rtype.value)
    if not kept:
        return []
    return [FieldWarning(f"spec.tfReplicaSpecs.{{{','.join(kept)}}}.template.spec.securityContext",
                         "runAsNonRoot: false written, as a TFJob's pods run as their image's user (root "
                         "included) where TrainingJob's default is non-root; remove it when the image's USER is a "
                         "numeric non-root uid, or Pod Security's restricted level refuses the pods")]


def _int(value: Any, field: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConversionError(field, f"{value!r}: must be an integer >= {minimum}")
    return value


@dataclasses.dataclass(frozen=True)
class DocumentWarning:
    """A warning about one TFJob of a stream of documents: which one, and what."""

    document: str
    """The document, as ``describe`` names it."""
    warning: FieldWarning

    def __str__(self) -> str:
        return f"{self.document}: {self.warning}"


def describe(document: Any, where: str) -> str:
    """How messages name a document: where it is in the stream, then its kind and name when it has them."""
    if not isinstance(document, Mapping):
        return where
    meta = document.get("metadata")
    if not isinstance(meta, Mapping):
        meta = {}
    name = meta.get("name") or meta.get("generateName") or "(no name)"
    namespace = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{where} ({document.get('kind')} {namespace}{name})"


def convert_documents(documents: Sequence[Any]) -> tuple[list[Any], list[DocumentWarning]]:
    """Every TFJob of ``documents`` converted (also the items of a ``List`` or ``TFJobList``), every other
    document as it is.

    Raises ``ConversionError`` whose ``document`` names the document (``document 2 (TFJob team/mnist)``).
    """
    converted: list[Any] = []
    warnings: list[DocumentWarning] = []
    for position, document in enumerate(documents, start=1):
        where = f"document {position}"
        if isinstance(document, Mapping) and document.get("kind") in ("List", TFJOB_LIST_KIND) \
                and isinstance(document.get("items"), list):
            items = [_convert_one(item, f"{where} item {index}", warnings)
                     for index, item in enumerate(document["items"], start=1)]
            converted.append({**document, "apiVersion": "v1", "kind": "List", "items": items})
        else:
            converted.append(_convert_one(document, where, warnings))
    return converted, warnings


def _convert_one(document: Any, where: str, warnings: list[DocumentWarning]) -> Any:
    if not is_tfjob(document):
        return document
    named = describe(document, where)
    try:
        conversion = convert_tfjob(document)
    except ConversionError as e:
        raise ConversionError(e.field, e.reason, named) from None
    warnings.extend(DocumentWarning(named, w) for w in conversion.warnings)
    return conversion.training_job
