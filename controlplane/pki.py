"""The certificates and keys a control plane needs, made locally at start-up
(as kubeadm's `certs` phase and controller-runtime's envtest do): one CA that
signs the API server's serving certificate and every client's certificate,
and the key pair that signs and verifies ServiceAccount tokens.

A client certificate is an identity to the API server: the common name is
the user, each organisation a group (`system:masters` is cluster-admin)."""

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALID = datetime.timedelta(days=365)


def _pem_key(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write(path: Path, data: bytes, private=False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if private:
        path.chmod(0o600)
    return path


class Authority:
    """A certificate authority whose files live under `directory`."""

    def __init__(self, directory: Path, name="gpu-portal-cluster-ca"):
        self.directory = Path(directory)
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert_pem = self._sign(self._name, self._key.public_key(), ca=True).public_bytes(
            serialization.Encoding.PEM
        )
        self.cert_path = _write(self.directory / "ca.crt", self.cert_pem)

    def _sign(self, subject, public_key, *, ca=False, hosts=(), usage=None):
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if usage:
            builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        if hosts:
            names = [x509.DNSName("localhost")] + [
                x509.IPAddress(ipaddress.ip_address(host)) for host in hosts
            ]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return builder.sign(self._key, hashes.SHA256())

    def issue(self, name: str, *, groups=(), hosts=()) -> tuple[Path, Path]:
        """(certificate, key) files for a server (`hosts`) or a client (user `name`
        in `groups`)."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = [x509.NameAttribute(NameOID.COMMON_NAME, name)]
        subject += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
        usage = ExtendedKeyUsageOID.SERVER_AUTH if hosts else ExtendedKeyUsageOID.CLIENT_AUTH
        cert = self._sign(x509.Name(subject), key.public_key(), hosts=hosts, usage=usage)
        stem = name.replace(":", "-")
        return (
            _write(self.directory / f"{stem}.crt", cert.public_bytes(serialization.Encoding.PEM)),
            _write(self.directory / f"{stem}.key", _pem_key(key), private=True),
        )


def service_account_keys(directory: Path) -> tuple[Path, Path]:
    """(public, private) key files: the API server verifies tokens with the public
    one and signs them with the private one, which the controller manager's token
    controller also uses."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return (
        _write(Path(directory) / "sa.pub", public),
        _write(Path(directory) / "sa.key", _pem_key(key), private=True),
    )
