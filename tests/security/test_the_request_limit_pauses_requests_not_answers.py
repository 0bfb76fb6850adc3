"""With `max_requests_per_connection` in processing, a server holds the connection's next
request and pauses its reads, but still takes the answers that reach it first: a processor
calling its client back gets the answer. The pause does not count against
`partial_frame_timeout`: a frame whose bytes arrived during it is not "stalled"."""

from __future__ import annotations

import threading

import pytest
import trio

from codec import FrameDecoder, RemotingCommand, ResponseCode, encode_frame
from processors import (
    AsyncEchoProcessor,
    AsyncRequestProcessor,
    RequestContext,
    RequestProcessor,
)
from remoting import ServerConfig, open_client, open_server

CALL_BACK, ASK_ASYNC, ASK_SYNC, SLOW = 60, 61, 62, 63


def reply(body: bytes) -> RemotingCommand:
    response = RemotingCommand.create_response(ResponseCode.SUCCESS)
    response.body = body
    return response


class AskBackAsync(AsyncRequestProcessor):
    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        back = await ctx.channel.invoke_sync_async(
            RemotingCommand.create_request(CALL_BACK, body=b"q"), 5)
        return reply(b"client said " + (back.body or b""))


class AskBackSync(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        back = ctx.channel.invoke_sync(RemotingCommand.create_request(CALL_BACK, body=b"q"), 5)
        return reply(b"client said " + (back.body or b""))


@pytest.mark.parametrize("code", [ASK_ASYNC, ASK_SYNC])
async def test_a_processor_at_the_limit_gets_its_call_back_answered(code: int) -> None:
    async with open_server(ServerConfig(max_requests_per_connection=1)) as server:
        server.register_processor(ASK_ASYNC, AskBackAsync())
        server.register_processor(ASK_SYNC, AskBackSync())
        async with open_client() as client:
            client.register_processor(CALL_BACK, AsyncEchoProcessor())
            with trio.fail_after(10):  # it timed out: the answer was never read
                for _ in range(3):
                    response = await client.invoke_sync(
                        f"127.0.0.1:{server.port}", RemotingCommand.create_request(code), 8)
                    assert response.body == b"client said q"


class Slow(RequestProcessor):
    """Takes longer than the partial-frame timeout; says when it starts."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = threading.Semaphore(0)

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.started.release()
        threading.Event().wait(self.seconds)  # the pause under test: longer than the timeout
        return reply(request.body or b"")


def late_answer() -> bytes:
    """A response frame no call waits for (as a late answer to a call back)."""
    answer = RemotingCommand.create_response(ResponseCode.SUCCESS)
    answer.opaque = 999_999
    return encode_frame(answer)


@pytest.mark.parametrize("between", [b"", late_answer()], ids=["requests", "an answer between"])
async def test_a_frame_completed_during_the_pause_is_not_stalled(between: bytes) -> None:
    slow = Slow(0.5)
    config = ServerConfig(max_requests_per_connection=1, partial_frame_timeout=0.2)
    frames = [encode_frame(RemotingCommand.create_request(SLOW, body=name * 100))
              for name in (b"A", b"B", b"C")]
    async with open_server(config) as server:
        server.register_processor(SLOW, slow, threads=1)
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        async with stream:
            # A is processed, B waits for it, and C has begun: reads pause with C partial (an
            # answer decoded after B, once reads resume, re-armed the frame clock at its read)
            await stream.send_all(frames[0] + frames[1] + between + frames[2][:20])
            with trio.fail_after(5):
                assert await trio.to_thread.run_sync(slow.started.acquire, True, 5)
            await stream.send_all(frames[2][20:])  # C completes while the reads are paused
            decoder, bodies = FrameDecoder(1 << 20), list[bytes | None]()
            with trio.fail_after(10):
                while len(bodies) < 3:
                    data = await stream.receive_some(65536)
                    assert data, f"closed by the server after {bodies}"
                    decoder.feed(data)
                    while (cmd := decoder.next_command()) is not None:
                        bodies.append((cmd.body or b"")[:1])
    assert bodies == [b"A", b"B", b"C"]
