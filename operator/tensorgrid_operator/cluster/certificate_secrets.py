"""Making sure a job's CA and each new pod's certificate are in their Secrets before the pod is: the API calls.

The certificates and Secrets themselves are ``job_certificates``'s; this module makes the
calls (on the operator's thread pool, through ``call``) and says what went wrong through
``say`` (an Event on the job), so kopf stays in the controller. A job's first pods cost one
creation of its CA's Secret and one of each replica's; a later pass that makes pods
(restarts, creations retried) reads the CA's Secret once, and each pod's Secret before
making it (a restarted pod finds its replica's). Nothing is kept in memory between
passes, so Secrets deleted by hand are seen at once.

Jobs an earlier operator started have the one Secret ``<job>-tls`` and no CA key: their
pods keep mounting it (:attr:`JobCertificates.job_wide`); a job gets per-replica
certificates when it is created again (``spec.replicaSpecs`` is immutable, so a job's
replicas are those it was created with).

With ``certificates.issuer: cert-manager`` (``cert_manager``) the operator signs nothing: each
new replica gets a cert-manager Certificate ``<pod>-tls`` instead, made at the same place,
and cert-manager writes the Secret. The pod is created at once, before cert-manager has
issued it: the kubelet does not start a pod whose Secret volume is missing, and tries the
mount again until it appears (a few seconds; ``FailedMount`` events on the pod meanwhile). A
job keeps the issuer it started with: one whose CA Secret the operator made goes on with the
operator's certificates in cert-manager mode (cert-manager would otherwise take that Secret
over), and one started with cert-manager's keeps the Secrets cert-manager issued in the
operator's mode (no new replica certificate can be made for it there).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Awaitable, Callable, Mapping, Optional, Sequence

from tensorgrid_operator.cluster import kube as kube_lib
from tensorgrid_operator.resources import cert_manager
from tensorgrid_operator.resources import job_certificates
from tensorgrid_operator.resources import manifests

Obj = dict[str, Any]
Call = Callable[..., Awaitable[Any]]
"""Runs a blocking API call ``fn(*args)`` off the event loop: ``await call(fn, *args)``."""
Say = Callable[[str, str, str], None]
"""Posts an Event on the job: ``say(type, reason, message)``."""
FAILED = "FailedCreateSecret"
"""The reason of the Warning event when a job's Secret cannot be made or is someone else's."""


class SecretError(RuntimeError):
    """A Secret the job needs is someone else's, or vanished as it was read (the message says which)."""


@dataclasses.dataclass(frozen=True)
class JobCertificates:
    """How one job's pods get their certificates."""

    authority: Optional[job_certificates.Authority] = None
    """The job's CA, which signs each replica's certificate (the operator's mode)."""
    issuer: Optional[cert_manager.IssuerRef] = None
    """What signs each replica's cert-manager Certificate (cert-manager's mode)."""
    issued_before: bool = False
    """The job started with cert-manager's certificates and the operator now signs its own: its replicas
    keep the Secrets cert-manager issued; one without cannot get a certificate."""

    @property
    def job_wide(self) -> bool:
        """Whether the job's pods all mount ``<job>-tls`` (started by an earlier operator)."""
        return self.authority is None and self.issuer is None and not self.issued_before


async def for_job(kube: kube_lib.Kube, call: Call, say: Say, job: Mapping[str, Any], first_pods: bool,
                  settings: cert_manager.CertManagerSettings = cert_manager.CertManagerSettings()) -> JobCertificates:
    """The job's certificates: its CA Secret read, or made; in cert-manager's mode, its issuer.

    A job's ``first_pods`` create ``<job>-ca`` at once (one call, not a read and a creation:
    at 1,000 new jobs, 1,000 calls fewer), or in cert-manager's mode call nothing; later passes
    read it first. A job without it that already made pods and owns ``<job>-tls`` is an earlier
    operator's: job-wide. A ``<job>-ca`` that is not the job's, or that does not hold a CA, stops
    the creation of pods, with a Warning event, raised as :class:`SecretError` or ``ValueError``.
    """
    meta = job["metadata"]
    name = job_certificates.ca_secret_name(meta["name"])
    if first_pods and settings.enabled:
        return JobCertificates(issuer=settings.replica_issuer(meta["name"]))
    secret = None if first_pods else await call(kube.get_secret, meta["namespace"], name)
    if secret is None and not first_pods:
        earlier = await call(kube.get_secret, meta["namespace"], manifests.job_wide_tls_secret_name(meta["name"]))
        if earlier is not None and job_certificates.owned_by(earlier, job):
            return JobCertificates()
    if settings.enabled and (secret is None or cert_manager.issued_by_cert_manager(secret)):
        return JobCertificates(issuer=settings.replica_issuer(meta["name"]))
    if secret is not None and cert_manager.issued_by_cert_manager(secret):
        return JobCertificates(issued_before=True)  # kept, not signed: no CA key here
    if secret is None:
        authority = await call(job_certificates.new_authority, job)
        created = await _create(kube, call, say, job_certificates.authority_secret(job, authority), "the job's CA")
        if created:
            return JobCertificates(authority)
        secret = await call(kube.get_secret, meta["namespace"], name)  # one of that name exists: whose?
    _check_owner(say, secret, job, name, "the job's CA")
    try:
        return JobCertificates(job_certificates.read_authority(secret or {}))
    except ValueError as e:
        say("Warning", FAILED, f"{e}: delete it (the job's pods that run keep working; restart the whole job "
                               f"so that every pod gets a certificate of the new CA)")
        raise


async def replica_secret(kube: kube_lib.Kube, call: Call, say: Say, job: Mapping[str, Any],
                         certificates: JobCertificates, pod_name: str, first_pods: bool,
                         settings: cert_manager.CertManagerSettings = cert_manager.CertManagerSettings(),
                         serves_as: Sequence[str] = ()) -> None:
    """Makes sure the Secret the new pod ``pod_name`` of ``job`` mounts exists (its replica's certificate,
    also naming the replicas of ``serves_as``: a PS's standby may become its PS), so the pod can start.

    An existing one of the job is kept: a pod made again shows its replica's certificate of
    before. On the job's first pods it is created at once, later read first (restarts
    find it). In cert-manager's mode the same goes for the replica's Certificate, and
    cert-manager writes the Secret. Raises (and says) what stops the pod: a Secret or
    Certificate of that name not the job's, or the API's refusal.
    """
    namespace, name = job["metadata"]["namespace"], manifests.replica_tls_secret_name(pod_name)
    what = f"replica {pod_name}'s certificate"
    if certificates.issuer is not None:
        await _replica_certificate(kube, call, say, job, pod_name, first_pods, settings, what, serves_as)
        return
    if certificates.issued_before:
        secret = await call(kube.get_secret, namespace, name)
        if secret is None or not cert_manager.issued_by_cert_manager(secret):
            message = (f"{what} cannot be made: the job started with certificates of cert-manager, and the operator "
                       f"now signs its own ({cert_manager.OPERATOR} mode), which the job's other pods would refuse: "
                       f"run the operator in {cert_manager.CERT_MANAGER} mode again, or create the job again")
            say("Warning", FAILED, message)
            raise SecretError(message)
        return
    authority = certificates.authority
    if authority is None:  # job-wide: the pod mounts <job>-tls
        return
    secret = None if first_pods else await call(kube.get_secret, namespace, name)
    if secret is None:
        made = await call(job_certificates.replica_secret, job, authority, pod_name, serves_as)
        if await _create(kube, call, say, made, what):
            return
        secret = await call(kube.get_secret, namespace, name)
    _check_owner(say, secret, job, name, what)


async def _replica_certificate(kube: kube_lib.Kube, call: Call, say: Say, job: Mapping[str, Any], pod_name: str,
                               first_pods: bool, settings: cert_manager.CertManagerSettings, what: str,
                               serves_as: Sequence[str]) -> None:
    """The replica's cert-manager Certificate ``<pod>-tls``: kept when the job's, else created."""
    namespace, name = job["metadata"]["namespace"], cert_manager.replica_certificate_name(pod_name)
    found = None if first_pods else await call(kube.get_cert_manager_object, "Certificate", namespace, name)
    if found is None:
        try:
            if await call(kube.create_cert_manager_object,
                          cert_manager.replica_certificate(job, pod_name, settings, serves_as)):
                return
        except Exception as e:
            code, message = kube_lib.error_details(e)
            say("Warning", FAILED, f"could not create Certificate {name} for {what}: {message} ({code})")
            raise
        found = await call(kube.get_cert_manager_object, "Certificate", namespace, name)
    _check_owner(say, found, job, name, what, "Certificate")


async def _create(kube: kube_lib.Kube, call: Call, say: Say, secret: Obj, what: str) -> bool:
    """Creates ``secret``; ``False`` when one of its name exists. A refusal is said and raised."""
    try:
        created: bool = await call(kube.create_secret, secret)
    except Exception as e:
        code, message = kube_lib.error_details(e)
        say("Warning", FAILED, f"could not create secret {secret['metadata']['name']} for {what}: {message} ({code})")
        raise
    return created


def _check_owner(say: Say, found: Optional[Mapping[str, Any]], job: Mapping[str, Any], name: str,
                 what: str, kind: str = "secret") -> None:
    if found is None:
        message = f"{kind} {name} for {what} was deleted while it was being made; it is made again"
    elif not job_certificates.owned_by(found, job):
        message = (f"{kind} {name} exists and is not this job's; {what} goes there: delete or rename it "
                   f"(if it belonged to a deleted job of the same name, it goes away shortly)")
    else:
        return
    say("Warning", FAILED, message)
    raise SecretError(message)
