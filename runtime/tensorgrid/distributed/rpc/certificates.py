"""Certificates for mutual TLS between a cluster's tasks: a fresh CA and the certificates it signs.

Why it exists: every connection between tasks is mutual TLS (``transport/tls.py``), and
a cluster that tensorgrid starts by itself (``tensorgrid local``, the test suite's
clusters) has nobody else to make its certificates. Each such run gets its own CA, so a
certificate is only ever trusted by the tasks of the run it was made for; the CA's key
is never written anywhere and is gone when the run ends.

A task's directory holds what ``TENSORGRID_TLS_DIR`` names: ``ca.crt`` (the CA to trust),
``tls.crt`` and ``tls.key`` (this task's certificate and key, PEM). Keys are ECDSA P-256:
fast to make and to handshake with. (The operator makes the same files for a
TrainingJob on its side: the operator and the runtime share no code.)
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime
import ipaddress
import logging
import os
import shutil
import tempfile
import threading
from typing import Iterator, Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.oid import NameOID

from tensorgrid.distributed.rpc.transport import tls

CA_FILE, CERT_FILE, KEY_FILE = tls.FILES
log = logging.getLogger("tensorgrid.tls")
_single_process_lock = threading.Lock()

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
"""The names a task of a loopback cluster is dialed by (``localhost:port`` in its cluster spec)."""

DEFAULT_VALIDITY = datetime.timedelta(days=30)
"""How long the certificates made here are valid (a ``tensorgrid local`` run, a test run, a
single-process server); a task says when its certificates expire (``tls.ExpiryWatch``)."""


@dataclasses.dataclass(frozen=True)
class Authority:
    """A CA that exists only in memory: its key is never written."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @property
    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)


def new_authority(common_name: str, validity: datetime.timedelta = DEFAULT_VALIDITY) -> Authority:
    """A fresh self-signed CA named ``common_name``, valid from an hour ago (clock skew) for ``validity``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    return Authority(key, certificate)


def issue(authority: Authority, common_name: str, names: Sequence[str],
          validity: datetime.timedelta = DEFAULT_VALIDITY) -> tuple[bytes, bytes]:
    """A certificate for a task, signed by ``authority``, good as TLS server and client, with
    ``names`` (DNS names and IP addresses) as its subject alternative names. Returns
    ``(certificate PEM, key PEM)``. ValueError when ``names`` is empty."""
    if not names:
        raise ValueError(f"a certificate for {common_name!r} needs at least one DNS name or IP address")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(authority.certificate.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + validity)
        .add_extension(x509.SubjectAlternativeName([_general_name(n) for n in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .sign(authority.key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem


def write_task_directory(directory: str, authority: Authority, common_name: str,
                         names: Sequence[str] = LOOPBACK_NAMES,
                         validity: datetime.timedelta = DEFAULT_VALIDITY) -> str:
    """Makes ``directory`` (mode 0700) with ``ca.crt``, and a fresh ``tls.crt`` and ``tls.key``
    (mode 0600) for ``common_name`` and ``names``, valid for ``validity``; returns ``directory``."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)  # one there already, too
    certificate, key = issue(authority, common_name, names, validity)
    for name, content, mode in ((CA_FILE, authority.certificate_pem, 0o644), (CERT_FILE, certificate, 0o644),
                                (KEY_FILE, key, 0o600)):
        path = os.path.join(directory, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        os.fchmod(fd, mode)  # a file there already keeps its mode otherwise
        with os.fdopen(fd, "wb") as f:
            f.write(content)
    return directory


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


@contextlib.contextmanager
def loopback_tls_for_this_process(label: str) -> Iterator[str]:
    """Within the block, this process and every process it starts speak mutual TLS on
    loopback: a fresh CA (``label`` names it) and one certificate for the loopback names,
    in a temporary directory that ``TENSORGRID_TLS_DIR`` names until the block ends, when
    both go. For programs that start loopback clusters themselves (the test suite,
    benchmarks). Yields the directory; does nothing (yields "") when ``TENSORGRID_TLS_DIR``
    is set already or ``TENSORGRID_INSECURE=1`` asks for no TLS."""
    if os.environ.get(tls.TLS_DIR_ENV) or os.environ.get(tls.INSECURE_ENV) == "1":
        yield ""
        return
    with tempfile.TemporaryDirectory(prefix="tensorgrid-tls-") as root:
        directory = write_task_directory(os.path.join(root, "task"), new_authority(f"{label} CA"), label)
        os.environ[tls.TLS_DIR_ENV] = directory
        try:
            yield directory
        finally:
            os.environ.pop(tls.TLS_DIR_ENV, None)


def ensure_single_process_credentials() -> None:
    """For a single-process cluster (``tf.train.Server.create_local_server``) in a process
    given no certificates and not told to run without TLS: a CA of its own and a loopback
    certificate, in a private temporary directory removed when the process exits. Its
    in-process sessions use them; no other process has them, so none can connect. Does
    nothing when ``TENSORGRID_TLS_DIR`` is set, ``TENSORGRID_INSECURE=1``, or it ran before."""
    with _single_process_lock:
        try:
            if tls.from_env() is not None or os.environ.get(tls.INSECURE_ENV, "").strip() == "1":
                return
        except tls.InsecureNotAllowedError:
            pass
        root = tempfile.mkdtemp(prefix="tensorgrid-local-tls-")
        atexit.register(shutil.rmtree, root, True)
        directory = write_task_directory(os.path.join(root, "task"), new_authority("tensorgrid local server CA"),
                                         "tensorgrid local server")
        tls.use_for_this_process(directory)
        log.info("no TENSORGRID_TLS_DIR: this single-process server uses a CA made for this process (%s); only "
                 "this process can connect to it", directory)


CLUSTER_VALIDITY = datetime.timedelta(days=365)
"""How long ``tensorgrid certs``'s CA and certificates are valid by default (as the operator's)."""


@dataclasses.dataclass(frozen=True)
class TaskDirectory:
    """One task's certificate directory made by ``write_cluster_directories``."""

    job: str
    index: int
    address: str
    directory: str


def host_of(address: str) -> str:
    """The host of a cluster address ``host:port`` (``[::1]:2222`` gives ``::1``)."""
    return address.rpartition(":")[0].strip("[]")


def write_cluster_directories(tasks: Sequence[tuple[str, int, str]], out: str,
                              validity: datetime.timedelta = CLUSTER_VALIDITY) -> list[TaskDirectory]:
    """For a cluster across machines (``tensorgrid certs``): a fresh CA, its certificate in
    ``out/ca.crt``, and per task ``(job, index, address)`` a directory ``out/<job>-<index>``
    for ``TENSORGRID_TLS_DIR`` whose certificate names the task's host (and loopback, as the
    operator's do). The CA's key is never written: a cluster that changes needs a new run.
    ``out`` must exist; files of the same names in it are replaced."""
    now = datetime.datetime.now(datetime.timezone.utc)
    authority = new_authority(f"tensorgrid cluster CA, made {now:%Y-%m-%d %H:%M:%S} UTC", validity)
    ca_path = os.path.join(out, CA_FILE)
    fd = os.open(ca_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(authority.certificate_pem)
    made = []
    for job, index, address in tasks:
        names = list(dict.fromkeys([host_of(address).lower(), *LOOPBACK_NAMES]))
        directory = write_task_directory(os.path.join(out, f"{job}-{index}"), authority, f"{job}-{index}", names,
                                         validity)
        made.append(TaskDirectory(job, index, address, directory))
    return made
