"""The operator's settings: one dataclass filled from the command line (or by tests)."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from tensorgrid_operator.resources import cert_manager
from tensorgrid_operator.resources import podgroups


@dataclasses.dataclass
class Settings:
    namespaces: tuple[str, ...] = ()
    """Namespaces to watch; empty means every namespace."""
    metrics_port: Optional[int] = 8080
    """Port of the Prometheus endpoint (/metrics on all interfaces); ``None`` turns it off, 0 picks a free one."""
    liveness_port: Optional[int] = 8081
    """Port of kopf's liveness endpoint (/healthz); ``None`` turns it off."""
    peering: Optional[str] = "tensorgrid-operator"
    """kopf peering object name; replicas with the same name elect one active operator. ``None``: standalone."""
    peering_required: bool = False
    """Whether peering was asked for explicitly (``--peering``): then a missing peering object is an
    error. Otherwise the operator runs with peering only when the object exists (the chart creates it)
    and standalone when it does not, so one operator started by hand works with no flags."""
    leader_election_lease: Optional[str] = None
    """Name of the coordination.k8s.io Lease the replicas elect their leader on (``--leader-election``);
    only its holder reconciles, and kopf runs standalone. ``None``: kopf peering or standalone, as above."""
    leader_election_namespace: Optional[str] = None
    """Namespace of that Lease (the operator's own, $POD_NAMESPACE, unless given)."""
    lease_duration_seconds: int = 15
    """How long a holder's Lease lasts unrenewed before another replica takes it over (client-go's 15 s)."""
    priority: Optional[int] = None
    """Peering priority (higher wins); ``None`` draws a random one so two replicas never tie."""
    kubeconfig: Optional[str] = None
    """Path of a kubeconfig; ``None`` uses $KUBECONFIG, ~/.kube/config, or in-cluster credentials."""
    resync_seconds: float = 60.0
    """A job is reconciled at least this often even when no event arrives (a safety net, not the mechanism)."""
    api_workers: int = 16
    """Threads making Kubernetes API calls (the client library is synchronous)."""
    retry_delay_seconds: float = 10.0
    """Wait before a failed replica (or one whose creation failed) is created again; doubles each time."""
    max_retry_delay_seconds: float = 300.0
    """The retry wait never grows past this."""
    watch_server_timeout_seconds: int = 300
    """The API server ends each watch after this long (whole seconds: the API's timeoutSeconds is an
    integer); kopf resumes it from the last resourceVersion."""
    watch_client_timeout_seconds: float = 330.0
    """The operator gives up on a watch the server did not end in time (a stalled connection) and watches anew."""
    watch_connect_timeout_seconds: float = 30.0
    """A watch connection that does not open within this long is tried again."""
    watch_worker_idle_seconds: float = 0.5
    """kopf keeps a task per watched object (pod, Service, job) from its event until this long after
    it, holding the object's last event whole (a pod parsed is about 25 KB, plus its TF_CONFIG). kopf's
    default of 5 s keeps thousands of them alive while a thousand jobs start; the next event of an
    object only starts a new task."""
    stuck_terminating_seconds: float = 300.0
    """A pod still terminating this long after its grace period is reported stuck (condition, Warning event)."""
    force_delete_stuck_pods: bool = False
    """Delete pods stuck terminating with a grace period of 0, so their replicas are created again."""
    network_policy: bool = True
    """Create a NetworkPolicy per job: ingress only from the job's pods, and to the metrics port from
    ``network_policy_metrics_from``."""
    network_policy_metrics_from: tuple[Mapping[str, Any], ...] = ()
    """NetworkPolicy peers allowed to the training pods' metrics port (Prometheus, the operator's pods)."""
    ps_disruption_budget: bool = True
    """Create a PodDisruptionBudget per job that keeps voluntary evictions off its Ready parameter servers."""
    ps_anti_affinity: str = "off"
    """``off``, ``preferred`` or ``required``: anti-affinity of a job's parameter servers across nodes."""
    spread_over_nodes: bool = True
    """Spread each job's pods over nodes (a topology spread preference by hostname), unless a template
    sets its own affinity or topologySpreadConstraints."""
    node_lost_toleration_seconds: Optional[int] = 30
    """Seconds a job's pod stays on a NotReady or unreachable node before Kubernetes evicts it;
    ``None`` leaves Kubernetes' default (300)."""
    gang: podgroups.GangSettings = podgroups.GangSettings()
    """Gang scheduling: a PodGroup per job for Volcano or scheduler-plugins, or none (``--gang-scheduler``)."""
    certificates: cert_manager.CertManagerSettings = cert_manager.CertManagerSettings()
    """Who issues the jobs' certificates: the operator (a CA per job) or cert-manager (``--certificate-issuer``)."""
    progress_interval_seconds: float = 30.0
    """How often a running job's metrics are read into ``status.progress``; 0 turns progress off."""
    progress_timeout_seconds: float = 5.0
    """The longest wait for one task's metrics page."""
    verbose: bool = False
    """Log every reconcile at debug level."""
    serve_tfjob: bool = False
    """Serve and reconcile Kubeflow's ``kubeflow.org/v1 TFJob`` too (``--serve-tfjob``; the chart's
    ``kubeflowTFJob.enabled``): refused unless the TFJob CRD is the chart's (api/tfjob_serving.py)."""
    remove_finalizers: bool = False
    """Instead of running, remove the operator's finalizer from every TrainingJob and exit."""
