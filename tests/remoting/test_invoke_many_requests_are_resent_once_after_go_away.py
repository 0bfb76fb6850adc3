"""`invoke_many` after GO_AWAY: each request of the batch is resent once, like any call, within
its own deadline: to the next address with ``addr=None``, and on a new connection to the same
address with an explicit one (where a second GO_AWAY fails it)."""

from __future__ import annotations

import trio
import trio.testing

from codec import RemotingCommand
from remoting import RemotingSendRequestError, TrioRemotingClient

from ..factories import req
from .conftest import addr_of
from .test_a_draining_server_sends_clients_to_the_next_address import (
    WHO,
    start_server,
    wait_connections,
)


async def test_a_batch_sent_to_a_draining_server_moves_to_the_next_address(
    nursery: trio.Nursery, client: TrioRemotingClient,
) -> None:
    a, b = await start_server(nursery, b"A"), await start_server(nursery, b"B")
    client.update_name_server_address_list([addr_of(a), addr_of(b)])
    await client.invoke_sync(None, req(WHO), 5)
    draining = a if client.current_name_server == addr_of(a) else b
    other_name = b"B" if draining is a else b"A"
    draining.drain()
    with trio.fail_after(10):
        results = await client.invoke_many(None, [req(WHO) for _ in range(20)], 5, limit=4)
    for r in results:
        assert isinstance(r, RemotingCommand), r
        assert r.body == other_name
    stats = client.statistics()
    assert 1 <= stats.go_away_received <= 4  # what was in flight on the draining server
    assert stats.in_flight == 0
    assert stats.async_permits_free == client.config.client_async_semaphore_value
    await wait_connections(client, 1)


async def test_a_batch_to_one_draining_address_is_resent_once_per_request(
    nursery: trio.Nursery, client: TrioRemotingClient,
) -> None:
    server = await start_server(nursery, b"A")
    await client.invoke_sync(addr_of(server), req(WHO), 5)
    server.drain()
    with trio.fail_after(10):
        results = await client.invoke_many(addr_of(server), [req(WHO) for _ in range(6)], 5,
                                           limit=3)
    for r in results:
        assert isinstance(r, RemotingSendRequestError), r
        assert "also after one resend" in str(r)
    stats = client.statistics()
    assert stats.go_away_received == 12  # each request: GO_AWAY, resent, GO_AWAY again
    assert stats.async_permits_free == client.config.client_async_semaphore_value
    await wait_connections(client, 0)
