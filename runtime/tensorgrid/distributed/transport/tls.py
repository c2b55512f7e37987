"""Mutual TLS between tasks: where a task finds its certificates, and the credentials of
both protocols (gRPC, the data channel) made from them. The one place that decides
whether a task speaks TLS.

Why it exists: anyone who can reach a task's ports could otherwise read and overwrite
the model, or stop the job (``CleanupAll``, ``Shutdown``). With mutual TLS, both ends of
every connection show a certificate signed by the job's CA, or the connection is
refused before a single request is read.

``TENSORGRID_TLS_DIR`` names a directory holding ``ca.crt`` (the CA to trust, and only
it), ``tls.crt`` and ``tls.key`` (this task's certificate and key, PEM). Without it a
task refuses to start, unless ``TENSORGRID_INSECURE=1`` says to run without TLS (then it
warns once). Host names are checked as usual (the name a peer is dialed by must be one
of its certificate's names), so a CA shared by several jobs does not let one job into
another; the certificates tensorgrid makes name every address the cluster spec uses.
The files are read once per process and directory (docs/security.md).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import ssl
import threading
from typing import Mapping, Optional, Sequence

import grpc

log = logging.getLogger("tensorgrid.tls")

TLS_DIR_ENV = "TENSORGRID_TLS_DIR"
"""The directory with ``ca.crt``, ``tls.crt`` and ``tls.key``."""
INSECURE_ENV = "TENSORGRID_INSECURE"
"""``1``: run without TLS (any other task or program that reaches a port owns the job)."""
FILES = ("ca.crt", "tls.crt", "tls.key")

_warned_insecure = threading.Event()
_process_directory: Optional[str] = None
"""Credentials this process made for itself (``create_local_server``), used when
``TENSORGRID_TLS_DIR`` is unset: see ``use_for_this_process``."""


def use_for_this_process(directory: str) -> None:
    """Makes ``directory`` this process's credentials wherever ``TENSORGRID_TLS_DIR`` is unset
    (a single-process cluster's own CA: its clients are in this process)."""
    global _process_directory
    _process_directory = directory


def process_directory() -> Optional[str]:
    """The directory given to ``use_for_this_process``, if any."""
    return _process_directory


class InsecureNotAllowedError(ValueError):
    """Neither certificates nor an explicit opt-out: a task does not start open to anyone (a
    configuration error, as a bad cluster spec is)."""


@dataclasses.dataclass(frozen=True)
class Credentials:
    """One task's certificates (PEM bytes), and the TLS settings of both protocols made from them."""

    ca: bytes
    certificate: bytes
    key: bytes
    directory: str
    """Where they were read from (for messages)."""

    def grpc_server(self) -> grpc.ServerCredentials:
        """A gRPC server that asks every client for a certificate of the CA."""
        return grpc.ssl_server_credentials([(self.key, self.certificate)], root_certificates=self.ca,
                                           require_client_auth=True)

    def grpc_channel(self) -> grpc.ChannelCredentials:
        """A gRPC client that shows this task's certificate and trusts only the CA."""
        return grpc.ssl_channel_credentials(root_certificates=self.ca, private_key=self.key,
                                            certificate_chain=self.certificate)

    @functools.cached_property
    def server_context(self) -> ssl.SSLContext:
        """The data channel's listening side: a client certificate of the CA is required."""
        context = self._context(ssl.PROTOCOL_TLS_SERVER)
        context.verify_mode = ssl.CERT_REQUIRED
        return context

    @functools.cached_property
    def client_context(self) -> ssl.SSLContext:
        """The data channel's dialing side: the server's certificate must be the CA's and
        name the host dialed (``check_hostname``)."""
        context = self._context(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = True
        context.verify_mode = ssl.CERT_REQUIRED
        return context

    def _context(self, protocol: int) -> ssl.SSLContext:
        context = ssl.SSLContext(protocol)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_verify_locations(cadata=self.ca.decode("ascii"))
        path = os.path.join(self.directory, FILES[1]), os.path.join(self.directory, FILES[2])
        context.load_cert_chain(*path)
        return context


def load(directory: str) -> Credentials:
    """The credentials in ``directory``. ValueError naming the directory and the missing or
    unreadable files, or the certificate and key that do not go together."""
    contents = []
    problems = []
    for name in FILES:
        try:
            with open(os.path.join(directory, name), "rb") as f:
                contents.append(f.read())
        except OSError as e:
            problems.append(f"{name} ({e.strerror})")
    if problems:
        raise ValueError(f"{TLS_DIR_ENV}={directory!r} must hold {', '.join(FILES)} (PEM); cannot read "
                         f"{', '.join(problems)}")
    credentials = Credentials(contents[0], contents[1], contents[2], directory)
    try:
        credentials.server_context  # parses and matches the files now, not at the first connection
    except (ssl.SSLError, ValueError) as e:
        raise ValueError(f"the certificates in {TLS_DIR_ENV}={directory!r} are not usable: {e} (ca.crt must be "
                         f"PEM certificates, tls.crt and tls.key a matching certificate and key)") from None
    return credentials


@functools.lru_cache(maxsize=8)
def _load_cached(directory: str) -> Credentials:
    return load(directory)


def from_env(environ: Optional[Mapping[str, str]] = None) -> Optional[Credentials]:
    """This process's credentials: those of ``TENSORGRID_TLS_DIR`` (else those it made for
    itself, ``use_for_this_process``); ``None`` (no TLS, after a
    warning, once) when it is unset and ``TENSORGRID_INSECURE=1``. InsecureNotAllowedError
    when neither is set; ValueError for a bad value of either."""
    env = os.environ if environ is None else environ
    directory = env.get(TLS_DIR_ENV, "").strip() or (_process_directory if environ is None else "") or ""
    insecure = env.get(INSECURE_ENV, "").strip()
    if insecure not in ("", "0", "1"):
        raise ValueError(f"{INSECURE_ENV}={insecure!r}: set it to 1 to run without TLS, or leave it unset (or 0)")
    if directory:
        return _load_cached(os.path.abspath(directory))
    if insecure != "1":
        raise InsecureNotAllowedError(
            f"no TLS certificates: set {TLS_DIR_ENV} to a directory holding {', '.join(FILES)} (the operator and "
            f"`tensorgrid local` do), or set {INSECURE_ENV}=1 to run without TLS, where any program that reaches "
            f"this task's ports can read and change the model")
    if not _warned_insecure.is_set():
        _warned_insecure.set()
        log.warning("%s=1: this process talks to its peers WITHOUT TLS; any program that reaches its ports can "
                    "read and change the model, or stop the job", INSECURE_ENV)
    return None


def open_channel(address: str, credentials: Optional[Credentials],
                 options: Sequence[tuple[str, object]]) -> grpc.Channel:
    """A gRPC channel to ``address``: mutual TLS with ``credentials``, plaintext without."""
    if credentials is None:
        return grpc.insecure_channel(address, options=options)
    return grpc.secure_channel(address, credentials.grpc_channel(), options=options)


def add_port(server: grpc.Server, address: str, credentials: Optional[Credentials]) -> int:
    """Binds ``server`` to ``address``, with mutual TLS when ``credentials`` are given; the bound port, 0 if none."""
    if credentials is None:
        return int(server.add_insecure_port(address))
    return int(server.add_secure_port(address, credentials.grpc_server()))
