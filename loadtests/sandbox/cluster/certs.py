"""The emulated API server's TLS material: its own CA and a serving certificate.

Real clients (kubectl, the official client, kubernetes-asyncio) verify the
server against the CA named in the kubeconfig, so the sandbox makes a small
PKI of its own: a self-signed CA and a serving certificate for ``127.0.0.1``,
``localhost`` and the in-cluster names (``kubernetes.default.svc``...), both
ECDSA P-256 (a few milliseconds to generate, accepted by Go and OpenSSL).
The CA is written as ``ca.crt`` so clients can point at it; the serving key
never leaves ``certs_dir``.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["ServingCertificates", "make_certificates"]

_DNS_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True, slots=True)
class ServingCertificates:
    ca_path: Path  # PEM CA certificate: what clients trust
    cert_path: Path  # PEM serving certificate
    key_path: Path  # PEM serving key

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_path, self.key_path)
        return context

    def client_context(self) -> ssl.SSLContext:
        """An SSL context that trusts this CA (for tests and in-process clients)."""
        return ssl.create_default_context(cafile=str(self.ca_path))


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "tidal-sandbox"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def make_certificates(
    certs_dir: Path, *, hosts: tuple[str, ...] = ("127.0.0.1",), valid_days: int = 365
) -> ServingCertificates:
    """Create a CA and a serving certificate for ``hosts`` (IPs or DNS names) in ``certs_dir``."""
    certs_dir.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    not_before = now - datetime.timedelta(minutes=5)  # tolerate small clock skew
    not_after = now + datetime.timedelta(days=valid_days)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("tidal-sandbox-ca")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in _DNS_NAMES]
    for host in ("127.0.0.1", *hosts):
        try:
            entry: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            entry = x509.DNSName(host)
        if entry not in sans:
            sans.append(entry)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("kube-apiserver"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )

    ca_path = certs_dir / "ca.crt"
    cert_path = certs_dir / "apiserver.crt"
    key_path = certs_dir / "apiserver.key"
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ServingCertificates(ca_path=ca_path, cert_path=cert_path, key_path=key_path)
