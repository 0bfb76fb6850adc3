"""``ServerConfig.tls_client_auth`` (RocketMQ's ``tls.server.need.client.auth``): "none",
"optional" or "require"; the default keeps "require when tls_ca_file is set". With "optional"
a client without a certificate is served, one whose certificate is not signed by tls_ca_file is
refused, and processors see the subject of a verified certificate in `RequestContext`."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from cryptography import x509

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext
from remoting import (
    ClientConfig,
    RemotingConnectError,
    RemotingSendRequestError,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)

from .conftest import Pki

WHO = 1


class WhoAmI(AsyncRequestProcessor):
    """Answers the subject of the caller's certificate (body absent without one)."""

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        subject = ctx.peer_certificate_subject
        response.body = None if subject is None else subject.encode()
        return response


async def serve(nursery: trio.Nursery, pki: Pki, **tls: object) -> str:
    server = TrioRemotingServer(ServerConfig(
        tls_mode="enforcing", tls_cert_file=pki.server_cert, tls_key_file=pki.server_key,
        **tls))  # type: ignore[arg-type]
    server.register_processor(WHO, WhoAmI())
    await nursery.start(server.serve)
    return f"127.0.0.1:{server.port}"


async def who(nursery: trio.Nursery, pki: Pki, addr: str, cert: str | None = None,
              key: str | None = None) -> bytes | None:
    client = TrioRemotingClient(ClientConfig(use_tls=True, tls_ca_file=pki.ca_file,
                                             tls_cert_file=cert, tls_key_file=key))
    await nursery.start(client.serve)
    response = await client.invoke_sync(addr, RemotingCommand.create_request(WHO), 5)
    assert response.code == ResponseCode.SUCCESS
    return response.body


def subject_of(cert_file: str) -> bytes:
    """The subject as RFC 4514 writes it (cryptography is the oracle)."""
    cert = x509.load_pem_x509_certificate(Path(cert_file).read_bytes())
    return cert.subject.rfc4514_string().encode()


async def test_optional_serves_a_client_without_a_certificate(nursery: trio.Nursery, pki: Pki
                                                              ) -> None:
    addr = await serve(nursery, pki, tls_ca_file=pki.ca_file, tls_client_auth="optional")
    assert await who(nursery, pki, addr) is None


async def test_optional_shows_a_verified_certificate_to_processors(nursery: trio.Nursery,
                                                                   pki: Pki) -> None:
    addr = await serve(nursery, pki, tls_ca_file=pki.ca_file, tls_client_auth="optional")
    subject = await who(nursery, pki, addr, pki.client_cert, pki.client_key)
    assert subject == subject_of(pki.client_cert)
    assert subject is not None and subject.startswith(b"CN=client.example,")


async def test_optional_refuses_a_certificate_from_an_untrusted_ca(nursery: trio.Nursery,
                                                                   pki: Pki) -> None:
    addr = await serve(nursery, pki, tls_ca_file=pki.ca_file, tls_client_auth="optional")
    # TLS 1.3: the server checks the client's certificate after the client's handshake has
    # ended, so the refusal is a failed connect or a connection closed before any answer.
    with pytest.raises((RemotingConnectError, RemotingSendRequestError), match="certificate"):
        await who(nursery, pki, addr, pki.stranger_cert, pki.stranger_key)


async def test_require_refuses_a_client_without_a_certificate(nursery: trio.Nursery, pki: Pki
                                                              ) -> None:
    addr = await serve(nursery, pki, tls_ca_file=pki.ca_file, tls_client_auth="require")
    with pytest.raises((RemotingConnectError, RemotingSendRequestError), match="certificate"):
        await who(nursery, pki, addr)
    assert await who(nursery, pki, addr, pki.client_cert, pki.client_key) == subject_of(
        pki.client_cert)


async def test_none_asks_for_no_certificate_even_with_a_ca(nursery: trio.Nursery, pki: Pki
                                                           ) -> None:
    addr = await serve(nursery, pki, tls_ca_file=pki.ca_file, tls_client_auth="none")
    assert await who(nursery, pki, addr) is None
    # a client that has one is not asked for it
    assert await who(nursery, pki, addr, pki.client_cert, pki.client_key) is None


def test_the_default_requires_a_certificate_only_with_a_ca(pki: Pki) -> None:
    assert ServerConfig(tls_ca_file=pki.ca_file).client_auth() == "require"
    assert ServerConfig().client_auth() == "none"
    assert ServerConfig(tls_client_auth="optional").client_auth() == "optional"


@pytest.mark.parametrize("auth", ["optional", "require"])
def test_asking_for_certificates_without_a_ca_is_refused(pki: Pki, auth: str) -> None:
    with pytest.raises(ValueError, match=f"tls_client_auth='{auth}' needs tls_ca_file"):
        ServerConfig(tls_mode="enforcing", tls_cert_file=pki.server_cert,
                     tls_key_file=pki.server_key, tls_client_auth=auth)  # type: ignore[arg-type]


def test_an_unknown_client_auth_is_refused_in_the_config() -> None:
    with pytest.raises(ValueError, match="tls_client_auth must be"):
        ServerConfig(tls_client_auth="OPTIONAL")  # type: ignore[arg-type]


async def test_a_plaintext_connection_has_no_subject(nursery: trio.Nursery) -> None:
    server = TrioRemotingServer()
    server.register_processor(WHO, WhoAmI())
    await nursery.start(server.serve)
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    response = await client.invoke_sync(f"127.0.0.1:{server.port}",
                                        RemotingCommand.create_request(WHO), 5)
    assert response.code == ResponseCode.SUCCESS and response.body is None


async def test_a_clients_processors_see_the_servers_certificate(nursery: trio.Nursery,
                                                               pki: Pki) -> None:
    """The other way round: the server calls the client back, and the client's processor (a
    blocking client's, on each ``io`` setting, in a thread) sees the server's subject."""
    from remoting import RemotingClient

    server = TrioRemotingServer(ServerConfig(
        tls_mode="enforcing", tls_cert_file=pki.server_cert, tls_key_file=pki.server_key))
    await nursery.start(server.serve)
    for io in ("threads", "loop"):
        client = RemotingClient(ClientConfig(use_tls=True, tls_ca_file=pki.ca_file, io=io))
        client.register_processor(WHO, WhoAmI())
        client.start()
        try:
            await trio.to_thread.run_sync(lambda: client.invoke_sync(  # noqa: B023
                f"127.0.0.1:{server.port}", RemotingCommand.create_request(99), 5))
            [channel] = server.channels()
            answer = await server.invoke_sync(channel, RemotingCommand.create_request(WHO), 5)
            assert answer.body == subject_of(pki.server_cert), io
        finally:
            await trio.to_thread.run_sync(client.shutdown)
