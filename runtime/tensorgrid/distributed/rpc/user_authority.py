"""Mutual TLS with no set-up for tasks started by hand on one machine: a CA per user, kept in
the user's state directory, and a certificate per process signed by it.

Why it exists: TF1 programs start each task by hand (``python train.py --job_name=ps``, a
cluster on ``localhost``), with nobody to make certificates: no operator, no ``tensorgrid
local``, no ``TENSORGRID_TLS_DIR``. Every task must still refuse strangers. The one boundary
that exists between processes of one machine is the user: so every process of a user takes
its certificate from that user's CA, whose key only that user can read, and processes of
the same user trust each other, while another user's processes (another CA) fail the TLS
handshake (and the data channel's Unix socket refuses them by their user id too).

"This machine" means: every address of the cluster, as written in its spec, is ``localhost``
or a loopback IP address (``127.0.0.0/8``, ``::1``). No name is resolved: a host name of
this machine, or any other name, could resolve to another machine for a peer, and a task
addressed so listens on every interface (``ports.listen_host``). Any other address keeps
the refusal, which now names ``tensorgrid certs`` (certificates for a cluster across
machines).

Where: ``$XDG_STATE_HOME/tensorgrid`` (an absolute ``XDG_STATE_HOME``), else
``~/.local/state/tensorgrid``: mode 0700, owned by the user; ``ca.crt`` and ``ca.key``
(mode 0600) made on first use. Processes that start at once agree on one CA: they take an
exclusive lock (``ca.lock``, ``flock``) while they read or make it, and its files are
written under temporary names and renamed into place, so none is ever read half written.
A process's own certificate (for the loopback names and the cluster's hosts) is made fresh
in a private temporary directory, removed when the process exits.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import fcntl
import ipaddress
import logging
import os
import shutil
import stat
import tempfile
import threading
from typing import Mapping, Optional, Sequence

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography import x509

from tensorgrid.distributed.rpc import certificates
from tensorgrid.distributed.rpc.transport import tls

log = logging.getLogger("tensorgrid.tls")

STATE_HOME_ENV = "XDG_STATE_HOME"
CA_CERT_FILE, CA_KEY_FILE, LOCK_FILE = "ca.crt", "ca.key", "ca.lock"
CA_VALIDITY = datetime.timedelta(days=5 * 365)
"""How long a user's CA is valid; one that ends within ``certificates.DEFAULT_VALIDITY`` is replaced."""

_lock = threading.Lock()
_directory: Optional[str] = None
"""This process's certificate directory made here, once made."""
_names: frozenset[str] = frozenset()
"""The names that directory's certificate carries."""


def is_this_machine(host: str) -> bool:
    """Whether ``host`` (of a cluster address, without its port; IPv6 in brackets or not) is
    this machine as this module counts it: ``localhost``, or a loopback IP address written
    out. Names are not resolved, so ``127.example.com`` or this machine's host name are not."""
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback and not (isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped)


def state_directory(environ: Optional[Mapping[str, str]] = None) -> str:
    """Where this user's CA lives: ``$XDG_STATE_HOME/tensorgrid`` when that is an absolute path
    (the XDG spec ignores a relative one), else ``~/.local/state/tensorgrid``."""
    env = os.environ if environ is None else environ
    base = env.get(STATE_HOME_ENV, "").strip()
    if not os.path.isabs(base):
        home = env.get("HOME", "").strip() or os.path.expanduser("~")
        base = os.path.join(home, ".local", "state")
    return os.path.join(base, "tensorgrid")


def refusal(foreign: Sequence[str]) -> tls.InsecureNotAllowedError:
    """The error of a task or client given no certificates whose cluster reaches beyond this machine."""
    return tls.InsecureNotAllowedError(
        f"no TLS certificates, and {', '.join(repr(a) for a in foreign)} {'is' if len(foreign) == 1 else 'are'} not "
        f"on this machine (only localhost and loopback addresses such as 127.0.0.1 get the per-user CA): run "
        f"`tensorgrid certs --cluster '<cluster JSON>' --out DIR` (or with TF_CONFIG set) and start each task with "
        f"{tls.TLS_DIR_ENV} set to its directory, or set {tls.INSECURE_ENV}=1 to run without TLS, where any program "
        f"that reaches the tasks' ports can read and change the model")


def ensure_for(addresses: Sequence[str]) -> None:
    """Before a task serves, or a client dials, ``addresses`` (``host:port``) without
    ``TENSORGRID_TLS_DIR`` or ``TENSORGRID_INSECURE=1``: when every one is on this machine,
    makes this process's credentials from the user's CA (``tls.use_for_this_process``);
    otherwise raises ``refusal`` naming the others. Does nothing when either variable is set,
    or this process has credentials of its own already (``create_local_server``'s) or made
    here that name every host given. ValueError when the state directory is unsafe to use."""
    if os.environ.get(tls.TLS_DIR_ENV, "").strip() or os.environ.get(tls.INSECURE_ENV, "").strip() not in ("", "0"):
        return  # certificates given, or no TLS asked for (tls.from_env checks the value)
    global _directory, _names
    with _lock:
        made_here = tls.process_directory()
        if made_here is not None and made_here != _directory:
            return
        foreign = [a for a in addresses if not is_this_machine(certificates.host_of(a))]
        if foreign:
            raise refusal(foreign)
        names = frozenset(certificates.LOOPBACK_NAMES) | {certificates.host_of(a).lower() for a in addresses}
        if _directory is not None and names <= _names:
            return
        names |= _names
        authority, where = user_authority()
        root = tempfile.mkdtemp(prefix="tensorgrid-user-tls-")
        atexit.register(shutil.rmtree, root, True)
        validity = min(certificates.DEFAULT_VALIDITY,
                       authority.certificate.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc))
        directory = certificates.write_task_directory(os.path.join(root, "task"), authority,
                                                      f"tensorgrid task of uid {os.getuid()}", sorted(names), validity)
        first = _directory is None
        _directory, _names = directory, names
        tls.use_for_this_process(directory)
    if first:
        log.info("no %s: tasks on this machine use mutual TLS with this user's CA in %s (key readable by this user "
                 "only); processes of other users are refused. Across machines: `tensorgrid certs`", tls.TLS_DIR_ENV,
                 where)


def user_authority(directory: Optional[str] = None) -> tuple[certificates.Authority, str]:
    """This user's CA, made now if there is none (or it ends within
    ``certificates.DEFAULT_VALIDITY``), and the directory holding it (default
    ``state_directory()``). Processes calling it at once get the same CA. ValueError when the
    directory or the key is not this user's alone, or the files are not a CA and its key."""
    directory = directory or state_directory()
    _private_directory(directory)
    fd = os.open(os.path.join(directory, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        authority = _read_authority(directory)
        if authority is None:
            now = datetime.datetime.now(datetime.timezone.utc)
            authority = certificates.new_authority(f"tensorgrid CA of uid {os.getuid()}, made {now:%Y-%m-%d %H:%M:%S} "
                                                   f"UTC", CA_VALIDITY)
            _write_authority(directory, authority)
            log.info("made this user's tensorgrid CA in %s (valid until %s UTC)", directory,
                     f"{authority.certificate.not_valid_after_utc:%Y-%m-%d}")
        return authority, directory
    finally:
        os.close(fd)  # releases the lock


def _private_directory(directory: str) -> None:
    """Makes ``directory`` (0700) and its parents when missing; ValueError when it is not a
    directory of this user's, and mode 0700 when it was open to others (nothing secret was
    in it: the key is checked on its own)."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        what = f"owned by uid {info.st_uid}" if stat.S_ISDIR(info.st_mode) else "not a directory (a link?)"
        raise ValueError(f"{directory!r} must be a directory of this user's (uid {os.getuid()}) to hold the "
                         f"tensorgrid CA, and it is {what}: set {STATE_HOME_ENV} to another directory, or "
                         f"{tls.TLS_DIR_ENV} to certificates")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(directory, 0o700)


def _read_authority(directory: str) -> Optional[certificates.Authority]:
    """The CA in ``directory``; None when there is none yet, or it ends too soon to sign a
    certificate (then it is replaced, logged). ValueError for files that are not this user's
    private key and its CA certificate."""
    key_path, cert_path = os.path.join(directory, CA_KEY_FILE), os.path.join(directory, CA_CERT_FILE)
    present = [p for p in (key_path, cert_path) if os.path.lexists(p)]
    if not present:
        return None
    remedy = f"remove {directory!r} to make a new CA (tasks running with the old one must be restarted)"
    if len(present) == 1:
        raise ValueError(f"{present[0]!r} is there without {CA_KEY_FILE if present[0] == cert_path else CA_CERT_FILE}: "
                         f"{remedy}")
    key_fd = os.open(key_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(key_fd, "rb") as f:
        info = os.fstat(f.fileno())
        if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
            raise ValueError(f"{key_path!r} (owner uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):04o}) must be "
                             f"this user's and readable by it only (0600): whoever read it can join your tasks; "
                             f"{remedy}")
        key_pem = f.read()
    with open(cert_path, "rb") as f:
        cert_pem = f.read()
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
        certificate = x509.load_pem_x509_certificate(cert_pem)
    except ValueError as e:
        raise ValueError(f"{key_path!r} and {cert_path!r} are not a PEM key and certificate ({e}): {remedy}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != certificate.public_key():
        raise ValueError(f"{key_path!r} is not the key of {cert_path!r}: {remedy}")
    ends = certificate.not_valid_after_utc
    if ends - datetime.datetime.now(datetime.timezone.utc) <= certificates.DEFAULT_VALIDITY:
        log.warning("this user's tensorgrid CA in %s ends at %s UTC: making a new one (tasks still running with the "
                    "old one do not trust those started from now on: restart them)", directory, f"{ends:%Y-%m-%d}")
        return None
    return certificates.Authority(key, certificate)


def _write_authority(directory: str, authority: certificates.Authority) -> None:
    """Writes the CA's key (0600) and then its certificate, each under a temporary name renamed
    into place: a reader sees the old file or the new one, never a part."""
    key_pem = authority.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption())
    for name, content, mode in ((CA_KEY_FILE, key_pem, 0o600), (CA_CERT_FILE, authority.certificate_pem, 0o644)):
        temporary = os.path.join(directory, f".{name}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)  # left by a process of this pid that died writing it
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, os.path.join(directory, name))
