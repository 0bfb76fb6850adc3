"""GO_AWAY from a draining server (`drain()`: it still accepts connections): a call with
``addr=None`` is resent once to the next address of the list, and new calls stay there; the
connection that got GO_AWAY finishes the calls it carries and is then closed (as gRPC does on
GOAWAY), so no connection is left open behind the client's back."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext
from remoting import (
    RemotingSendRequestError,
    RemotingTimeoutError,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)

from ..factories import req
from .conftest import GATED_ASYNC, AsyncGate, addr_of

WHO = 50


class Who(AsyncRequestProcessor):
    """Answers with the name of its server."""

    def __init__(self, name: bytes) -> None:
        self.name = name

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = self.name
        return response


async def start_server(nursery: trio.Nursery, name: bytes) -> TrioRemotingServer:
    server = TrioRemotingServer(ServerConfig())
    server.register_processor(WHO, Who(name))
    await nursery.start(server.serve)
    return server


async def wait_connections(client: TrioRemotingClient, n: int) -> None:
    with trio.fail_after(5):
        while client.statistics().connections != n:
            await trio.testing.wait_all_tasks_blocked()


async def test_a_call_answered_go_away_is_resent_to_the_next_address_and_calls_stay_there(
    nursery: trio.Nursery, client: TrioRemotingClient,
) -> None:
    a, b = await start_server(nursery, b"A"), await start_server(nursery, b"B")
    names = {addr_of(a): (a, b"A"), addr_of(b): (b, b"B")}
    client.update_name_server_address_list(list(names))
    await client.invoke_sync(None, req(WHO), 5)
    draining, _ = names[client.current_name_server]  # type: ignore[index]
    [(other_addr, (_, other_name))] = [(k, v) for k, v in names.items() if v[0] is not draining]
    draining.drain()
    for _ in range(5):
        with trio.fail_after(5):
            response = await client.invoke_sync(None, req(WHO), 5)
        assert response.body == other_name
    assert client.current_name_server == other_addr
    stats = client.statistics()
    assert stats.go_away_received == 1  # only the first call met the draining server
    await wait_connections(client, 1)  # the one to the draining server is closed


async def test_a_connection_told_go_away_finishes_its_calls_then_closes(
    nursery: trio.Nursery, client: TrioRemotingClient,
) -> None:
    a, b = await start_server(nursery, b"A"), await start_server(nursery, b"B")
    gate = AsyncGate()
    for s in (a, b):
        s.register_processor(GATED_ASYNC, gate)
    client.update_name_server_address_list([addr_of(a), addr_of(b)])
    await client.invoke_sync(None, req(WHO), 5)
    draining = a if client.current_name_server == addr_of(a) else b
    held = await client.invoke_async(None, req(GATED_ASYNC), 10)  # in flight on `draining`
    with trio.fail_after(5):
        await gate.entered.wait()
    draining.drain()
    response = await client.invoke_sync(None, req(WHO), 5)
    assert response.body == (b"B" if draining is a else b"A")
    assert client.statistics().connections == 2  # the draining one still carries `held`
    gate.event.set()
    with trio.fail_after(5):
        assert (await held.wait()).code == ResponseCode.SUCCESS  # answered where it was sent
    await wait_connections(client, 1)


async def test_with_an_explicit_address_the_resend_uses_a_new_connection_and_none_is_left(
    nursery: trio.Nursery, client: TrioRemotingClient,
) -> None:
    server = await start_server(nursery, b"A")
    await client.invoke_sync(addr_of(server), req(WHO), 5)
    server.drain()
    for n in range(1, 4):
        with pytest.raises(RemotingSendRequestError, match="also after one resend"):
            await client.invoke_sync(addr_of(server), req(WHO), 5)
        stats = client.statistics()
        # the first call reused the live connection; each call then met GO_AWAY twice, on a
        # connection opened for it and on the new one for its resend
        assert stats.connections_opened == 2 * n
        await wait_connections(client, 0)  # none is left open


async def test_a_connection_told_go_away_closes_when_its_last_call_times_out(
    nursery: trio.Nursery, client: TrioRemotingClient,
) -> None:
    server = await start_server(nursery, b"A")
    gate = AsyncGate()  # never released: the held call can only time out
    server.register_processor(GATED_ASYNC, gate)
    held = await client.invoke_async(addr_of(server), req(GATED_ASYNC), 1.0)
    with trio.fail_after(5):
        await gate.entered.wait()
    server.drain()
    with pytest.raises(RemotingSendRequestError, match="also after one resend"):
        await client.invoke_sync(addr_of(server), req(WHO), 5)
    await wait_connections(client, 1)  # the resend's is closed; the first carries `held`
    with trio.fail_after(5):
        with pytest.raises(RemotingTimeoutError):
            await held.wait()
    await wait_connections(client, 0)
    gate.event.set()
