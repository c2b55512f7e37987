"""Mutual TLS between tasks: where a task finds its certificates, and the credentials of
both protocols (gRPC, the data channel) made from them. The one place that decides
whether a task speaks TLS.

Why it exists: anyone who can reach a task's ports could otherwise read and overwrite
the model, or stop the job (``CleanupAll``, ``Shutdown``). With mutual TLS, both ends of
every connection show a certificate signed by the job's CA, or the connection is
refused before a single request is read.

``TENSORGRID_TLS_DIR`` names a directory holding ``ca.crt`` (the CAs to trust, and only
them), ``tls.crt`` and ``tls.key`` (this task's certificate and key, PEM). Without it a task
whose cluster is all on this machine takes a certificate of its user's CA
(``user_authority``); any other refuses to start, unless ``TENSORGRID_INSECURE=1`` says to
run without TLS (then it warns once). Host names are checked as usual (the name a peer is dialed by must be one
of its certificate's names), so a CA shared by several jobs does not let one job into
another; the certificates tensorgrid makes name every address the cluster spec uses.

A running task follows its directory (``LiveCredentials``): every
``TENSORGRID_TLS_RELOAD_SECONDS`` (30) at most, when a connection is made or the task's
``ExpiryWatch`` looks, it reads the three files again, and when they changed and are
usable (as at start) it uses them for every connection made from then on: the gRPC
server's handshakes (``add_port``), the data channel's both ways, and gRPC channels to
peers (``peer_channel``). So certificates renewed in place (cert-manager renewing a
Secret that kubelet updates in the pod) are taken without a restart; files that are not
usable are logged as an error and the task keeps the ones it has.

Certificates expire (the operator's after 365 days, ``tensorgrid local``'s after 30), and
peers then refuse every new connection, which a long job makes whenever a connection
closes or a task restarts. So a task does not start with expired certificates (the error
names the date), and a running one says when they expire (``ExpiryWatch``): a log line at
start, a warning two weeks before, an error when it happens, and the date as a metric.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import logging
import os
import socket
import ssl
import tempfile
import threading
import time
from typing import Callable, Iterator, Mapping, Optional, Protocol, Sequence

import grpc
from cryptography import exceptions as crypto_exceptions
from cryptography import x509

from tensorgrid.distributed.rpc.transport import liveness

log = logging.getLogger("tensorgrid.tls")

TLS_DIR_ENV = "TENSORGRID_TLS_DIR"
"""The directory with ``ca.crt``, ``tls.crt`` and ``tls.key``."""
INSECURE_ENV = "TENSORGRID_INSECURE"
"""``1``: run without TLS (any other task or program that reaches a port owns the job)."""
RELOAD_ENV = "TENSORGRID_TLS_RELOAD_SECONDS"
"""How often at most a running task reads its certificate files again (0: only at start)."""
DEFAULT_RELOAD_SECONDS = 30.0
FILES = ("ca.crt", "tls.crt", "tls.key")
EXPIRY_WARNING = datetime.timedelta(days=14)
"""How long before its certificates expire a task warns (``ExpiryWatch``)."""

_warned_insecure = threading.Event()
_process_directory: Optional[str] = None
"""Credentials this process made for itself (``create_local_server``), used when
``TENSORGRID_TLS_DIR`` is unset: see ``use_for_this_process``."""


def use_for_this_process(directory: str) -> None:
    """Makes ``directory`` this process's credentials wherever ``TENSORGRID_TLS_DIR`` is unset
    (a single-process cluster's own CA, whose clients are in this process; or a certificate
    of the user's CA for tasks started by hand on this machine, ``user_authority``)."""
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
    """One task's certificates (PEM bytes) as read at one moment, and the TLS settings of
    both protocols made from exactly these bytes."""

    ca: bytes
    certificate: bytes
    key: bytes
    directory: str
    """Where they were read from (for messages)."""

    def current(self) -> "Credentials":
        """These credentials, which never change (``CredentialSource``)."""
        return self

    def grpc_server(self) -> grpc.ServerCertificateConfiguration:
        """This task's certificate for a gRPC server, and the CAs whose clients it admits."""
        return grpc.ssl_server_certificate_configuration([(self.key, self.certificate)], root_certificates=self.ca)

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
        """When this task's certificate (``tls.crt``, its chain included) or the CA of
        ``ca.crt`` that issued it expires, whichever is first (UTC): from then on peers
        refuse this task's new connections. Other CAs of ``ca.crt`` (the old one, while a
        CA is replaced) do not count; when none of them issued ``tls.crt``, all do."""
        chain = x509.load_pem_x509_certificates(self.certificate)
        authorities = x509.load_pem_x509_certificates(self.ca)
        issuers = [ca for ca in authorities if _issued(ca, chain[-1])]
        trusted_until = (max(ca.not_valid_after_utc for ca in issuers) if issuers
                         else min(ca.not_valid_after_utc for ca in authorities))
        return min([trusted_until, *(c.not_valid_after_utc for c in chain)])

    def _context(self, protocol: int) -> ssl.SSLContext:
        context = ssl.SSLContext(protocol)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_verify_locations(cadata=self.ca.decode("ascii"))
        with _memory_file(self.certificate) as certificate, _memory_file(self.key) as key:
            context.load_cert_chain(certificate, key)
        return context


class CredentialSource(Protocol):
    """Where a task's connections take their credentials from: fixed ``Credentials``, or
    ``LiveCredentials`` that follow the directory."""

    @property
    def directory(self) -> str: ...

    def current(self) -> Credentials:
        """The credentials for a connection made now."""
        ...


def _issued(authority: x509.Certificate, certificate: x509.Certificate) -> bool:
    try:
        certificate.verify_directly_issued_by(authority)
        return True
    except (ValueError, TypeError, crypto_exceptions.InvalidSignature):
        return False


@contextlib.contextmanager
def _memory_file(content: bytes) -> Iterator[str]:
    """A path to a file holding ``content``, for ``ssl``, which loads a certificate and key
    only from files: the ones read and checked, not what the directory holds a moment
    later. An anonymous file in memory (Linux), else a private temporary file."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("tensorgrid-tls", os.MFD_CLOEXEC)
        try:
            with open(fd, "wb", closefd=False) as f:
                f.write(content)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.NamedTemporaryFile(prefix="tensorgrid-tls-") as f:  # mode 0600, removed on close
        f.write(content)
        f.flush()
        yield f.name


def _read(directory: str) -> tuple[bytes, ...]:
    """The three files' contents, read until two reads in a row agree (a directory swapped
    between two files, as kubelet swaps a Secret's, is read whole). ValueError naming the
    files that cannot be read."""
    previous: Optional[tuple[bytes, ...]] = None
    for _ in range(4):
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
        if tuple(contents) == previous:
            break
        previous = tuple(contents)
    assert previous is not None
    return previous


def _usable(contents: tuple[bytes, ...], directory: str) -> Credentials:
    """``contents`` as credentials, once both contexts are made from them and they are not
    expired; ValueError naming ``directory`` and what is wrong."""
    credentials = Credentials(contents[0], contents[1], contents[2], directory)
    try:
        credentials.server_context  # parses and matches the files now, not at the first connection
        credentials.client_context
        not_after = credentials.not_after
    except (ssl.SSLError, ValueError) as e:
        raise ValueError(f"the certificates in {TLS_DIR_ENV}={directory!r} are not usable: {e} (ca.crt must be "
                         f"PEM certificates, tls.crt and tls.key a matching certificate and key)") from None
    if not_after <= datetime.datetime.now(datetime.timezone.utc):
        raise ValueError(f"the certificates in {TLS_DIR_ENV}={directory!r} expired at {not_after:%Y-%m-%d %H:%M} UTC: "
                         f"peers refuse expired certificates. {RENEWAL_ADVICE}")
    return credentials


def load(directory: str) -> Credentials:
    """The credentials in ``directory``. ValueError naming the directory and the missing or
    unreadable files, or the certificate and key that do not go together, or their expiry."""
    return _usable(_read(directory), directory)


RENEWAL_ADVICE = ("Renew them: a TrainingJob's are in its Secrets <job>-ca and <pod>-tls (delete them all, `kubectl "
                  "delete secret -l tensorgrid.io/job-name=<job>`, and restart the whole job so every pod gets the "
                  "new CA; docs/security.md); `tensorgrid local` makes new ones at each run.")


def reload_interval_from_env(environ: Optional[Mapping[str, str]] = None) -> float:
    """``TENSORGRID_TLS_RELOAD_SECONDS`` (default 30; 0: never reload). ValueError for a bad value."""
    return liveness.seconds_from_env(os.environ if environ is None else environ, RELOAD_ENV, DEFAULT_RELOAD_SECONDS,
                                     minimum=0.0, meaning=" (how often a running task looks for renewed certificates; "
                                     "0: only at start)")


class LiveCredentials:
    """The credentials of a directory as it is now, for a task that runs longer than its
    certificates: ``current()`` reads the files again when ``reload_interval_s`` passed
    since it last did (never when 0), and takes them when they changed and are usable as
    ``load`` requires; otherwise it logs an error naming the directory (once per content)
    and keeps the credentials it has. A reload is logged at INFO with the new expiry.
    Thread-safe; a caller never waits for another one's reading."""

    def __init__(self, directory: str, reload_interval_s: float = DEFAULT_RELOAD_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.directory = directory
        self.reload_interval_s = reload_interval_s
        self._clock = clock
        self._current = load(directory)
        self._checking = threading.Lock()
        self._next_check = clock() + reload_interval_s
        self._refused: Optional[tuple[bytes, ...]] = None
        """The last contents found unusable (not logged again)."""

    def current(self) -> Credentials:
        if self.reload_interval_s and self._clock() >= self._next_check and self._checking.acquire(blocking=False):
            try:
                self._check()
            finally:
                self._next_check = self._clock() + self.reload_interval_s
                self._checking.release()
        return self._current

    def _check(self) -> None:
        """Reads the files now, and takes them if they changed and are usable."""
        try:
            contents = _read(self.directory)
        except ValueError as e:
            self._refuse((str(e).encode(),), e)
            return
        if contents == (self._current.ca, self._current.certificate, self._current.key):
            self._refused = None
            return
        try:
            credentials = _usable(contents, self.directory)
        except (ValueError, OSError) as e:
            self._refuse(contents, e)
            return
        self._current, self._refused = credentials, None
        log.info("reloaded the TLS certificates of %s=%r: new connections use them; valid until %s UTC", TLS_DIR_ENV,
                 self.directory, f"{credentials.not_after:%Y-%m-%d %H:%M}")

    def _refuse(self, contents: tuple[bytes, ...], problem: Exception) -> None:
        """Logs ``problem`` unless these ``contents`` were refused last time too."""
        if contents == self._refused:
            return
        self._refused = contents
        log.error("%s; this task keeps the certificates it has (valid until %s UTC) and reads the files again in "
                  "%g s", problem, f"{self._current.not_after:%Y-%m-%d %H:%M}", self.reload_interval_s)


RELOAD_ADVICE = ("This task takes renewed files from that directory within {interval:g} s, without a restart "
                 "(docs/security.md, \"When certificates expire\": cert-manager renews a TrainingJob's before they "
                 "expire when the operator uses it; those the operator made itself are renewed by replacing the "
                 "job's Secrets).")


class ExpiryWatch:
    """Tells, for a running task, when its certificates expire (``Credentials.not_after``
    of ``credentials.current()``, which the server's start line shows): a WARNING once less
    than ``EXPIRY_WARNING`` is left (at once if that is so already), an ERROR once they
    expired. A thread of its own waits for those instants until ``stop``; every
    ``check_every_s`` (0: never) it asks ``credentials`` for the current ones, so that a
    quiet task reloads renewed files too, and then follows their expiry."""

    def __init__(self, credentials: CredentialSource, task: str,
                 clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.timezone.utc),
                 check_every_s: float = 0.0) -> None:
        self._credentials = credentials
        self._where = f"{TLS_DIR_ENV}={credentials.directory!r}"
        self._advice = RELOAD_ADVICE.format(interval=check_every_s) if check_every_s else RENEWAL_ADVICE
        self._task = task
        self._clock = clock
        self._check_every_s = check_every_s
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="tls-expiry")
        self._thread.start()

    @property
    def not_after(self) -> datetime.datetime:
        """When the certificates in use now expire."""
        return self._credentials.current().not_after

    def _watch(self) -> None:
        warned: Optional[datetime.datetime] = None
        expired: Optional[datetime.datetime] = None
        while not self._stopped.is_set():
            not_after = self.not_after
            left = not_after - self._clock()
            if left <= datetime.timedelta(0) and expired != not_after:
                expired = not_after
                log.error("%s: the TLS certificates of %s expired at %s UTC: every new connection between this task "
                          "and its peers (a reconnect, a restarted task, a new data-channel connection) now fails its "
                          "TLS handshake, and steps that need one fail. %s", self._task, self._where,
                          f"{not_after:%Y-%m-%d %H:%M}", self._advice)
            elif datetime.timedelta(0) < left <= EXPIRY_WARNING and warned != not_after:
                warned = not_after
                log.warning("%s: the TLS certificates of %s expire at %s UTC, in %s: then peers refuse this task's "
                            "new connections. %s", self._task, self._where, f"{not_after:%Y-%m-%d %H:%M}",
                            _days(left), self._advice)
            # Until the next instant (at most a day at a time, so a clock that jumps is followed).
            until_next = (left - EXPIRY_WARNING if left > EXPIRY_WARNING else left).total_seconds()
            self._stopped.wait(min(until_next if until_next > 0 else 86400.0, self._check_every_s or 86400.0,
                                   86400.0))

    def stop(self) -> None:
        self._stopped.set()


def _days(left: datetime.timedelta) -> str:
    return f"{left.total_seconds() / 86400:.1f} days" if abs(left) >= datetime.timedelta(days=1) else (
        f"{left.total_seconds() / 3600:.1f} hours")


@functools.lru_cache(maxsize=8)
def _live(directory: str, reload_interval_s: float) -> LiveCredentials:
    return LiveCredentials(directory, reload_interval_s)


def from_env(environ: Optional[Mapping[str, str]] = None) -> Optional[LiveCredentials]:
    """This process's credentials, following their directory (one ``LiveCredentials`` per
    directory and process): those of ``TENSORGRID_TLS_DIR`` (else those it made for
    itself, ``use_for_this_process``: a single-process server's CA, or its user's CA); ``None`` (no TLS, after a
    warning, once) when it is unset and ``TENSORGRID_INSECURE=1``. InsecureNotAllowedError
    when neither is set; ValueError for a bad value of either, or of ``TENSORGRID_TLS_RELOAD_SECONDS``."""
    env = os.environ if environ is None else environ
    given = env.get(TLS_DIR_ENV, "").strip()
    directory = given or (_process_directory if environ is None else "") or ""
    insecure = env.get(INSECURE_ENV, "").strip()
    if insecure not in ("", "0", "1"):
        raise ValueError(f"{INSECURE_ENV}={insecure!r}: set it to 1 to run without TLS, or leave it unset (or 0)")
    if directory:
        # Certificates this process made for itself are never renewed, and are removed as it
        # exits (while its last calls, such as the end-of-training report, still dial): not followed.
        return _live(os.path.abspath(directory), reload_interval_from_env(env) if given else 0.0)
    if insecure != "1":
        raise InsecureNotAllowedError(
            f"no TLS certificates: set {TLS_DIR_ENV} to a directory holding {', '.join(FILES)} (the operator and "
            f"`tensorgrid local` do; `tensorgrid certs` makes them for a cluster), or set {INSECURE_ENV}=1 to run "
            f"without TLS, where any program that reaches this task's ports can read and change the model")
    if not _warned_insecure.is_set():
        _warned_insecure.set()
        log.warning("%s=1: this process talks to its peers WITHOUT TLS; any program that reaches its ports can "
                    "read and change the model, or stop the job", INSECURE_ENV)
    return None


def handshake_problem(address: str, credentials: Optional[CredentialSource], timeout_s: float = 0.5) -> str:
    """Why a TLS handshake with the task at ``address`` (``host:port``) fails with
    ``credentials``: a sentence naming the reason ``ssl`` gives, for an error message; ""
    when it succeeds, when nothing listens there, or without credentials. For a peer that
    gRPC finds unavailable: gRPC says only that it failed to connect."""
    if credentials is None:
        return ""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    current = credentials.current()
    context = current._context(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    context.set_alpn_protocols(["h2"])  # gRPC's
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as raw:
            with context.wrap_socket(raw, server_hostname=host) as tls_socket:
                tls_socket.recv(1)  # a server refusing this process's certificate says so after the handshake
    except ssl.SSLCertVerificationError as e:
        reason = e.verify_message or str(e)
        if e.verify_code == _HOSTNAME_MISMATCH:
            return f"the TLS handshake with {address} fails ({reason}): that task's certificate does not name {host}"
        if e.verify_code not in _UNKNOWN_ISSUER:
            return f"the TLS handshake with {address} fails ({reason})"
    except ssl.SSLError as e:  # an alert from the server: it refused this process's certificate
        reason = f"the task refused this process's certificate: {e.reason or e}"
    except (OSError, ValueError):
        return ""
    else:
        return ""
    authorities = ", ".join(repr(c.subject.rfc4514_string()) for c in x509.load_pem_x509_certificates(current.ca))
    return (f"the TLS handshake with {address} fails ({reason}): that task and this process are not of one CA "
            f"(this process trusts {authorities}, from {current.directory!r}); a task of another user, or of "
            f"another job, refuses this process and is refused by it")


_HOSTNAME_MISMATCH = 62
"""OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH."""
_UNKNOWN_ISSUER = {2, 7, 18, 19, 20, 21}
"""OpenSSL's verify codes of a certificate that no CA of ``ca.crt`` issued: no issuer found (2, 20, 21),
a signature of another key (7: a CA of the same name), self-signed (18, 19)."""


def open_channel(address: str, credentials: Optional[CredentialSource],
                 options: Sequence[tuple[str, object]]) -> grpc.Channel:
    """A gRPC channel to ``address``: mutual TLS with the credentials ``credentials`` hold
    now (a channel keeps them: ``peer_channel`` replaces it after a reload), plaintext without."""
    if credentials is None:
        return grpc.insecure_channel(address, options=options)
    return grpc.secure_channel(address, credentials.current().grpc_channel(), options=options)


class _ServerCertificates:
    """gRPC's certificate fetcher for a server (called before each handshake): the
    certificate and CAs of ``credentials.current()`` when they are not the ones it served last."""

    def __init__(self, credentials: CredentialSource) -> None:
        self._credentials = credentials
        self._served = credentials.current()
        self._lock = threading.Lock()

    def initial(self) -> grpc.ServerCertificateConfiguration:
        return self._served.grpc_server()

    def __call__(self) -> Optional[grpc.ServerCertificateConfiguration]:
        current = self._credentials.current()
        with self._lock:
            if current is self._served:
                return None
            self._served = current
        return current.grpc_server()


def add_port(server: grpc.Server, address: str, credentials: Optional[CredentialSource]) -> int:
    """Binds ``server`` to ``address``, with mutual TLS when ``credentials`` are given (each
    new connection's handshake with ``credentials.current()``); the bound port, 0 if none."""
    if credentials is None:
        return int(server.add_insecure_port(address))
    certificates = _ServerCertificates(credentials)
    return int(server.add_secure_port(address, grpc.dynamic_ssl_server_credentials(
        certificates.initial(), certificates, require_client_authentication=True)))
