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

Certificates expire (the operator's after 365 days, ``tensorgrid local``'s after 30), and
peers then refuse every new connection, which a long job makes whenever a connection
closes or a task restarts. So a task does not start with expired certificates (the error
names the date), and a running one says when they expire (``ExpiryWatch``): a log line at
start, a warning two weeks before, an error when it happens, and the date as a metric.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import logging
import os
import ssl
import threading
from typing import Callable, Mapping, Optional, Sequence

import grpc
from cryptography import x509

log = logging.getLogger("tensorgrid.tls")

TLS_DIR_ENV = "TENSORGRID_TLS_DIR"
"""The directory with ``ca.crt``, ``tls.crt`` and ``tls.key``."""
INSECURE_ENV = "TENSORGRID_INSECURE"
"""``1``: run without TLS (any other task or program that reaches a port owns the job)."""
FILES = ("ca.crt", "tls.crt", "tls.key")
EXPIRY_WARNING = datetime.timedelta(days=14)
"""How long before its certificates expire a task warns (``ExpiryWatch``)."""

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

    @functools.cached_property
    def not_after(self) -> datetime.datetime:
        """When the first of this task's certificates (``tls.crt``, its chain included) and
        the CAs it trusts (``ca.crt``) expires (UTC): from then on peers refuse this task's
        new connections, and it theirs."""
        certificates = x509.load_pem_x509_certificates(self.certificate) + x509.load_pem_x509_certificates(self.ca)
        return min(c.not_valid_after_utc for c in certificates)

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
        not_after = credentials.not_after
    except (ssl.SSLError, ValueError) as e:
        raise ValueError(f"the certificates in {TLS_DIR_ENV}={directory!r} are not usable: {e} (ca.crt must be "
                         f"PEM certificates, tls.crt and tls.key a matching certificate and key)") from None
    if not_after <= datetime.datetime.now(datetime.timezone.utc):
        raise ValueError(f"the certificates in {TLS_DIR_ENV}={directory!r} expired at {not_after:%Y-%m-%d %H:%M} UTC: "
                         f"peers refuse expired certificates. {RENEWAL_ADVICE}")
    return credentials


RENEWAL_ADVICE = ("Renew them: a TrainingJob's are in its Secrets <job>-ca and <pod>-tls (delete them all, `kubectl "
                  "delete secret -l tensorgrid.io/job-name=<job>`, and restart the whole job so every pod gets the "
                  "new CA; docs/security.md); `tensorgrid local` makes new ones at each run.")


class ExpiryWatch:
    """Tells, for a running task, when its certificates expire (``Credentials.not_after``,
    which the server's start line shows): a WARNING once less than ``EXPIRY_WARNING`` is
    left (at once if that is so already), an ERROR once they expired. A thread of its own
    waits for those instants until ``stop``."""

    def __init__(self, credentials: Credentials, task: str,
                 clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.timezone.utc)) -> None:
        self.not_after = credentials.not_after
        self._where = f"{TLS_DIR_ENV}={credentials.directory!r}"
        self._task = task
        self._clock = clock
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="tls-expiry")
        self._thread.start()

    def _watch(self) -> None:
        if self._wait_until(self.not_after - EXPIRY_WARNING):
            log.warning("%s: the TLS certificates of %s expire at %s UTC, in %s: then peers refuse this task's new "
                        "connections. %s", self._task, self._where, f"{self.not_after:%Y-%m-%d %H:%M}",
                        _days(self.not_after - self._clock()), RENEWAL_ADVICE)
        if self._wait_until(self.not_after):
            log.error("%s: the TLS certificates of %s expired at %s UTC: every new connection between this task "
                      "and its peers (a reconnect, a restarted task, a new data-channel connection) now fails its "
                      "TLS handshake, and steps that need one fail. %s", self._task, self._where,
                      f"{self.not_after:%Y-%m-%d %H:%M}", RENEWAL_ADVICE)

    def _wait_until(self, instant: datetime.datetime) -> bool:
        """Waits until ``instant`` (at most a day at a time, so a clock that jumps is
        followed); False if stopped first."""
        while not self._stopped.is_set():
            left = (instant - self._clock()).total_seconds()
            if left <= 0:
                return True
            self._stopped.wait(min(left, 86400.0))
        return False

    def stop(self) -> None:
        self._stopped.set()


def _days(left: datetime.timedelta) -> str:
    return f"{left.total_seconds() / 86400:.1f} days" if abs(left) >= datetime.timedelta(days=1) else (
        f"{left.total_seconds() / 3600:.1f} hours")


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
