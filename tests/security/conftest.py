"""Real certificates, generated per test session with trustme (a throwaway CA)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme


@dataclass(frozen=True)
class Pki:
    ca_file: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    other_ca_file: str


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = Path(tmp_path_factory.mktemp("pki"))
    ca = trustme.CA()
    other = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("client.example")
    paths = {}
    for name, blob in [
        ("ca.pem", ca.cert_pem), ("other-ca.pem", other.cert_pem),
        ("server.pem", server.cert_chain_pems[0]), ("server.key", server.private_key_pem),
        ("client.pem", client.cert_chain_pems[0]), ("client.key", client.private_key_pem),
    ]:
        path = root / name
        blob.write_to_path(str(path))
        paths[name] = str(path)
    return Pki(paths["ca.pem"], paths["server.pem"], paths["server.key"], paths["client.pem"],
               paths["client.key"], paths["other-ca.pem"])
