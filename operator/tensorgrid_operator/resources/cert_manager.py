"""The cert-manager objects that issue a job's certificates when the chart says ``certificates.issuer: cert-manager``.

Why it exists: some clusters want every certificate issued, renewed and audited by
cert-manager rather than signed by an operator holding a CA key. In that mode the operator
signs nothing; per job it creates, owned by the job (garbage-collected with it):

- an Issuer ``<job>-selfsigned`` (``selfSigned``), which signs only the next object;
- a Certificate ``<job>-ca``: the job's CA (``isCA``, ECDSA P-256, ``ca_duration``), whose
  key cert-manager keeps in the Secret ``<job>-ca`` and never rotates (a new key would
  end every replica's trust in the others);
- an Issuer ``<job>-ca`` (``ca``) signing with that Secret;
- per replica, before its first pod, a Certificate ``<pod>-tls`` whose Secret ``<pod>-tls``
  is what the pod mounts (``ca.crt``, ``tls.crt``, ``tls.key``, as the operator's own Secrets):
  the same names as ``job_certificates.replica_dns_names`` and loopback, usages server and
  client auth, ECDSA P-256, ``duration`` and ``renew_before`` of the chart.

So each job has a CA of its own, as in the operator's mode: a certificate of another job is
refused. :attr:`CertManagerSettings.issuer_ref` names an existing Issuer or ClusterIssuer to
sign the replicas' certificates instead (no per-job objects): one CA for many jobs, so a
certificate of any of them is let in as a client by all the others (docs/security.md).

Pure functions; ``ensure_objects`` and ``certificate_secrets`` make the API calls.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping, Optional, Sequence

from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.resources import job_certificates
from tensorgrid_operator.resources import manifests

Obj = dict[str, Any]

OPERATOR = "operator"
CERT_MANAGER = "cert-manager"
ISSUERS = (OPERATOR, CERT_MANAGER)
"""Who issues the jobs' certificates (``--certificate-issuer``)."""
GROUP = "cert-manager.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
PLURALS = {"Issuer": "issuers", "Certificate": "certificates"}
"""The kinds the operator creates and reads, and their resources (the chart's RBAC grants exactly these)."""
ISSUER_KINDS = ("Issuer", "ClusterIssuer")
CONDITION = "CertificateIssuerCreated"
"""The job's condition while cert-manager's objects cannot be made (its pods are held back)."""
MISSING = "CertManagerMissing"
"""The reason (condition and Warning event) when the API server does not serve cert-manager's resources."""
CERTIFICATE_NAME_ANNOTATION = "cert-manager.io/certificate-name"
"""What cert-manager writes on each Secret it issues: the Certificate's name."""
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
MIN_DURATION_SECONDS = 3600
"""cert-manager refuses a Certificate valid for less than an hour."""


def parse_duration(text: str, what: str) -> int:
    """Seconds of a duration as cert-manager takes it (``2160h``, ``90m``, ``1h30m``); ``ValueError`` naming ``what``."""
    match = _DURATION.match(text.strip())
    if not text.strip() or match is None:
        raise ValueError(f"{what} {text!r} is not a duration: write hours, minutes and seconds as cert-manager "
                         f"does, e.g. 2160h (90 days) or 1h30m")
    hours, minutes, seconds = (int(group or 0) for group in match.groups())
    return hours * 3600 + minutes * 60 + seconds


@dataclasses.dataclass(frozen=True)
class IssuerRef:
    """An existing cert-manager issuer (``Issuer`` in the job's namespace, or ``ClusterIssuer``)."""

    kind: str
    name: str

    def __post_init__(self) -> None:
        if self.kind not in ISSUER_KINDS:
            raise ValueError(f"issuer kind {self.kind!r} is not one of {', '.join(ISSUER_KINDS)}")
        if not self.name:
            raise ValueError("an issuer needs a name")

    @classmethod
    def parse(cls, text: str) -> IssuerRef:
        """``ClusterIssuer/<name>`` or ``Issuer/<name>`` (``--cert-manager-issuer``)."""
        kind, slash, name = text.partition("/")
        if not slash:
            raise ValueError(f"issuer {text!r} is not <kind>/<name> with kind one of {', '.join(ISSUER_KINDS)} "
                             f"(e.g. ClusterIssuer/tensorgrid-ca)")
        return cls(kind, name)

    def as_reference(self) -> Obj:
        return {"group": GROUP, "kind": self.kind, "name": self.name}


@dataclasses.dataclass(frozen=True)
class CertManagerSettings:
    """Who issues the jobs' certificates, and how cert-manager's are made."""

    issuer: str = OPERATOR
    """``operator`` (the operator's own CA per job, job_certificates) or ``cert-manager``."""
    issuer_ref: Optional[IssuerRef] = None
    """With cert-manager: an existing Issuer or ClusterIssuer signing every job's replicas, instead of a CA per job."""
    duration: str = "2160h"
    """How long a replica's certificate is valid (90 days); cert-manager renews it ``renew_before`` the end."""
    renew_before: str = "720h"
    """How long before its end cert-manager renews a replica's certificate (30 days)."""
    ca_duration: str = "87600h"
    """How long a job's CA is valid (10 years: a job outlives no CA; its key is never rotated)."""

    def __post_init__(self) -> None:
        if self.issuer not in ISSUERS:
            raise ValueError(f"certificate issuer {self.issuer!r} is not one of {', '.join(ISSUERS)}")
        if self.issuer_ref is not None and self.issuer != CERT_MANAGER:
            raise ValueError(f"an issuer to sign with ({self.issuer_ref.kind}/{self.issuer_ref.name}) needs the "
                             f"certificate issuer {CERT_MANAGER}, not {self.issuer}")
        duration = parse_duration(self.duration, "certificate duration")
        renew = parse_duration(self.renew_before, "certificate renewBefore")
        ca = parse_duration(self.ca_duration, "CA duration")
        if duration < MIN_DURATION_SECONDS or ca < MIN_DURATION_SECONDS:
            raise ValueError(f"certificate duration {self.duration} and CA duration {self.ca_duration} must be at "
                             f"least 1h (cert-manager's minimum)")
        if not 0 < renew < duration:
            raise ValueError(f"certificate renewBefore {self.renew_before} must be more than 0 and less than the "
                             f"duration {self.duration}")
        if self.issuer_ref is None and ca < duration:
            raise ValueError(f"CA duration {self.ca_duration} is shorter than the certificate duration "
                             f"{self.duration}: cert-manager would cut every certificate short at the CA's end")

    @property
    def enabled(self) -> bool:
        return self.issuer == CERT_MANAGER

    @property
    def per_job_ca(self) -> bool:
        """Whether each job gets its own CA (the default of cert-manager mode)."""
        return self.enabled and self.issuer_ref is None

    def replica_issuer(self, job_name: str) -> IssuerRef:
        """What signs a job's replicas' certificates: the job's CA Issuer, or the one the chart names."""
        return self.issuer_ref or IssuerRef("Issuer", ca_issuer_name(job_name))


def self_signed_issuer_name(job_name: str) -> str:
    return f"{job_name}-selfsigned"


def ca_issuer_name(job_name: str) -> str:
    return f"{job_name}-ca"


def ca_certificate_name(job_name: str) -> str:
    """The job's CA Certificate, and its Secret (the name of the operator's own CA Secret)."""
    return job_certificates.ca_secret_name(job_name)


def replica_certificate_name(pod_name: str) -> str:
    """A replica's Certificate, named like the Secret its pods mount."""
    return manifests.replica_tls_secret_name(pod_name)


def job_objects(job: Mapping[str, Any], settings: CertManagerSettings) -> list[Obj]:
    """What a job needs before its first replica's Certificate, in order: its self-signed Issuer, its
    CA Certificate, its CA Issuer; none with an issuer of the chart's."""
    if not settings.per_job_ca:
        return []
    name = job["metadata"]["name"]
    ca_secret = ca_certificate_name(name)
    return [
        _object(job, "Issuer", self_signed_issuer_name(name), {"selfSigned": {}}),
        _object(job, "Certificate", ca_secret, {
            "isCA": True,
            # Common names hold 64 characters at most: the job's uid, as in job_certificates.new_authority.
            "commonName": f"tensorgrid CA {job['metadata']['uid']}",
            "secretName": ca_secret,
            "secretTemplate": {"labels": _labels(job)},
            "duration": settings.ca_duration,
            "privateKey": {"algorithm": "ECDSA", "size": 256, "encoding": "PKCS8", "rotationPolicy": "Never"},
            "issuerRef": IssuerRef("Issuer", self_signed_issuer_name(name)).as_reference(),
        }),
        _object(job, "Issuer", ca_issuer_name(name), {"ca": {"secretName": ca_secret}}),
    ]


def replica_certificate(job: Mapping[str, Any], pod_name: str, settings: CertManagerSettings,
                        serves_as: Sequence[str] = ()) -> Obj:
    """The Certificate of one replica: its Secret ``<pod>-tls`` names only that replica (module docstring),
    and the replicas of ``serves_as`` it may become (a PS's standby names its PS)."""
    namespace = job["metadata"]["namespace"]
    dns_names = [n for name in (pod_name, *serves_as) for n in job_certificates.replica_dns_names(name, namespace)]
    return _object(job, "Certificate", replica_certificate_name(pod_name), {
        "secretName": manifests.replica_tls_secret_name(pod_name),
        "secretTemplate": {"labels": _labels(job)},
        "commonName": pod_name,  # at most 63 characters (spec.MAX_NAME_LENGTH)
        "dnsNames": list(dict.fromkeys(dns_names)),
        "ipAddresses": list(job_certificates.LOOPBACK_IPS),
        "usages": ["digital signature", "server auth", "client auth"],
        "duration": settings.duration,
        "renewBefore": settings.renew_before,
        "privateKey": {"algorithm": "ECDSA", "size": 256, "encoding": "PKCS8", "rotationPolicy": "Always"},
        "issuerRef": settings.replica_issuer(job["metadata"]["name"]).as_reference(),
    })


def issued_by_cert_manager(secret: Mapping[str, Any]) -> bool:
    """Whether cert-manager wrote ``secret`` (a job started in cert-manager mode), not the operator."""
    return CERTIFICATE_NAME_ANNOTATION in ((secret.get("metadata") or {}).get("annotations") or {})


def missing_message(what: str, served: Optional[set[str]]) -> str:
    """Why a job's cert-manager objects cannot be made: the resources the API server does not serve.

    ``served``: the resources the API server lists in ``cert-manager.io/v1`` (``None``: not the group at all).
    """
    wanted = sorted(set(PLURALS.values()))
    missing = wanted if served is None else [r for r in wanted if r not in served]
    names = ", ".join(f"{r}.{GROUP}" for r in missing) or ", ".join(f"{r}.{GROUP}" for r in wanted)
    return (f"could not create {what}: the API server does not serve {names} ({API_VERSION}): "
            f"install cert-manager (its CRDs and its controller), or set certificates.issuer to {OPERATOR} in the "
            f"chart (--certificate-issuer {OPERATOR}); the job's pods are not created until it is")


def _labels(job: Mapping[str, Any]) -> dict[str, str]:
    return {spec_lib.LABEL_JOB_NAME: job["metadata"]["name"]}


def _object(job: Mapping[str, Any], kind: str, name: str, spec: Obj) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "namespace": job["metadata"]["namespace"], "labels": _labels(job),
                     "ownerReferences": [manifests.owner_reference(job)]},
        "spec": spec,
    }
