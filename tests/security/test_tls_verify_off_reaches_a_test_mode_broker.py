"""``ClientConfig(tls_verify=False)``: a RocketMQ broker on its defaults (``tls.test.mode.enable``)
serves a fresh self-signed certificate for CN=example.com with no subject alternative name,
which Java clients accept (``tls.client.authServer`` defaults to false). Every verifying
option refuses it; ``tls_verify=False`` connects, with one WARNING per address."""

from __future__ import annotations

import time

import pytest
import trio
import trio.testing

from codec import RemotingCommand
from processors import AsyncEchoProcessor
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingConnectError,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)

from ..logs import capture_logs
from .conftest import SelfSigned

ECHO = 1


async def start_test_mode_server(nursery: trio.Nursery, self_signed: SelfSigned
                           ) -> tuple[str, TrioRemotingServer]:
    server = TrioRemotingServer(ServerConfig(tls_mode="permissive", tls_cert_file=self_signed.cert,
                                             tls_key_file=self_signed.key))
    server.register_processor(ECHO, AsyncEchoProcessor())
    await nursery.start(server.serve)
    return f"127.0.0.1:{server.port}", server


def echo() -> RemotingCommand:
    return RemotingCommand.create_request(ECHO, body=b"over tls")


@pytest.mark.parametrize("settings", [
    {}, {"tls_check_hostname": False}, {"tls_server_hostname": "example.com"},
])
async def test_verifying_clients_refuse_the_self_signed_certificate(
        nursery: trio.Nursery, self_signed: SelfSigned, settings: dict[str, object]) -> None:
    addr, _ = await start_test_mode_server(nursery, self_signed)
    client = TrioRemotingClient(ClientConfig(use_tls=True, **settings))  # type: ignore[arg-type]
    await nursery.start(client.serve)
    with pytest.raises(RemotingConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        await client.invoke_sync(addr, echo(), 5)


async def test_tls_verify_off_connects_and_warns_once_per_address(
        nursery: trio.Nursery, self_signed: SelfSigned) -> None:
    first, server = await start_test_mode_server(nursery, self_signed)
    second, _ = await start_test_mode_server(nursery, self_signed)
    client = TrioRemotingClient(ClientConfig(use_tls=True, tls_verify=False))
    await nursery.start(client.serve)
    with capture_logs() as logs:
        for addr in (first, second, first):
            response = await client.invoke_sync(addr, echo(), 5)
            assert response.body == b"over tls"
        for channel in server.channels():  # reconnecting is not a new address
            channel.close()
        with trio.fail_after(5):
            while client.statistics().connections > 1:
                await trio.testing.wait_all_tasks_blocked()
        assert (await client.invoke_sync(first, echo(), 5)).body == b"over tls"
    warnings = [e for e in logs if e["event"] == "tls.verification_skipped"]
    assert [(e["peer"], e["log_level"]) for e in warnings] == [
        (first, "warning"), (second, "warning")]


def test_the_blocking_client_connects_with_tls_verify_off(self_signed: SelfSigned) -> None:
    from remoting import RemotingServer

    with RemotingServer(ServerConfig(tls_mode="enforcing", tls_cert_file=self_signed.cert,
                                     tls_key_file=self_signed.key)) as server, \
            RemotingClient(ClientConfig(use_tls=True, tls_verify=False)) as client, \
            capture_logs() as logs:
        server.register_processor(ECHO, AsyncEchoProcessor())
        assert client.invoke_sync(server.addr, echo(), 5).body == b"over tls"
        for channel in server.channels():  # reconnecting is not a new address
            channel.close()
        deadline = time.monotonic() + 5
        while client.statistics().connections and time.monotonic() < deadline:
            time.sleep(0.01)
        assert client.invoke_sync(server.addr, echo(), 5).body == b"over tls"
    warnings = [e for e in logs if e["event"] == "tls.verification_skipped"]
    assert [(e["peer"], e["log_level"]) for e in warnings] == [(server.addr, "warning")]
