"""Certificates for fakes that stand in for an HTTPS service a client library will not let us re-point.

Some clients have their service's ``https://`` address built in (ddgs posts to
``https://html.duckduckgo.com/html/``) but take a proxy and a CA bundle. A fake then acts as that proxy: it
accepts ``CONNECT host:443`` for the hosts it fakes, answers the TLS handshake with a certificate for them
signed by a throwaway certificate authority, and serves the requests that come through the tunnel
(``FakeServer.tunnel_hosts``). The client verifies the certificate against ``ca_file``, as it verifies the real
one against the system's CAs, so nothing is switched off in it.
"""

from __future__ import annotations

import datetime
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class FakeCertificates:
    """A throwaway CA (``ca_file``, PEM) and a server certificate for ``hosts`` signed by it."""

    ca_file: Path
    chain_file: Path
    key_file: Path
    hosts: tuple[str, ...]

    def server_context(self) -> ssl.SSLContext:
        """The server side of the handshake, HTTP/1.1 only (the fakes speak nothing else)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.chain_file, self.key_file)
        context.set_alpn_protocols(["http/1.1"])
        return context


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_certificates(hosts: tuple[str, ...], folder: Path | None = None) -> FakeCertificates:
    """A CA and a certificate for ``hosts`` (valid from yesterday for a month), written to ``folder`` (a new
    temporary folder by default)."""
    folder = Path(folder or tempfile.mkdtemp(prefix="fake-tls-"))
    now = datetime.datetime.now(datetime.UTC)
    valid = (now - datetime.timedelta(days=1), now + datetime.timedelta(days=30))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("HiFi-RAG test CA")
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(valid[0]).not_valid_after(valid[1])
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder().subject_name(_name(hosts[0])).issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(valid[0]).not_valid_after(valid[1])
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    ca_file, chain_file, key_file = folder / "ca.pem", folder / "server-chain.pem", folder / "server-key.pem"
    ca_file.write_bytes(ca.public_bytes(pem))
    chain_file.write_bytes(leaf.public_bytes(pem) + ca.public_bytes(pem))
    key_file.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return FakeCertificates(ca_file, chain_file, key_file, hosts)
