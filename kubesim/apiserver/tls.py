"""Serving HTTPS, as an API server does: a throwaway certificate authority and a
serving certificate for 127.0.0.1 and localhost, made at start-up. kubectl sends
credentials (a bearer token) only over TLS, so authentication needs it."""

import datetime
import ipaddress
import os
import ssl
import tempfile

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _certificate(subject, issuer, public_key, signing_key, *, ca, hosts=()):
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if hosts:
        names = [x509.DNSName("localhost")] + [
            x509.IPAddress(ipaddress.ip_address(h)) for h in hosts
        ]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(signing_key, hashes.SHA256())


class Certificates:
    """A CA (`ca_pem`, for clients to trust) and the server's key and certificate."""

    def __init__(self, hosts=("127.0.0.1",)):
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = _certificate("kubesim-ca", "kubesim-ca", ca_key.public_key(), ca_key, ca=True)
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(
            "kube-apiserver", "kubesim-ca", key.public_key(), ca_key, ca=False, hosts=hosts
        )
        self.ca_pem = ca.public_bytes(serialization.Encoding.PEM)
        self._cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        self._key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        # load_cert_chain reads files only: write them for the moment it takes.
        with tempfile.TemporaryDirectory(prefix="kubesim-tls-") as directory:
            cert, key = os.path.join(directory, "tls.crt"), os.path.join(directory, "tls.key")
            with open(cert, "wb") as handle:
                handle.write(self._cert_pem)
            with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as handle:
                handle.write(self._key_pem)
            context.load_cert_chain(cert, key)
        return context
