"""A TrainingJob's certificates for mutual TLS between its pods, and the Secret that holds them.

Why it exists: the runtime refuses connections from anything without a certificate of
the job's CA (docs/security.md), so every job needs a CA of its own and a certificate
its pods show. The operator makes them once per job, when it first creates the job's
pods, into the Secret ``<job>-tls`` owned by the job (garbage-collected with it):

- ``ca.crt``: the job's CA. Its private key is never stored: the operator signs the
  job's one certificate and forgets it, so nothing can sign another member later;
- ``tls.crt``, ``tls.key``: one certificate and key that every replica of the job
  shows, naming every replica's Service (``<pod>``, ``<pod>.<ns>``, ``<pod>.<ns>.svc``,
  ``<pod>.<ns>.svc.cluster.local``), the namespace's Services by wildcard (so replicas
  added later by an edit of the spec are covered) and loopback.

The runtime makes the same files for ``tensorgrid local`` on its side; the operator and
the runtime share no code (docs/architecture.md). ECDSA P-256: fast to make and to
handshake with.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from typing import Any, Mapping

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.oid import NameOID

from tensorgrid_operator import manifests
from tensorgrid_operator import spec as spec_lib

Obj = dict[str, Any]

VALIDITY = datetime.timedelta(days=365)
"""How long a job's certificates are valid; a job running longer needs its Secret replaced
(its pods log the date at start, warn two weeks before it and refuse to start after it)."""
ANNOTATION_NOT_AFTER = f"{spec_lib.GROUP}/certificates-not-after"
"""The Secret's annotation saying when its certificates expire (RFC 3339, UTC)."""
LOOPBACK_IPS = ("127.0.0.1", "::1")


def dns_names(job_name: str, namespace: str, job_spec: spec_lib.JobSpec) -> list[str]:
    """The names the job's certificate is good for (module docstring)."""
    names = []
    for rtype in spec_lib.REPLICA_TYPES:
        for index in range(job_spec.replicas(rtype)):
            pod = spec_lib.pod_name(job_name, spec_lib.ReplicaKey(rtype, index))
            names += [pod, f"{pod}.{namespace}", f"{pod}.{namespace}.svc", f"{pod}.{namespace}.svc.cluster.local"]
    return names + [f"*.{namespace}.svc", f"*.{namespace}.svc.cluster.local"]


def build_secret(job: Mapping[str, Any], job_spec: spec_lib.JobSpec) -> Obj:
    """The job's TLS Secret, with a fresh CA and certificate (a new one at each call)."""
    meta = job["metadata"]
    job_name, namespace = meta["name"], meta["namespace"]
    # Common names hold at most 64 characters, a namespace and a job name up to 63 each: they
    # carry the job's uid, and the names peers check are the subject alternative names.
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"tensorgrid CA {meta['uid']}")])
    ca = _signed(x509.CertificateBuilder().subject_name(ca_name).public_key(ca_key.public_key())
                 .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                 .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                              content_commitment=False, key_encipherment=False,
                                              data_encipherment=False, key_agreement=False, encipher_only=False,
                                              decipher_only=False), critical=True), ca_name, ca_key, now)
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in (*dns_names(job_name, namespace, job_spec), "localhost")]
    names += [x509.IPAddress(ipaddress.ip_address(n)) for n in LOOPBACK_IPS]
    certificate = _signed(
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"tensorgrid job {meta['uid']}")]))
        .public_key(key.public_key())
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False), ca_name, ca_key, now)
    pem = serialization.Encoding.PEM
    files = {
        "ca.crt": ca.public_bytes(pem),
        "tls.crt": certificate.public_bytes(pem),
        "tls.key": key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {
            "name": manifests.tls_secret_name(job_name),
            "namespace": namespace,
            "labels": {spec_lib.LABEL_JOB_NAME: job_name},
            "annotations": {ANNOTATION_NOT_AFTER: f"{certificate.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"},
            "ownerReferences": [manifests.owner_reference(job)],
        },
        "data": {name: base64.b64encode(content).decode("ascii") for name, content in files.items()},
    }


def owned_by(secret: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    """Whether ``secret`` is this job's (its owner reference names the job's uid)."""
    uid = job["metadata"]["uid"]
    return any(ref.get("uid") == uid for ref in (secret.get("metadata") or {}).get("ownerReferences") or [])


def _signed(builder: x509.CertificateBuilder, issuer: x509.Name, ca_key: ec.EllipticCurvePrivateKey,
            now: datetime.datetime) -> x509.Certificate:
    return (builder.issuer_name(issuer).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + VALIDITY)
            .sign(ca_key, hashes.SHA256()))
