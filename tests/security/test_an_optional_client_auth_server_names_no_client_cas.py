"""With ``tls_client_auth="optional"`` our server asks for a client certificate without
naming the CAs it accepts (Python's ``ssl`` cannot: it binds no ``SSL_CTX_set_client_CA_list``),
where a Java server names them. A client holding a certificate of another CA therefore sends
it (nothing tells it not to) and is refused, while a Java server's client would have sent
none and been served: docs/security.md, Client certificates. The workarounds (no certificate,
or one of ``tls_ca_file``) are tested in test_tls_client_auth_modes.py."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import trio

from .conftest import Pki
from .test_tls_client_auth_modes import serve


def _handshake_report(addr: str, pki: Pki, tls: str) -> str:
    """What ``openssl s_client`` prints of a handshake with the server at ``addr`` (``tls``:
    -tls1_2 or -tls1_3), presenting our CA's client certificate."""
    openssl = shutil.which("openssl")
    assert openssl is not None, "the openssl command is needed (Debian: apt-get install openssl)"
    done = subprocess.run(
        [openssl, "s_client", "-connect", addr, tls, "-CAfile", pki.ca_file,
         "-cert", pki.client_cert, "-key", pki.client_key],
        input="", capture_output=True, text=True, timeout=60, check=False)
    return done.stdout + done.stderr


@pytest.mark.parametrize("tls", ["-tls1_2", "-tls1_3"])
async def test_the_certificate_request_names_no_ca(nursery: trio.Nursery, pki: Pki,
                                                   tls: str) -> None:
    addr = await serve(nursery, pki, tls_ca_file=pki.ca_file, tls_client_auth="optional")
    report = await trio.to_thread.run_sync(_handshake_report, addr, pki, tls)
    assert "Verify return code: 0 (ok)" in report, report[-2000:]  # the handshake went through
    assert "No client certificate CA names sent" in report, report[-2000:]
    assert "Acceptable client certificate CA names" not in report
