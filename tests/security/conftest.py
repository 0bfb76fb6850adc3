"""Real certificates, generated per test session with trustme (a throwaway CA), encrypted
keys, and a self-signed certificate like a RocketMQ broker's in test mode."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from .encrypted_keys import SCHEMES, encrypt_key


@dataclass(frozen=True)
class Pki:
    ca_file: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    other_ca_file: str
    stranger_cert: str  # a client certificate signed by the other CA
    stranger_key: str


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = Path(tmp_path_factory.mktemp("pki"))
    ca = trustme.CA()
    other = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("client.example", common_name="client.example")
    stranger = other.issue_cert("stranger.example", common_name="stranger.example")
    paths = {}
    for name, blob in [
        ("ca.pem", ca.cert_pem), ("other-ca.pem", other.cert_pem),
        ("server.pem", server.cert_chain_pems[0]), ("server.key", server.private_key_pem),
        ("client.pem", client.cert_chain_pems[0]), ("client.key", client.private_key_pem),
        ("stranger.pem", stranger.cert_chain_pems[0]),
        ("stranger.key", stranger.private_key_pem),
    ]:
        path = root / name
        blob.write_to_path(str(path))
        paths[name] = str(path)
    return Pki(paths["ca.pem"], paths["server.pem"], paths["server.key"], paths["client.pem"],
               paths["client.key"], paths["other-ca.pem"], paths["stranger.pem"],
               paths["stranger.key"])


KEY_PASSWORD = "pass phrase 1"


@dataclass(frozen=True)
class EncryptedKeys:
    """The pki's server and client keys, encrypted with `KEY_PASSWORD`."""

    server_key: str
    client_key: str


@pytest.fixture(scope="session", params=SCHEMES)
def encrypted_keys(request: pytest.FixtureRequest, pki: Pki,
                   tmp_path_factory: pytest.TempPathFactory) -> EncryptedKeys:
    root = Path(tmp_path_factory.mktemp(f"keys-{request.param}"))
    paths = []
    for name in (pki.server_key, pki.client_key):
        path = root / Path(name).name
        path.write_bytes(encrypt_key(Path(name).read_bytes(), KEY_PASSWORD.encode(),
                                     request.param))
        paths.append(str(path))
    return EncryptedKeys(*paths)


@dataclass(frozen=True)
class SelfSigned:
    cert: str
    key: str


@pytest.fixture(scope="session")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> SelfSigned:
    """A self-signed certificate for CN=example.com with no subject alternative name, as a
    RocketMQ broker in test mode serves (Netty's SelfSignedCertificate)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "example.com")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .sign(key, hashes.SHA256()))
    root = Path(tmp_path_factory.mktemp("self-signed"))
    (root / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (root / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return SelfSigned(str(root / "cert.pem"), str(root / "key.pem"))
