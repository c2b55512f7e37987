"""Certificate directories laid out and updated as kubelet updates a mounted Secret, for
the tests of certificate reloads.

kubelet's atomic writer (pkg/volume/util/atomic_writer.go) writes a Secret's files into a
new hidden directory ``..<timestamp>``, points the symlink ``..data`` at it by renaming a
fresh symlink over the old one (one atomic step), and exposes each file as a symlink
``name -> ..data/name``; then it removes the old directory. A reader that opens
``tls.crt`` reads the old files or the new ones, never a mix within one file.
"""

from __future__ import annotations

import datetime
import os
from typing import Sequence

import grpc

from tensorgrid.distributed.rpc import certificates
from tensorgrid.distributed.rpc.transport import tls


class SecretVolume:
    """A directory holding ``ca.crt``, ``tls.crt`` and ``tls.key`` as a Secret volume does."""

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(path, mode=0o700, exist_ok=True)
        self._version = 0

    def write(self, files: dict[str, bytes]) -> None:
        """Replaces every file at once, as kubelet does when the Secret changed."""
        self._version += 1
        version = f"..2026_01_01_00_00_00.{self._version:09d}"
        os.mkdir(os.path.join(self.path, version), 0o700)
        for name, content in files.items():
            with open(os.path.join(self.path, version, name), "wb") as f:
                f.write(content)
        data = os.path.join(self.path, "..data")
        old = os.readlink(data) if os.path.islink(data) else None
        os.symlink(version, os.path.join(self.path, "..data_tmp"))
        os.rename(os.path.join(self.path, "..data_tmp"), data)
        for name in files:
            if not os.path.islink(os.path.join(self.path, name)):
                os.symlink(os.path.join("..data", name), os.path.join(self.path, name))
        if old is not None:
            for name in os.listdir(os.path.join(self.path, old)):
                os.remove(os.path.join(self.path, old, name))
            os.rmdir(os.path.join(self.path, old))

    def write_certificates(self, trusted: Sequence[certificates.Authority], issuer: certificates.Authority,
                           common_name: str, validity: datetime.timedelta = certificates.DEFAULT_VALIDITY) -> bytes:
        """A new key and a loopback certificate from ``issuer`` for ``common_name``, with
        ``ca.crt`` holding every CA of ``trusted``; returns the certificate (PEM)."""
        certificate, key = certificates.issue(issuer, common_name, certificates.LOOPBACK_NAMES, validity)
        self.write({"ca.crt": b"".join(ca.certificate_pem for ca in trusted), "tls.crt": certificate, "tls.key": key})
        return certificate


def grpc_answers(address: str, client: tls.Credentials) -> bool:
    """Whether the gRPC server at ``address`` completes a call from a client showing
    ``client``'s certificate (any answer counts; a refused handshake is UNAVAILABLE)."""
    channel = grpc.secure_channel(address, client.grpc_channel())
    try:
        channel.unary_unary("/tensorgrid.v1.Worker/GetStatus")(b"", timeout=5)
        return True
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e
        return False
    finally:
        channel.close()
