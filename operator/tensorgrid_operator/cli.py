"""``tensorgrid-operator`` / ``python -m tensorgrid_operator``: parse flags, then run the kopf operator.

With ``--remove-finalizers`` it strips the operator's finalizer from every TrainingJob
instead, and exits (``uninstall``): the step before or after uninstalling the operator.
``tensorgrid-operator convert-tfjob -f FILE`` converts Kubeflow TFJobs to TrainingJobs
(``api/tfjob_conversion.py``) and exits. ``tensorgrid-operator tensorboard JOB`` runs (or, with
``--print``, prints) the ``kubectl port-forward`` that opens the job's TensorBoard (``spec.tensorboard``).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shlex
import shutil
import sys
from typing import Optional, Sequence, TextIO

import yaml

from tensorgrid_operator.api import tfjob_conversion
from tensorgrid_operator.cluster import uninstall
from tensorgrid_operator import config
from tensorgrid_operator.resources import cert_manager
from tensorgrid_operator.resources import jobobjects
from tensorgrid_operator.resources import node_placement
from tensorgrid_operator.resources import podgroups
from tensorgrid_operator.resources import tensorboard

# The subcommand that converts Kubeflow TFJobs instead of running the operator.
CONVERT_TFJOB = "convert-tfjob"
# The subcommand that opens a job's TensorBoard through kubectl port-forward.
TENSORBOARD = "tensorboard"


def _port(text: str) -> Optional[int]:
    return None if text.lower() in ("", "off", "none") else int(text)


def parse_args(argv: Optional[Sequence[str]] = None) -> config.Settings:
    defaults = config.Settings()
    parser = argparse.ArgumentParser(
        prog="tensorgrid-operator",
        description="Reconcile TrainingJobs (tensorgrid.io/v1) into parameter-server and worker pods. "
                    f"'tensorgrid-operator {CONVERT_TFJOB} -f FILE' converts Kubeflow TFJobs to TrainingJobs "
                    "instead (see its --help).")
    parser.add_argument("-n", "--namespace", action="append", default=[], dest="namespaces",
                        help="watch this namespace (repeatable; default: all namespaces)")
    parser.add_argument("--metrics-port", type=_port, default=defaults.metrics_port,
                        help=f"Prometheus /metrics port, or 'off' (default {defaults.metrics_port})")
    parser.add_argument("--liveness-port", type=_port, default=defaults.liveness_port,
                        help=f"liveness probe port for /healthz, or 'off' (default {defaults.liveness_port})")
    parser.add_argument("--peering", default=None,
                        help="kopf peering name: replicas sharing it keep one active (needs crds/kopf-peering.yaml "
                             "and the peering object). Default: peering on the object "
                             f"'{defaults.peering}' if it exists, else standalone")
    parser.add_argument("--standalone", action="store_true",
                        help="no peering: for a single replica, or clusters without the peering CRDs")
    parser.add_argument("--leader-election", default=None, metavar="LEASE",
                        help="elect one active replica on this coordination.k8s.io Lease instead of kopf peering: "
                             "only its holder reconciles, the others stand by (docs/operator.md, High availability)")
    parser.add_argument("--leader-election-namespace", default=None,
                        help="namespace of the Lease (default: $POD_NAMESPACE, the operator's own)")
    parser.add_argument("--lease-duration-seconds", type=int, default=defaults.lease_duration_seconds,
                        help="a Lease not renewed for this long is taken over by a standby "
                             f"(default {defaults.lease_duration_seconds})")
    parser.add_argument("--priority", type=int, default=None,
                        help="peering priority, the highest one is active (default: random)")
    parser.add_argument("--kubeconfig", default=None,
                        help="kubeconfig path (default: $KUBECONFIG, ~/.kube/config, or in-cluster credentials)")
    parser.add_argument("--resync-seconds", type=float, default=defaults.resync_seconds,
                        help=f"reconcile each job at least this often (default {defaults.resync_seconds:g})")
    parser.add_argument("--api-workers", type=int, default=defaults.api_workers,
                        help=f"concurrent Kubernetes API calls (default {defaults.api_workers})")
    parser.add_argument("--retry-delay-seconds", type=float, default=defaults.retry_delay_seconds,
                        help="wait before a failed replica, or one whose creation failed, is created again; doubles "
                             f"with each failure of that replica (default {defaults.retry_delay_seconds:g})")
    parser.add_argument("--max-retry-delay-seconds", type=float, default=defaults.max_retry_delay_seconds,
                        help=f"the longest retry wait (default {defaults.max_retry_delay_seconds:g})")
    parser.add_argument("--stuck-terminating-seconds", type=float, default=defaults.stuck_terminating_seconds,
                        help="report a pod still terminating this long after its grace period (its node is likely "
                             f"down or NotReady) on its job (default {defaults.stuck_terminating_seconds:g})")
    parser.add_argument("--force-delete-stuck-pods", action="store_true",
                        help="delete such pods with a grace period of 0 so their replicas are created again (if the "
                             "node is only cut off, the old process may run on beside its replacement)")
    parser.add_argument("--network-policy", action=argparse.BooleanOptionalAction, default=defaults.network_policy,
                        help="create a NetworkPolicy per job: ingress to its pods only from its own pods, and to "
                             "their metrics port from --network-policy-metrics-from (default on)")
    parser.add_argument("--network-policy-metrics-from", default="[]",
                        help="JSON list of NetworkPolicy peers (podSelector, namespaceSelector, ipBlock) allowed to "
                             "the training pods' metrics port: Prometheus and the operator's own pods (default: none)")
    parser.add_argument("--ps-disruption-budget", action=argparse.BooleanOptionalAction,
                        default=defaults.ps_disruption_budget,
                        help="create a PodDisruptionBudget per job keeping voluntary evictions (drains) off its Ready "
                             "parameter servers (default on)")
    parser.add_argument("--ps-anti-affinity", choices=jobobjects.ANTI_AFFINITY_MODES, default=defaults.ps_anti_affinity,
                        help="keep a job's parameter servers on different nodes, as a preference or a requirement, "
                             "unless the PS template has its own podAntiAffinity (default off)")
    parser.add_argument("--spread-pods", action=argparse.BooleanOptionalAction, default=defaults.spread_over_nodes,
                        help="spread each job's pods over nodes (a topology spread preference by hostname) unless a "
                             "template sets its own affinity or topologySpreadConstraints (default on)")
    parser.add_argument("--node-lost-toleration-seconds", default=str(defaults.node_lost_toleration_seconds),
                        help="seconds a job's pod stays on a NotReady or unreachable node before Kubernetes evicts it "
                             "(its tolerations of those taints), or 'off' for Kubernetes' 300 (default "
                             f"{defaults.node_lost_toleration_seconds})")
    parser.add_argument("--gang-scheduler", choices=podgroups.GANG_SCHEDULERS, default=defaults.gang.scheduler,
                        help="create a PodGroup per job for this gang scheduler from spec.runPolicy.schedulingPolicy, "
                             "and put the job's pods in it, so they start all together or not at all (default none)")
    parser.add_argument("--gang-scheduler-name", default=defaults.gang.scheduler_name,
                        help="the training pods' schedulerName under --gang-scheduler (default: volcano, or "
                             f"{podgroups.DEFAULT_SCHEDULER_PLUGINS_NAME} for scheduler-plugins); a template's own "
                             "schedulerName wins")
    parser.add_argument("--gang-status-interval-seconds", type=float, default=defaults.gang.status_interval_seconds,
                        help="under --gang-scheduler, read a job's PodGroup into status.podGroup at most this often "
                             "while its pods do not all run; 0 turns it off (default "
                             f"{defaults.gang.status_interval_seconds:g})")
    parser.add_argument("--gang-unscheduled-seconds", type=float, default=defaults.gang.unscheduled_seconds,
                        help="under --gang-scheduler, a PodGroup not placed for this long sets the job's condition "
                             "PodGroupScheduled False and a Warning event says why (default "
                             f"{defaults.gang.unscheduled_seconds:g})")
    certificates = defaults.certificates
    parser.add_argument("--certificate-issuer", choices=cert_manager.ISSUERS, default=certificates.issuer,
                        help="who issues the certificates of the jobs' pods: the operator (a CA per job, signed here) "
                             "or cert-manager (a CA per job as cert-manager Issuers and Certificates; cert-manager "
                             f"must be installed) (default {certificates.issuer})")
    parser.add_argument("--cert-manager-issuer", default="",
                        help="with --certificate-issuer cert-manager: an existing ClusterIssuer/<name> or "
                             "Issuer/<name> (in each job's namespace) that signs every job's replicas, instead of a CA "
                             "per job (then any job's certificate is let in by the others)")
    parser.add_argument("--cert-manager-duration", default=certificates.duration,
                        help=f"how long a replica's cert-manager certificate is valid (default {certificates.duration})")
    parser.add_argument("--cert-manager-renew-before", default=certificates.renew_before,
                        help="how long before its end cert-manager renews a replica's certificate (default "
                             f"{certificates.renew_before})")
    parser.add_argument("--cert-manager-ca-duration", default=certificates.ca_duration,
                        help=f"how long a job's cert-manager CA is valid (default {certificates.ca_duration})")
    parser.add_argument("--progress-interval-seconds", type=float, default=defaults.progress_interval_seconds,
                        help="read a running job's global step from its chief's and parameter servers' metrics into "
                             f"status.progress this often; 0 turns it off (default "
                             f"{defaults.progress_interval_seconds:g})")
    parser.add_argument("--remove-finalizers", action="store_true",
                        help="do not run: remove the operator's finalizer from every TrainingJob (in the --namespace "
                             "namespaces, or all) and exit, so that jobs and namespaces can be deleted without an "
                             "operator (run it once no operator runs: the Helm chart's uninstall does)")
    parser.add_argument("--serve-tfjob", action="store_true",
                        help="also serve Kubeflow's kubeflow.org/v1 TFJob (the chart's kubeflowTFJob.enabled): each "
                             "runs as a TrainingJob it owns, its status written as Kubeflow writes it; the operator "
                             "exits with status 3 unless the TFJob CRD is the one the chart installs")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    args = parser.parse_args(argv)
    if not 0 <= args.retry_delay_seconds <= args.max_retry_delay_seconds:
        parser.error(f"--retry-delay-seconds {args.retry_delay_seconds:g} must be >= 0 and <= "
                     f"--max-retry-delay-seconds {args.max_retry_delay_seconds:g}")
    try:
        metrics_peers = jobobjects.parse_metrics_peers(args.network_policy_metrics_from)
    except ValueError as e:
        parser.error(str(e))
    try:
        lost_node_seconds = node_placement.parse_toleration_seconds(args.node_lost_toleration_seconds)
    except ValueError as e:
        parser.error(str(e))
    if args.stuck_terminating_seconds < 0:
        parser.error(f"--stuck-terminating-seconds {args.stuck_terminating_seconds:g} must be >= 0")
    if args.progress_interval_seconds < 0:
        parser.error(f"--progress-interval-seconds {args.progress_interval_seconds:g} must be >= 0 (0: off)")
    try:
        certificate_settings = cert_manager.CertManagerSettings(
            args.certificate_issuer,
            cert_manager.IssuerRef.parse(args.cert_manager_issuer) if args.cert_manager_issuer else None,
            args.cert_manager_duration, args.cert_manager_renew_before, args.cert_manager_ca_duration)
    except ValueError as e:
        parser.error(str(e))
    try:
        gang = podgroups.GangSettings(args.gang_scheduler, args.gang_scheduler_name,
                                      args.gang_status_interval_seconds, args.gang_unscheduled_seconds)
    except ValueError as e:
        parser.error(str(e))
    lease_namespace = args.leader_election_namespace or os.environ.get("POD_NAMESPACE")
    if args.leader_election is not None:
        if args.peering is not None:
            parser.error(f"--leader-election {args.leader_election} and --peering {args.peering} both elect the active "
                         f"replica: give one of them")
        if not lease_namespace:
            parser.error(f"--leader-election {args.leader_election} needs --leader-election-namespace (or "
                         f"$POD_NAMESPACE, which the chart sets): the namespace the Lease lives in")
    if args.lease_duration_seconds < 2:
        parser.error(f"--lease-duration-seconds {args.lease_duration_seconds} must be >= 2")
    return config.Settings(
        namespaces=tuple(args.namespaces),
        metrics_port=args.metrics_port,
        liveness_port=args.liveness_port,
        peering=None if args.standalone or args.leader_election else (args.peering or defaults.peering),
        leader_election_lease=args.leader_election,
        leader_election_namespace=lease_namespace if args.leader_election else None,
        lease_duration_seconds=args.lease_duration_seconds,
        peering_required=args.peering is not None and not args.standalone,
        priority=args.priority,
        kubeconfig=args.kubeconfig,
        resync_seconds=args.resync_seconds,
        api_workers=args.api_workers,
        retry_delay_seconds=args.retry_delay_seconds,
        max_retry_delay_seconds=args.max_retry_delay_seconds,
        network_policy=args.network_policy,
        network_policy_metrics_from=metrics_peers,
        ps_disruption_budget=args.ps_disruption_budget,
        ps_anti_affinity=args.ps_anti_affinity,
        spread_over_nodes=args.spread_pods,
        node_lost_toleration_seconds=lost_node_seconds,
        stuck_terminating_seconds=args.stuck_terminating_seconds,
        force_delete_stuck_pods=args.force_delete_stuck_pods,
        progress_interval_seconds=args.progress_interval_seconds,
        gang=gang,
        certificates=certificate_settings,
        verbose=args.verbose,
        serve_tfjob=args.serve_tfjob,
        remove_finalizers=args.remove_finalizers,
    )


def convert_tfjob(argv: Sequence[str], stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    """``convert-tfjob``: the TrainingJobs of the TFJobs in a file (every other document as it is) on
    ``stdout``, a warning per field that changes meaning or is dropped on ``stderr``; 1 and an error
    naming the document and field, with nothing on ``stdout``, when one cannot be converted."""
    parser = argparse.ArgumentParser(
        prog=f"tensorgrid-operator {CONVERT_TFJOB}",
        description="Convert Kubeflow TFJobs (kubeflow.org/v1, training-operator v1.9) to TrainingJobs "
                    "(tensorgrid.io/v1), writing TFJob's defaults out where TrainingJob's differ; other "
                    "documents pass through. See docs/coming-from-tfjob.md.")
    parser.add_argument("-f", "--filename", required=True,
                        help="a YAML file of one or more documents (a List of TFJobs too), or '-' for stdin")
    args = parser.parse_args(argv)
    try:
        text = stdin.read() if args.filename == "-" else pathlib.Path(args.filename).read_text()
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
        converted, warnings = tfjob_conversion.convert_documents(documents)
    except (OSError, yaml.YAMLError, tfjob_conversion.ConversionError) as e:
        print(f"error: {args.filename}: {e}", file=stderr)
        return 1
    for warning in warnings:
        print(f"warning: {warning}", file=stderr)
    stdout.write(yaml.safe_dump_all(converted, sort_keys=False, explicit_start=len(converted) > 1))
    return 0


def open_tensorboard(argv: Sequence[str], stdout: TextIO, stderr: TextIO) -> int:
    """``tensorboard JOB``: the ``kubectl port-forward`` to the job's TensorBoard Service, printed
    (``--print``) or run in place of this process (until interrupted)."""
    parser = argparse.ArgumentParser(
        prog=f"tensorgrid-operator {TENSORBOARD}",
        description="Open the TensorBoard of a TrainingJob with spec.tensorboard.enabled: runs kubectl "
                    "port-forward to its Service <job>-tensorboard (docs/operator.md, TensorBoard for a job).")
    parser.add_argument("job", help="the TrainingJob's name")
    parser.add_argument("-n", "--namespace", default="default", help="the job's namespace (default: default)")
    parser.add_argument("--port", type=int, default=tensorboard.PORT,
                        help=f"the local port to open it on (default: {tensorboard.PORT})")
    parser.add_argument("--print", action="store_true", dest="print_only",
                        help="print the kubectl command instead of running it")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        print(f"error: --port {args.port} is not a TCP port (1-65535)", file=stderr)
        return 2
    command = tensorboard.port_forward_command(args.job, args.namespace, args.port)
    if args.print_only:
        print(shlex.join(command), file=stdout)
        return 0
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print(f"error: kubectl is not on PATH; run it yourself: {shlex.join(command)}", file=stderr)
        return 1
    print(f"TensorBoard of {args.namespace}/{args.job}: http://localhost:{args.port}/ (Ctrl-C ends it)",
          file=stderr, flush=True)
    os.execv(kubectl, command)


def main(argv: Optional[Sequence[str]] = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == [CONVERT_TFJOB]:
        sys.exit(convert_tfjob(arguments[1:], sys.stdin, sys.stdout, sys.stderr))
    if arguments[:1] == [TENSORBOARD]:
        sys.exit(open_tensorboard(arguments[1:], sys.stdout, sys.stderr))
    settings = parse_args(arguments)
    if settings.remove_finalizers:
        sys.exit(uninstall.run(settings.kubeconfig, settings.namespaces))
    from tensorgrid_operator.controller import registrations  # imports kopf: only when actually running

    registrations.run(settings)
