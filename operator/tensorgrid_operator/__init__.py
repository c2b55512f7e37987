"""tensorgrid-operator: runs TrainingJobs (tensorgrid.io/v1) as parameter-server training on Kubernetes.

The public surface is the command (``tensorgrid-operator`` or ``python -m
tensorgrid_operator``), the CRD in ``crds/``, and what is re-exported here. Inside, five
packages that are its layers, each importing only those below it (``.importlinter``):

- ``controller``: the kopf wiring, the only package that imports kopf: registrations,
  the job loop, applying a plan, the progress reader, peering, the operator's state;
- ``cluster``: every call to the API server (``kube``) and what a running operator holds
  to make them (``running_operator``); no kopf;
- ``reconcile``: every decision, pure: (job, pods, Services, now) -> ``plans.Plan``;
  no I/O, no kopf, no API client;
- ``resources``: pure builders of what a job owns (pods, Services, NetworkPolicy,
  PodDisruptionBudget, PodGroup, Kueue's labels, certificates);
- ``api``: the TrainingJob resource (spec, conditions, exit codes).

Beside them: ``cli`` and ``__main__`` (the command), ``config`` (the operator's
settings) and ``metrics`` (its Prometheus metrics). The operator never imports the
runtime package ``tensorgrid``: the two share contracts (TF_CONFIG, ports, labels), not
code.
"""

from tensorgrid_operator.cli import main
from tensorgrid_operator.config import Settings
from tensorgrid_operator.reconcile.plans import Plan

__all__ = ["Plan", "Settings", "main"]
__version__ = "0.1.0"
