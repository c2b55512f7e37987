"""tensorgrid-operator: runs TrainingJobs (tensorgrid.io/v1) as parameter-server training on Kubernetes.

The public surface is the command (``tensorgrid-operator`` or ``python -m
tensorgrid_operator``), the CRD in ``crds/``, and what is re-exported here. Inside:
``spec`` (names, labels, the typed spec), ``manifests`` (pods, Services, TF_CONFIG),
``exitcodes`` (the ExitCode policy table), ``reconcile`` (every decision, pure: the
flow of a pass, with ``plans`` for what a pass produces, ``outcomes`` for what the
policies do when replicas or the job end, ``policies`` for their verdicts, ``jobstatus``
for the status a pass writes, ``finished_replicas`` for its compact record of finished
replicas, ``podview`` for reading pods, ``conditions`` for Kubernetes-style conditions,
``creation`` for refused creations and ``terminating`` for pods stuck Terminating), ``progress`` (training
progress from the job's metrics), ``jobobjects`` (NetworkPolicy, PodDisruptionBudget,
pod defaults), ``observed`` (when kopf's indexes may be trusted), ``kube`` (API calls),
``metrics``, ``looplag`` (the event loop's lag), ``config``, and ``handlers`` (the only module that imports kopf). The operator never imports the runtime package
``tensorgrid``: the two share contracts (TF_CONFIG, ports, labels), not code.
"""

from tensorgrid_operator.cli import main
from tensorgrid_operator.config import Settings
from tensorgrid_operator.reconcile.plans import Plan

__all__ = ["Plan", "Settings", "main"]
__version__ = "0.1.0"
