"""What a bus server pushes to one connection within a bundle (`Endpoint.bundled`: the
deliveries one read routes to a consumer's connection, the answers one read of receipts
brings to a sender's) is queued and leaves in few socket writes, sent early only every
`BUNDLE_FRAMES` frames, in order; and a bus sender's pipelined sends reach a consumer
several a push (DELIVER_MANY) and cost the server fewer writes than the frames it sends."""

from __future__ import annotations

import math

import trio

from codec import RemotingCommand
from processors import AsyncRequestProcessor, RequestContext
from remoting import ClientConfig, RemotingClient, TrioRemotingClient, TrioRemotingServer
from remoting._bus._wire import BusCode
from remoting._core._sansio._outbound import BUNDLE_FRAMES, FLUSH_FRAMES
from remoting.bus import BusClient, EventBus, TrioBusClient

from ..conftest import ASYNC_ECHO, addr_of
from .conftest import WAIT

PUSH = 3801  # the code the server pushes with
PUSHES = 3 * BUNDLE_FRAMES + 5


class Received(AsyncRequestProcessor):
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.all_in = trio.Event()

    async def process_request(self, ctx: RequestContext, request: RemotingCommand) -> None:
        self.bodies.append(request.body or b"")
        if len(self.bodies) == PUSHES:
            self.all_in.set()


async def test_frames_pushed_in_a_bundle_leave_every_bundle_frames(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    received = Received()
    client.register_processor(PUSH, received)
    await client.invoke_sync(addr_of(server), RemotingCommand.create_request(ASYNC_ECHO), WAIT)
    [channel] = server.channels()
    endpoint = server.endpoint
    before = server.statistics()
    with endpoint.bundled(channel):  # one burst of pushes, as one read routes them
        for i in range(PUSHES):
            push = RemotingCommand.create_request(PUSH, body=b"%d" % i)
            push.mark_oneway()
            endpoint.notify_oneway(channel, push, WAIT)
    with trio.fail_after(WAIT):
        await received.all_in.wait()
    after = server.statistics()
    assert received.bodies == [b"%d" % i for i in range(PUSHES)]  # in order
    assert after.frames_written - before.frames_written == PUSHES
    writes = after.writes - before.writes
    # every BUNDLE_FRAMES at most, and the rest at the end (FLUSH_FRAMES would take 13)
    assert writes <= math.ceil(PUSHES / BUNDLE_FRAMES), writes
    assert math.ceil(PUSHES / BUNDLE_FRAMES) < math.ceil(PUSHES / FLUSH_FRAMES)


async def test_pipelined_bus_sends_cost_the_server_fewer_writes_than_frames(
        server: TrioRemotingServer, trio_bus: EventBus, client: TrioRemotingClient) -> None:
    # the consumer is a blocking client on threads of its own; the sender a trio one here
    def consumer_side() -> tuple[RemotingClient, BusClient]:
        remoting_client = RemotingClient(ClientConfig()).start()
        bus_client = BusClient(remoting_client, addr_of(server))
        bus_client.consumer("work", lambda message: None)
        return remoting_client, bus_client

    remoting_client, consumer = await trio.to_thread.run_sync(consumer_side)
    try:
        sender = TrioBusClient(client, addr_of(server))
        await sender.send("work", b"warm", timeout=WAIT)
        before = server.statistics()

        async def sends(count: int) -> None:
            for _ in range(count):
                await sender.send("work", b"x" * 128, timeout=WAIT)

        with trio.fail_after(WAIT * 3):
            async with trio.open_nursery() as nursery:
                for _ in range(32):
                    nursery.start_soon(sends, 10)
        after = server.statistics()
        pushes = {code: after.requests_sent.get(code, 0) - before.requests_sent.get(code, 0)
                  for code in (BusCode.DELIVER, BusCode.DELIVER_MANY)}
        frames = after.frames_written - before.frames_written
        writes = after.writes - before.writes
        # the deliveries one read routes to the consumer go several a DELIVER_MANY, and they
        # and the answers several a write: even on a loaded machine (one a push and one a
        # write would be 320 pushes and 640 writes)
        assert sum(pushes.values()) * 2 <= 320, pushes
        assert frames == 320 + sum(pushes.values())  # an answer a send, and the pushes
        assert writes * 2 <= frames, (writes, frames)
        await sender.aclose()
    finally:
        def close() -> None:
            consumer.close()
            remoting_client.shutdown()

        await trio.to_thread.run_sync(close)
