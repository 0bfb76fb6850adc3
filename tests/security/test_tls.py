"""TLS with real certificates: server modes, hostname checks, mutual TLS (SPEC 8)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from codec import RemotingCommand
from processors import AsyncEchoProcessor
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingServer,
    RemotingStartError,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)

from ..logs import capture_logs
from .conftest import Pki

ECHO = 1


async def start(nursery: trio.Nursery, server_cfg: ServerConfig,
                client_cfg: ClientConfig) -> tuple[str, TrioRemotingServer, TrioRemotingClient]:
    server = TrioRemotingServer(server_cfg)
    server.register_processor(ECHO, AsyncEchoProcessor())
    await nursery.start(server.serve)
    client = TrioRemotingClient(client_cfg)
    await nursery.start(client.serve)
    return f"127.0.0.1:{server.port}", server, client


def tls_server(pki: Pki, mode: str, **kw: object) -> ServerConfig:
    return ServerConfig(tls_mode=mode, tls_cert_file=pki.server_cert,  # type: ignore[arg-type]
                        tls_key_file=pki.server_key, **kw)  # type: ignore[arg-type]


def tls_client(pki: Pki, **kw: object) -> ClientConfig:
    return ClientConfig(use_tls=True, tls_ca_file=pki.ca_file, **kw)  # type: ignore[arg-type]


def echo(body: bytes = b"secret") -> RemotingCommand:
    return RemotingCommand.create_request(ECHO, body=body)


@pytest.mark.parametrize("mode", ["enforcing", "permissive"])
async def test_tls_client_talks_to_tls_server(nursery: trio.Nursery, pki: Pki, mode: str
                                              ) -> None:
    addr, server, client = await start(nursery, tls_server(pki, mode), tls_client(pki))
    assert (await client.invoke_sync(addr, echo(), 5)).body == b"secret"
    [channel] = server.channels()
    assert channel.tls_version is not None and channel.tls_version.startswith("TLS")


async def test_permissive_server_also_serves_plaintext(nursery: trio.Nursery, pki: Pki) -> None:
    addr, server, _ = await start(nursery, tls_server(pki, "permissive"), tls_client(pki))
    plain = TrioRemotingClient()
    await nursery.start(plain.serve)
    assert (await plain.invoke_sync(addr, echo(b"plain"), 5)).body == b"plain"


@pytest.mark.parametrize("mode", ["enforcing", "permissive"])
async def test_a_peer_resetting_before_its_first_byte_closes_only_its_connection(
        nursery: trio.Nursery, pki: Pki, mode: str) -> None:
    # In permissive mode the peek at the first byte raised ConnectionResetError out of the
    # acceptor: the server's event loop crashed and refused every later connection. Load
    # balancers' health checks close this way (SO_LINGER 0).
    import socket
    import struct

    addr, server, client = await start(nursery, tls_server(pki, mode), tls_client(pki))
    for _ in range(5):
        raw = trio.socket.socket()
        await raw.connect(("127.0.0.1", server.port))
        await trio.testing.wait_all_tasks_blocked(0.05)  # accepted: waiting for a first byte
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        raw.close()  # RST
    with trio.fail_after(5):
        await trio.testing.wait_all_tasks_blocked(0.05)  # the acceptor has seen the resets
        assert server.statistics().admitted == 0
        assert (await client.invoke_sync(addr, echo(), 5)).body == b"secret"


async def test_plaintext_client_against_enforcing_server_fails_fast(
    nursery: trio.Nursery, pki: Pki,
) -> None:
    addr, _, _ = await start(nursery, tls_server(pki, "enforcing"), tls_client(pki))
    plain = TrioRemotingClient()
    await nursery.start(plain.serve)
    # refused with a reason, not RemotingTimeoutError: it did not wait for its timeout
    with pytest.raises(RemotingSendRequestError, match="require TLS"):
        await plain.invoke_sync(addr, echo(), timeout=10)


async def test_tls_client_against_plaintext_server_is_a_clear_connect_error(
    nursery: trio.Nursery, pki: Pki,
) -> None:
    addr, _, client = await start(nursery, ServerConfig(), tls_client(pki))
    with capture_logs() as logs, pytest.raises(RemotingConnectError, match="TLS handshake"):
        await client.invoke_sync(addr, echo(), timeout=5)
    assert any(e.get("protocol") == "TLS" for e in logs if e["event"] == "connection.broken")


async def test_untrusted_server_certificate_is_refused(nursery: trio.Nursery, pki: Pki) -> None:
    addr, _, _ = await start(nursery, tls_server(pki, "enforcing"), tls_client(pki))
    wrong_ca = TrioRemotingClient(ClientConfig(use_tls=True, tls_ca_file=pki.other_ca_file))
    await nursery.start(wrong_ca.serve)
    with pytest.raises(RemotingConnectError, match="certificate"):
        await wrong_ca.invoke_sync(addr, echo(), timeout=5)


async def test_hostname_is_checked_by_default(nursery: trio.Nursery, pki: Pki) -> None:
    addr, _, _ = await start(nursery, tls_server(pki, "enforcing"), tls_client(pki))
    wrong_name = TrioRemotingClient(tls_client(pki, tls_server_hostname="evil.example"))
    await nursery.start(wrong_name.serve)
    with pytest.raises(RemotingConnectError, match="TLS handshake failed"):
        await wrong_name.invoke_sync(addr, echo(), timeout=5)
    by_name = TrioRemotingClient(tls_client(pki, tls_server_hostname="localhost"))
    await nursery.start(by_name.serve)
    assert (await by_name.invoke_sync(addr, echo(b"ok"), 5)).body == b"ok"


async def test_mutual_tls_requires_a_client_certificate(nursery: trio.Nursery, pki: Pki) -> None:
    addr, _, _ = await start(
        nursery, tls_server(pki, "enforcing", tls_ca_file=pki.ca_file),
        tls_client(pki, tls_cert_file=pki.client_cert, tls_key_file=pki.client_key))
    with_cert = TrioRemotingClient(tls_client(pki, tls_cert_file=pki.client_cert,
                                              tls_key_file=pki.client_key))
    await nursery.start(with_cert.serve)
    assert (await with_cert.invoke_sync(addr, echo(b"m"), 5)).body == b"m"
    without = TrioRemotingClient(tls_client(pki))
    await nursery.start(without.serve)
    # TLS 1.3: the server checks the client certificate after the client's handshake ends,
    # so the refusal shows up as a failed connect or a connection closed before any answer.
    with pytest.raises((RemotingConnectError, RemotingSendRequestError),
                       match="certificate"):  # the message says what is missing
        await without.invoke_sync(addr, echo(), timeout=5)


def test_tls_on_without_certificate_files_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="tls_cert_file"):
        TrioRemotingServer(ServerConfig(tls_mode="enforcing"))


def unloadable(pki: Pki, tmp_path: Path, problem: str) -> tuple[str, str, str]:
    """Return (certificate, key, words of the error) for one way TLS files go wrong."""
    if problem == "missing":
        return str(tmp_path / "nowhere.pem"), pki.server_key, "No such file"
    if problem == "not PEM":
        text = tmp_path / "notes.txt"
        text.write_text("not a certificate\n")
        return str(text), str(text), "not PEM"
    return pki.server_cert, pki.client_key, "does not match"  # another certificate's key


@pytest.mark.parametrize("problem", ["missing", "not PEM", "key of another certificate"])
def test_a_server_whose_tls_files_do_not_load_raises_start_error(
    pki: Pki, tmp_path: Path, problem: str,
) -> None:
    cert, key, words = unloadable(pki, tmp_path, problem)
    with pytest.raises(RemotingStartError, match=words) as info:
        RemotingServer(ServerConfig(tls_mode="enforcing", tls_cert_file=cert, tls_key_file=key))
    assert isinstance(info.value, OSError)  # what the bare error was: except OSError still works
    assert cert in str(info.value) and "tls_cert_file" in str(info.value)


@pytest.mark.parametrize("problem", ["missing", "not PEM", "key of another certificate"])
def test_a_client_whose_tls_files_do_not_load_raises_start_error(
    pki: Pki, tmp_path: Path, problem: str,
) -> None:
    cert, key, words = unloadable(pki, tmp_path, problem)
    with pytest.raises(RemotingStartError, match=words) as info:
        RemotingClient(ClientConfig(use_tls=True, tls_cert_file=cert, tls_key_file=key))
    assert info.value.addr is None and str(info.value).startswith("cannot start: ")
    with pytest.raises(RemotingStartError, match=f"tls_ca_file '{tmp_path}"):
        RemotingClient(ClientConfig(use_tls=True, tls_ca_file=str(tmp_path / "no-ca.pem")))


def test_a_client_key_without_its_certificate_is_refused(pki: Pki) -> None:
    # It was ignored: the client connected without a certificate, and a server requiring
    # one then closed the connection with no hint why.
    with pytest.raises(ValueError, match="tls_key_file needs tls_cert_file"):
        RemotingClient(tls_client(pki, tls_key_file=pki.client_key))
    with pytest.raises(ValueError, match="tls_key_file needs tls_cert_file"):
        TrioRemotingClient(tls_client(pki, tls_key_file=pki.client_key))


def test_a_client_certificate_without_a_key_says_the_key_is_missing(pki: Pki) -> None:
    with pytest.raises(RemotingStartError, match="no tls_key_file"):
        RemotingClient(tls_client(pki, tls_cert_file=pki.client_cert))


@pytest.mark.parametrize("name", [".leading.dot", "a\x00b", "", "xn--a.b" + "\udc80"])
def test_a_server_hostname_ssl_would_refuse_is_refused_in_the_config(name: str) -> None:
    # ssl refused it at the first call, reported as "the call failed unexpectedly".
    with pytest.raises(ValueError, match="ClientConfig.tls_server_hostname must be a host name"):
        ClientConfig(use_tls=True, tls_server_hostname=name)
