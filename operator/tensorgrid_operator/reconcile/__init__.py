"""Every decision of the operator, pure: (job, pods, Services, now) -> Plan, with no I/O, no kopf, no API client.

``reconcile`` is the flow of one pass (read the status, parse the spec, take the
branches, observe, decide, create); ``plans`` what a pass produces and the scratch
state it works in; ``outcomes`` what the job's policies do when replicas or the job
end, with their verdicts in ``policies``; ``jobstatus`` the status a pass writes, with
``finished_replicas`` its compact record of finished replicas; ``creation`` what the
API server's refusals to create make of a plan; ``podview`` how a pod is read;
``terminating`` pods stuck Terminating; ``progress`` status.progress from the job's
metrics pages; ``podgroup_status`` a gang scheduler's PodGroup status in the job's;
``pod_group_size`` the PodGroup's ``minMember`` of a scaled job;
and what a pass may trust of the operator's watches: ``indexed`` (what kopf's indexes
keep of each object), ``observed`` (whether they show the operator's own last writes)
and ``owned_objects`` (which of a job's other objects to create again). The tests run
these as tables, without a cluster (tests/operator/reconcile).
"""
