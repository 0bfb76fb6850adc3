"""What a user reads when TLS is misconfigured: what happened and what to check, without
trio's exception names (``BrokenResourceError()``) or parentheses inside parentheses; a missing
file is named, and is not a failure to listen."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from remoting import (
    ClientConfig,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingServer,
    RemotingStartError,
    ServerConfig,
    TrioRemotingClient,
)

from ..remoting.test_error_messages_say_what_happened_and_what_to_do import nested_parentheses
from .conftest import Pki
from .test_tls import echo, start, tls_client, tls_server


async def test_a_server_wanting_a_client_certificate_says_so_plainly(
        nursery: trio.Nursery, pki: Pki) -> None:
    addr, _, _ = await start(nursery, tls_server(pki, "enforcing", tls_ca_file=pki.ca_file),
                             tls_client(pki))
    without = TrioRemotingClient(tls_client(pki))
    await nursery.start(without.serve)
    with pytest.raises((RemotingConnectError, RemotingSendRequestError)) as caught:
        await without.invoke_sync(addr, echo(), timeout=5)
    message = str(caught.value)
    assert "client certificate" in message and "ClientConfig.tls_cert_file" in message
    assert "Error()" not in message and not nested_parentheses(message), message


async def test_a_plaintext_client_of_a_tls_server_is_told_it_may_need_tls(
        nursery: trio.Nursery, pki: Pki) -> None:
    addr, _, client = await start(nursery, tls_server(pki, "enforcing"), ClientConfig())
    with pytest.raises(RemotingSendRequestError) as caught:
        await client.invoke_sync(addr, echo(), timeout=5)
    message = str(caught.value)
    assert message.startswith(f"the connection to {addr} closed before the response: ")
    assert "it may require TLS (ClientConfig.use_tls)" in message
    assert not nested_parentheses(message), message


def test_a_missing_tls_file_is_named_and_is_no_listen_failure(pki: Pki, tmp_path: Path
                                                              ) -> None:
    missing = str(tmp_path / "nowhere.pem")
    with pytest.raises(RemotingStartError) as caught:
        RemotingServer(ServerConfig(tls_mode="enforcing", tls_cert_file=missing,
                                    tls_key_file=pki.server_key))
    message = str(caught.value)
    assert "cannot listen" not in message and caught.value.addr is None
    assert repr(missing) in message and repr(pki.server_key) not in message  # the missing one
    assert "No such file" in message
