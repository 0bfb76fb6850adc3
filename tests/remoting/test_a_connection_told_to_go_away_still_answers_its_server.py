"""A client's connection told GO_AWAY is closed only once the server's own requests on it
(a push, a call back) are answered and the answers have left: it was closed as soon as the
client's calls were done, so the server's call failed. And an `invoke_many` batch moving off
such a connection while the client shuts down fails as shut down (its start on the closed
nursery crashed the client's run)."""

from __future__ import annotations

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, Channel, RequestContext
from remoting import (
    ClientConfig,
    RemotingError,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)

from .conftest import AsyncGate

HELLO, PUSH, SLOW = 50, 51, 52


class Hello(AsyncRequestProcessor):
    """Keeps the channel of each caller (to push to it)."""

    def __init__(self) -> None:
        self.channels: list[Channel] = []

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        self.channels.append(ctx.channel)
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


async def test_the_servers_push_is_answered_before_the_close(nursery: trio.Nursery) -> None:
    server = TrioRemotingServer(ServerConfig())
    hello = Hello()
    server.register_processor(HELLO, hello)
    await nursery.start(server.serve)
    client = TrioRemotingClient(ClientConfig())
    push = AsyncGate()
    client.register_processor(PUSH, push)
    await nursery.start(client.serve)
    addr = f"127.0.0.1:{server.port}"
    outcome: list[object] = []

    async def call_back() -> None:
        try:
            outcome.append((await hello.channels[0].invoke_sync_async(
                RemotingCommand.create_request(PUSH), 5)).code)
        except RemotingError as exc:
            outcome.append(exc)

    with trio.fail_after(10):
        await client.invoke_sync(addr, RemotingCommand.create_request(HELLO), 5)
        server.drain()
        async with trio.open_nursery() as inner:
            inner.start_soon(call_back)
            await push.entered.wait()  # the client is answering the server on that connection
            with pytest.raises(RemotingError):  # GO_AWAY, and no other address to go to
                await client.invoke_sync(addr, RemotingCommand.create_request(HELLO), 5)
            push.event.set()
    assert outcome == [ResponseCode.SUCCESS]


async def test_a_batch_moving_off_at_shutdown_fails_as_shut_down(nursery: trio.Nursery) -> None:
    server = TrioRemotingServer(ServerConfig(shutdown_grace_seconds=0.5))
    slow = AsyncGate()
    server.register_processor(SLOW, slow)
    server.register_processor(HELLO, Hello())
    await nursery.start(server.serve)
    addr = f"127.0.0.1:{server.port}"
    client = TrioRemotingClient(ClientConfig())
    with trio.fail_after(10):
        async with trio.open_nursery() as client_nursery:  # its failure would raise here
            await client_nursery.start(client.serve)

            async def batch() -> None:
                await client.invoke_many(
                    addr, [RemotingCommand.create_request(SLOW) for _ in range(3)], 5, limit=1)

            client_nursery.start_soon(batch)
            await slow.entered.wait()
            server.drain()
            with pytest.raises(RemotingError):  # GO_AWAY: the batch's connection goes away
                await client.invoke_sync(addr, RemotingCommand.create_request(HELLO), 2)
            client_nursery.cancel_scope.cancel()  # the client's loop ends, as at shutdown
    slow.event.set()  # reached only if the client's run ended cleanly (it raised before)
