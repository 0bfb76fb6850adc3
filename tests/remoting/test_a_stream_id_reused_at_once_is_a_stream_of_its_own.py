"""A peer that cancels a stream and opens another with the same id at once (raw frames, real
sockets): the old stream's end never takes the new one out of the server's table, so the new
one is cancelled by the next CANCEL and nothing is left running."""

from __future__ import annotations

import trio

from codec import RemotingCommand, ResponseCode
from processors import RequestContext, ServerStream, StreamProcessor
from remoting import StreamCode, TrioRemotingClient, TrioRemotingServer
from remoting._core._stream_in import control_frame

from .conftest import addr_of

STREAM = 720


class Idle(StreamProcessor):
    """Opens the stream and waits for ever; counts the processors running."""

    def __init__(self) -> None:
        self.running = 0
        self.none_running = trio.Event()

    async def process_stream(self, ctx: RequestContext, request: RemotingCommand,
                             stream: ServerStream) -> None:
        self.running += 1
        try:
            await stream.wait_credits()
            await trio.sleep_forever()
        finally:
            self.running -= 1
            if not self.running:
                self.none_running.set()


def opening(stream_id: int) -> RemotingCommand:
    return RemotingCommand.create_request(STREAM, header={"streamId": str(stream_id),
                                                          "credits": "1"})


async def test_a_reused_stream_id_is_cancelled_by_the_next_cancel(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    idle = Idle()
    server.register_processor(STREAM, idle)
    addr = addr_of(server)
    caller = client.endpoint.caller
    assert (await client.invoke_sync(addr, opening(9), 5)).code == ResponseCode.SUCCESS
    for _ in range(20):  # the old stream's end and the new one's start race in the loop
        await caller.ainvoke_oneway(addr, addr, control_frame(StreamCode.CANCEL, 9), 5)
        assert (await client.invoke_sync(addr, opening(9), 5)).code == ResponseCode.SUCCESS
    outgoing = server.endpoint.streams.outgoing
    assert len(outgoing) == 1
    idle.none_running = trio.Event()  # every stream opened has started: 0 means all ended
    await caller.ainvoke_oneway(addr, addr, control_frame(StreamCode.CANCEL, 9), 5)
    with trio.fail_after(5):
        await idle.none_running.wait()
    assert not idle.running and not len(outgoing)
