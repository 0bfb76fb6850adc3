"""Credit-based streams (real sockets): a processor answers one request with a stream of
commands, never sending beyond the client's credits; the client iterates (``async for`` /
``for``) and gives credits back as it consumes."""

from __future__ import annotations

import threading

import pytest
import trio
import trio.testing

from codec import RemotingCommand, ResponseCode
from processors import RequestContext, ServerStream, StreamProcessor
from remoting import (
    RemotingClient,
    RemotingServer,
    ServerConfig,
    StreamCode,
    TrioRemotingClient,
    TrioRemotingServer,
)

from .conftest import addr_of

STREAM = 700


class Counting(StreamProcessor):
    """Sends ``n`` numbered items (for ever without ``n``), counting what it sent."""

    def __init__(self) -> None:
        self.sent = 0
        self.credits_seen: list[int] = []

    async def process_stream(self, ctx: RequestContext, request: RemotingCommand,
                             stream: ServerStream) -> None:
        n = int((request.ext_fields or {}).get("n") or "-1")
        while n < 0 or self.sent < n:
            self.credits_seen.append(stream.credits)
            await stream.send(RemotingCommand.create_request(0, body=b"%d" % self.sent))
            self.sent += 1


def opening(n: int = -1) -> RemotingCommand:
    return RemotingCommand.create_request(STREAM, header={"n": str(n)} if n >= 0 else None)


async def test_a_client_that_grants_nothing_more_receives_exactly_its_credits(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    counting = Counting()
    server.register_processor(STREAM, counting)
    async with client.open_stream(addr_of(server), opening(), credits=5,
                                  auto_credit=False) as stream:
        got = [await stream.receive() for _ in range(5)]
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert counting.sent == 5  # the processor waits for credits, sending nothing
        assert not stream._items  # and nothing more arrived
        await stream.grant(3)
        got += [await stream.receive() for _ in range(3)]
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert counting.sent == 8 and not stream._items
    assert [item.body for item in got if item is not None] == [b"%d" % i for i in range(8)]
    assert all(item.code == StreamCode.ITEM for item in got if item is not None)


async def test_automatic_credits_keep_a_long_stream_flowing_in_order(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    counting = Counting()
    server.register_processor(STREAM, counting)
    async with client.open_stream(addr_of(server), opening(2000), credits=8) as stream:
        bodies = [item.body async for item in stream]
    assert bodies == [b"%d" % i for i in range(2000)]
    assert max(counting.credits_seen) <= 8  # never more than the window
    assert stream.ended and await stream.receive() is None


def test_the_blocking_face_iterates_with_for_and_never_exceeds_its_credits() -> None:
    counting = Counting()
    with RemotingServer(ServerConfig()) as server, RemotingClient() as client:
        server.register_processor(STREAM, counting)
        with client.open_stream(server.addr, opening(), credits=4, auto_credit=False) as stream:
            first = [stream.receive(timeout=10) for _ in range(4)]
            with pytest.raises(TimeoutError):
                stream.receive(timeout=0.2)  # nothing beyond the credits
            assert counting.sent == 4
            stream.grant(2)
            first += [stream.receive(timeout=10) for _ in range(2)]
        server.register_processor(STREAM + 1, _FreshCounting())
        long = RemotingCommand.create_request(STREAM + 1, header={"n": "500"})
        with client.open_stream(server.addr, long, credits=16) as stream:
            assert [item.body for item in stream] == [b"%d" % i for i in range(500)]
    assert [i.body for i in first if i is not None] == [b"%d" % i for i in range(6)]


class CostlyBatches(StreamProcessor):
    """Sends items that each stand for several messages (their cost)."""

    async def process_stream(self, ctx: RequestContext, request: RemotingCommand,
                             stream: ServerStream) -> None:
        for size in (3, 1, 4, 0, 2):
            await stream.send(RemotingCommand.create_request(0, body=bytes(size)), cost=size)


async def test_an_item_uses_its_cost_in_credits(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    server.register_processor(STREAM, CostlyBatches())
    async with client.open_stream(addr_of(server), opening(), credits=4) as stream:
        sizes = [len(item.body or b"") async for item in stream]
    assert sizes == [3, 1, 4, 0, 2]
    with pytest.raises(ValueError, match="cost"):
        await _never_sent_with_a_negative_cost()


async def _never_sent_with_a_negative_cost() -> None:
    from remoting._core._streams._stream_out import OutgoingStream

    await OutgoingStream.send(None, RemotingCommand.create_request(0), cost=-1)  # type: ignore[arg-type]


def test_many_threads_may_read_their_own_streams_at_once() -> None:
    with RemotingServer(ServerConfig()) as server, RemotingClient() as client:
        server.register_processor(STREAM, _FreshCounting())
        results: list[list[bytes]] = []

        def read() -> None:
            with client.open_stream(server.addr, opening(300), credits=8) as stream:
                results.append([item.body or b"" for item in stream])

        threads = [threading.Thread(target=read) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert len(results) == 4
    assert all(bodies == [b"%d" % i for i in range(300)] for bodies in results)


class _FreshCounting(StreamProcessor):
    async def process_stream(self, ctx: RequestContext, request: RemotingCommand,
                             stream: ServerStream) -> None:
        await Counting().process_stream(ctx, request, stream)


async def test_a_stream_holds_no_request_slot_and_no_thread(
        nursery: trio.Nursery, client: TrioRemotingClient) -> None:
    server = TrioRemotingServer(ServerConfig(max_requests_per_connection=2))
    await nursery.start(server.serve)
    server.register_processor(STREAM, Counting())
    threads = threading.active_count()
    streams = []
    for _ in range(5):  # more streams than request slots
        cm = client.open_stream(addr_of(server), opening(), credits=1, auto_credit=False)
        streams.append(cm)
        stream = await cm.__aenter__()
        assert (await stream.receive()) is not None
    assert server.endpoint.dispatcher.processing == 0
    assert len(server.endpoint.streams.outgoing) == 5
    reply = await client.invoke_sync(addr_of(server), RemotingCommand.create_request(1))
    assert reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED  # still answered
    assert threading.active_count() == threads
    for cm in streams:
        await cm.__aexit__(None, None, None)
    await trio.testing.wait_all_tasks_blocked(cushion=0.05)
    assert len(server.endpoint.streams.outgoing) == 0  # each CANCEL ended its stream
