"""A TrainingJob's certificates for mutual TLS between its pods, and the Secrets that hold them.

Why it exists: the runtime refuses connections from anything without a certificate of
the job's CA (docs/security.md), and a client refuses a task whose certificate does not
name the host it dialed. So every job needs a CA of its own, and every replica a
certificate naming only itself: a pod then holds no key that is good for another
replica's name. The operator keeps them in Secrets owned by the job (garbage-collected
with it):

- ``<job>-ca`` (:func:`authority_secret`): the job's CA certificate and its private key
  (``ca.crt``, ``ca.key``), made once, before the job's first pods. The operator keeps the
  key to sign the certificates of replicas whose first pod is made in a later pass (a
  creation refused and retried, pods held for their PodGroup) or whose Secret was
  deleted; no pod mounts this Secret;
- ``<pod>-tls`` (:func:`replica_secret`), one per replica, made before its pod and kept
  for the pods that replace it: ``ca.crt`` (the CA only), ``tls.crt`` and ``tls.key``, a
  certificate naming the replica's Service (``<pod>``, ``<pod>.<ns>``, ``<pod>.<ns>.svc``,
  ``<pod>.<ns>.svc.cluster.local``) and loopback, and no wildcard. Only that replica's
  pod mounts it.

A Secret holds at most 1 MiB and a job up to 2,000 replicas (``spec.MAX_REPLICAS``), about
1.6 KB of certificate and key each: one Secret per replica, not one per job.

Jobs started by an operator before this one have one Secret ``<job>-tls`` (a certificate
every replica shows, with wildcards for the namespace's Services, and no CA key): their
pods keep mounting it (``certificate_secrets``), since no new certificate could be signed
by its CA. The runtime makes the same files for ``tensorgrid local`` on its side; the
operator and the runtime share no code (docs/architecture.md). ECDSA P-256: fast to make
and to handshake with.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import ipaddress
from typing import Any, Mapping, Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.oid import NameOID

from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.resources import manifests

Obj = dict[str, Any]

VALIDITY = datetime.timedelta(days=365)
"""How long a job's CA is valid, from its first pods; its replicas' certificates end with it. A
job running longer needs its Secrets replaced (its pods log the date at start, warn two weeks
before it and refuse to start after it)."""
ANNOTATION_NOT_AFTER = f"{spec_lib.GROUP}/certificates-not-after"
"""Each Secret's annotation saying when its certificates expire (RFC 3339, UTC)."""
LOOPBACK_IPS = ("127.0.0.1", "::1")
_PEM = serialization.Encoding.PEM


@dataclasses.dataclass(frozen=True)
class Authority:
    """A job's CA: what signs its replicas' certificates."""

    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(_PEM)


def ca_secret_name(job_name: str) -> str:
    """The Secret holding a job's CA certificate and key (no pod mounts it)."""
    return f"{job_name}-ca"


def replica_dns_names(pod_name: str, namespace: str) -> list[str]:
    """The names a replica's certificate is good for: its Service's, as peers dial it (TF_CONFIG
    says ``<pod>.<ns>.svc``), and loopback (``localhost`` here, the addresses in ``LOOPBACK_IPS``)."""
    return [pod_name, f"{pod_name}.{namespace}", f"{pod_name}.{namespace}.svc",
            f"{pod_name}.{namespace}.svc.cluster.local", "localhost"]


def new_authority(job: Mapping[str, Any]) -> Authority:
    """A fresh CA for ``job`` (a new key at each call), valid ``VALIDITY`` from now."""
    # Common names hold at most 64 characters, a namespace and a job name up to 63 each: they
    # carry the job's uid, and the names peers check are the subject alternative names.
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"tensorgrid CA {job['metadata']['uid']}")])
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    usage = x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + VALIDITY)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .add_extension(usage, critical=True)
                   .sign(key, hashes.SHA256()))
    return Authority(certificate, key)


def authority_secret(job: Mapping[str, Any], authority: Authority) -> Obj:
    """The Secret ``<job>-ca`` keeping the job's CA (module docstring)."""
    key = authority.key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return _secret(job, ca_secret_name(job["metadata"]["name"]), "Opaque", authority.certificate,
                   {"ca.crt": authority.certificate_pem, "ca.key": key})


def read_authority(secret: Mapping[str, Any]) -> Authority:
    """The CA kept in a Secret of :func:`authority_secret`.

    Raises ``ValueError`` naming the Secret when its ``ca.crt`` or ``ca.key`` is missing, is not
    PEM, or the two do not belong together (someone edited it).
    """
    name = (secret.get("metadata") or {}).get("name")
    data = secret.get("data") or {}
    try:
        certificate = x509.load_pem_x509_certificate(base64.b64decode(data["ca.crt"]))
        key = serialization.load_pem_private_key(base64.b64decode(data["ca.key"]), password=None)
    except (KeyError, ValueError, TypeError) as e:
        raise ValueError(f"secret {name} does not hold a CA certificate and key in ca.crt and ca.key "
                         f"(PEM) as the operator writes them: {e}") from e
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != certificate.public_key():
        raise ValueError(f"secret {name}: ca.key is not the key of the certificate in ca.crt")
    return Authority(certificate, key)


def replica_secret(job: Mapping[str, Any], authority: Authority, pod_name: str, serves_as: Sequence[str] = ()) -> Obj:
    """The Secret ``<pod>-tls`` of one replica, with a fresh key and a certificate naming only it, and the
    replicas of ``serves_as`` it may become (a PS's standby names its PS: ``resources.ps_standby``)."""
    namespace = job["metadata"]["namespace"]
    key = ec.generate_private_key(ec.SECP256R1())
    dns_names = [n for name in (pod_name, *serves_as) for n in replica_dns_names(name, namespace)]
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in dict.fromkeys(dns_names)]
    names += [x509.IPAddress(ipaddress.ip_address(n)) for n in LOOPBACK_IPS]
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, pod_name)]))  # at most 63 characters
        .issuer_name(authority.certificate.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(authority.certificate.not_valid_after_utc)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .sign(authority.key, hashes.SHA256()))
    files = {
        "ca.crt": authority.certificate_pem,
        "tls.crt": certificate.public_bytes(_PEM),
        "tls.key": key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    }
    return _secret(job, manifests.replica_tls_secret_name(pod_name), "kubernetes.io/tls", certificate, files)


def owned_by(secret: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    """Whether ``secret`` is this job's (its owner reference names the job's uid)."""
    uid = job["metadata"]["uid"]
    return any(ref.get("uid") == uid for ref in (secret.get("metadata") or {}).get("ownerReferences") or [])


def _secret(job: Mapping[str, Any], name: str, secret_type: str, certificate: x509.Certificate,
            files: Mapping[str, bytes]) -> Obj:
    meta = job["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": secret_type,
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": {spec_lib.LABEL_JOB_NAME: meta["name"]},
            "annotations": {ANNOTATION_NOT_AFTER: f"{certificate.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"},
            "ownerReferences": [manifests.owner_reference(job)],
        },
        "data": {file: base64.b64encode(content).decode("ascii") for file, content in files.items()},
    }
