"""TLS for the metrics server (``--metrics-secure``): a certificate from files, or a self-signed one.

``cli`` builds a ``ServerTLS`` and ``health`` asks it for the current ``ssl.SSLContext`` at every accepted
connection. As in controller-runtime: with ``--metrics-cert-path`` the certificate and key are read from
that directory (a mounted Secret, e.g. from cert-manager) and read again when they change, checked at most
every ``recheck`` seconds, so a renewed certificate is served without a restart; a broken pair (half
written, mismatched) is logged and the previous one kept. Without it a self-signed certificate is made at
start, in memory: scrapers skip verification for it (the ServiceMonitor in deploy/prometheus does), and
callers are still authenticated by their token when ``--metrics-require-rbac`` is on.
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
import ssl
import tempfile
import threading
import time
from ipaddress import ip_address
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from hybrid_operator.errors import ConfigError

log = logging.getLogger(__name__)


def self_signed(hosts: list[str], days: int = 365) -> tuple[bytes, bytes]:
    """A self-signed certificate for ``hosts`` (names or IP addresses) and its key, both PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"hybrid-operator-metrics@{int(time.time())}")])
    now = datetime.datetime.now(datetime.UTC)
    alt: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):  # unique, in order
        try:
            alt.append(x509.IPAddress(ip_address(host)))
        except ValueError:
            alt.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def _context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context


def _context_from_pem(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    # The ssl module loads certificates from files only: a private dir that is gone right after.
    with tempfile.TemporaryDirectory(prefix="hyop-tls-") as tmp:
        cert, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert.write_bytes(cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(key_pem)
        return _context(cert, key)


class ServerTLS:
    """The current server-side TLS context; thread-safe."""

    def __init__(self, cert: Path | None = None, key: Path | None = None, recheck: float = 10.0) -> None:
        self._files = (cert, key) if cert is not None and key is not None else None
        self._recheck = recheck
        self._lock = threading.Lock()
        self._checked = time.monotonic()
        if self._files is None:
            hosts = ["localhost", socket.gethostname(), "127.0.0.1", "::1"]
            self._context = _context_from_pem(*self_signed(hosts))
            self._stamp: tuple[int, ...] = ()
            self.source = "a self-signed certificate made at start"
        else:
            try:
                self._stamp = self._stat()
                self._context = _context(*self._files)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"cannot load the metrics certificate {cert} and key {key}: {exc}") from exc
            self.source = f"{cert} (reloaded when it changes)"

    @classmethod
    def from_dir(cls, directory: Path, cert_name: str, key_name: str) -> ServerTLS:
        return cls(directory / cert_name, directory / key_name)

    def _stat(self) -> tuple[int, ...]:
        assert self._files is not None
        stats = [os.stat(p) for p in self._files]  # follows the symbolic links a Secret volume swaps
        return tuple(v for s in stats for v in (s.st_ino, s.st_mtime_ns, s.st_size))

    def context(self) -> ssl.SSLContext:
        if self._files is not None and time.monotonic() - self._checked >= self._recheck:
            self._maybe_reload()
        return self._context

    def _maybe_reload(self) -> None:
        assert self._files is not None
        with self._lock:
            self._checked = time.monotonic()
            try:
                stamp = self._stat()
                if stamp == self._stamp:
                    return
                self._context = _context(*self._files)
                self._stamp = stamp
            except (OSError, ssl.SSLError) as exc:
                log.error("metrics certificate not reloaded, still serving the previous one: %s", exc)
                return
        log.info("metrics certificate reloaded from %s", self._files[0])
