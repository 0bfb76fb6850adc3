"""Either side can send requests: server-to-client calls and replies written later."""

from __future__ import annotations

import threading

import trio

from codec import RemotingCommand, ResponseCode
from processors import (
    AsyncEchoProcessor,
    AsyncRequestProcessor,
    EchoProcessor,
    RequestContext,
    RequestProcessor,
)
from remoting import RemotingClient, RemotingServer, TrioRemotingClient, TrioRemotingServer

from .conftest import addr_of

CALLBACK = 60
ASK_BACK = 61
LONG_POLL = 62


class AskBackAsync(AsyncRequestProcessor):
    """Answers by calling the client back over the same connection (from the loop)."""

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        back = await ctx.channel.invoke_sync_async(
            RemotingCommand.create_request(CALLBACK, body=b"question"), 5)
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = b"client said " + (back.body or b"")
        return response


class AskBackSync(RequestProcessor):
    """The same from a pool thread, through the blocking channel methods."""

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        back = ctx.channel.invoke_sync(RemotingCommand.create_request(CALLBACK, body=b"q"), 5)
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = b"client said " + (back.body or b"")
        return response


async def test_server_processor_calls_the_client_back(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    client.register_processor(CALLBACK, AsyncEchoProcessor())
    server.register_processor(ASK_BACK, AskBackAsync())
    server.register_processor(ASK_BACK + 100, AskBackSync())
    r1 = await client.invoke_sync(addr_of(server), RemotingCommand.create_request(ASK_BACK), 5)
    assert r1.body == b"client said question"
    r2 = await client.invoke_sync(addr_of(server),
                                  RemotingCommand.create_request(ASK_BACK + 100), 5)
    assert r2.body == b"client said q"


async def test_server_invokes_a_connected_client_by_channel(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    client.register_processor(CALLBACK, EchoProcessor())
    await client.invoke_sync(addr_of(server), RemotingCommand.create_request(1), 5)
    [channel] = server.channels()
    response = await server.invoke_sync(
        channel, RemotingCommand.create_request(CALLBACK, body=b"push"), 5)
    assert response.body == b"push"
    fut = await server.invoke_async(channel, RemotingCommand.create_request(CALLBACK, body=b"a"))
    assert (await fut.wait()).body == b"a"


def test_blocking_server_pushes_to_blocking_client() -> None:
    with RemotingServer() as server, RemotingClient() as client:
        server.register_processor(1, EchoProcessor())
        got = threading.Event()

        class Sink(RequestProcessor):
            def process_request(self, ctx: RequestContext, request: RemotingCommand) -> None:
                got.set()

        client.register_processor(CALLBACK, EchoProcessor())
        client.register_processor(CALLBACK + 1, Sink())
        client.invoke_sync(server.addr, RemotingCommand.create_request(1), 5)
        [channel] = server.channels()
        assert server.invoke_sync(channel, RemotingCommand.create_request(
            CALLBACK, body=b"hi"), 5).body == b"hi"
        server.invoke_oneway(channel, RemotingCommand.create_request(CALLBACK + 1), 5)
        assert got.wait(5)


async def test_processor_returning_none_replies_later_from_another_thread(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    parked: list[tuple[RequestContext, RemotingCommand]] = []
    arrived = threading.Event()

    class LongPoll(RequestProcessor):
        def process_request(self, ctx: RequestContext, request: RemotingCommand) -> None:
            parked.append((ctx, request))
            arrived.set()
            return None

    server.register_processor(LONG_POLL, LongPoll())
    fut = await client.invoke_async(addr_of(server), RemotingCommand.create_request(LONG_POLL),
                                    timeout=10)
    assert await trio.to_thread.run_sync(arrived.wait, 5)
    assert not fut.done()

    def reply_later() -> None:
        ctx, request = parked[0]
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = b"news"
        ctx.write_response(request, response)

    await trio.to_thread.run_sync(reply_later)
    assert (await fut.wait()).body == b"news"


class AsksServerBack(RequestProcessor):
    """A client's processor (pool thread) answering with what the server says to it."""

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        back = ctx.channel.invoke_sync(RemotingCommand.create_request(1, body=b"from pool"), 5)
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = b"server said " + (back.body or b"")
        return response


class AsksServerBackAsync(AsyncRequestProcessor):
    """The same from the client's event loop."""

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        back = await ctx.channel.invoke_sync_async(
            RemotingCommand.create_request(1, body=b"from loop"), 5)
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = b"server said " + (back.body or b"")
        return response


def test_a_blocking_clients_processors_call_the_server_back() -> None:
    with RemotingServer() as server, RemotingClient() as client:
        server.register_processor(1, EchoProcessor())
        client.register_processor(CALLBACK, AsksServerBack())
        client.register_processor(CALLBACK + 1, AsksServerBackAsync())
        client.invoke_sync(server.addr, RemotingCommand.create_request(1), 5)
        [channel] = server.channels()
        by_pool = server.invoke_sync(channel, RemotingCommand.create_request(CALLBACK), 5)
        by_loop = server.invoke_sync(channel, RemotingCommand.create_request(CALLBACK + 1), 5)
        assert client.statistics().in_flight == 0
    assert by_pool.body == b"server said from pool"
    assert by_loop.body == b"server said from loop"
