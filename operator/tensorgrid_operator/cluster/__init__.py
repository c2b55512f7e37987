"""Every call the operator makes to the API server, and what it keeps of the answers; no kopf.

``kube`` (the calls themselves, synchronous, with the outcomes that are not errors
folded in), ``running_operator`` (what a running operator holds: the API client, the
thread pools the calls and the pure reconcile run on, per-job bookkeeping),
``known_jobs`` (each job as last read or written), ``ensure_objects`` (a job's
NetworkPolicy, PodDisruptionBudget, PodGroup and cert-manager objects, created before
its pods), ``certificate_secrets`` (a job's CA and each new pod's certificate, in their
Secrets before the pod) and ``uninstall`` (the operator's finalizer stripped from every
job). The decisions are ``reconcile``'s and the objects ``resources``'; the controller
hands these modules a way to post Events, so kopf stays in ``controller``.
"""
