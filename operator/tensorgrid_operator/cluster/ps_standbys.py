"""Creating a job's PS standbys (``spec.replicaSpecs.PS.replication.standby``): the API calls and what is said.

Why apart from ``ensure_objects``: a standby needs a certificate of the job's CA before its pod can
serve the PS (``certificate_secrets``, as a replica's pod does), then its Deployment, Service and
NetworkPolicy (``resources.ps_standby``). They are made once per operator run, like the TensorBoard's
(Deployments and Services without the job's label are not watched); the Deployment brings its pod
back by itself. A refusal is said once per distinct message (a Warning event) and tried again at the
next pass; it does not stop the job's pods, whose PS then trains without its replica until the
standby exists (the runtime logs it and retries).
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Mapping

from tensorgrid_operator.api import ps_replication
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.cluster import certificate_secrets
from tensorgrid_operator.cluster import kube as kube_lib
from tensorgrid_operator.reconcile import owned_objects
from tensorgrid_operator.resources import cert_manager
from tensorgrid_operator.resources import ps_standby

Call = Callable[..., Awaitable[Any]]
Say = Callable[[str, str, str], None]
FINISHED_STATES = ("Succeeded", "Failed")
DONE = ("PSStandbys", "")
"""``Upkeep.made`` holds this once every standby's objects exist: later passes call nothing."""


async def ensure(kube: kube_lib.Kube, call: Call, say: Say, job: Mapping[str, Any], upkeep: owned_objects.Upkeep,
                 with_network_policy: bool, certificates: cert_manager.CertManagerSettings) -> None:
    """Make the job's standbys' certificates, Deployments, Services and NetworkPolicies that are missing."""
    if DONE in upkeep.made or (job.get("status") or {}).get("state") in FINISHED_STATES:
        return
    try:
        job_spec = spec_lib.parse_spec(job.get("spec") or {})
    except ValueError:
        return  # the reconcile fails the job for its spec
    indices = ps_standby.standby_indices(job_spec)
    if not indices:
        upkeep.made.add(DONE)
        return
    try:
        certs = await certificate_secrets.for_job(kube, call, say, job, False, certificates)
        for index in indices:
            name = ps_replication.standby_name(job["metadata"]["name"], index)
            ps_pod = spec_lib.pod_name(job["metadata"]["name"], spec_lib.ReplicaKey(spec_lib.ReplicaType.PS, index))
            # Its certificate names its PS too: peers dial the PS's name once the standby has taken over.
            await certificate_secrets.replica_secret(kube, call, say, job, certs, name, False, certificates,
                                                     serves_as=[ps_pod])
    except Exception:  # noqa: BLE001 - certificate_secrets said why (a Warning event); the next pass tries again,
        # and the job's pods must not wait for a standby
        return
    try:
        wanted = ps_standby.job_objects(job, job_spec, with_network_policy, certs.job_wide)
    except ValueError as e:
        _say_once(say, upkeep, f"could not make the PS standby: {e}")
        return
    todo = owned_objects.creations(wanted, set(), upkeep)
    create = {"NetworkPolicy": kube.create_network_policy, "Deployment": kube.create_deployment,
              "Service": kube.create_service}
    results = await asyncio.gather(*(call(create[c.kind], c.obj) for c in todo), return_exceptions=True)
    errors = []
    for item, result in zip(todo, results):
        if isinstance(result, BaseException):
            if not isinstance(result, Exception):
                raise result
            code, message = kube_lib.error_details(result)
            errors.append(f"could not create {item.kind} {item.name} of the PS standby: {message} (HTTP {code})")
            continue
        owned_objects.created(upkeep, item)
    if errors:
        _say_once(say, upkeep, "; ".join(errors))
        return
    upkeep.made.add(DONE)
    say("Normal", "CreatedPSStandby", f"standby for {len(indices)} PS: " + ", ".join(
        ps_replication.standby_name(job["metadata"]["name"], i) for i in indices))


def _say_once(say: Say, upkeep: owned_objects.Upkeep, message: str) -> None:
    if upkeep.ps_standby_error != message:
        say("Warning", "FailedCreatePSStandby", message)
    upkeep.ps_standby_error = message
