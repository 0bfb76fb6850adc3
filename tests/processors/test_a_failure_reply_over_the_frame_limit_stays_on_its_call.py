"""A processor that raises with a message too long for the peer's `max_frame_bytes` gets a
short SYSTEM_ERROR reply, as an oversized response does: the failure reply is held to the
same limit. It used to go out whole, so the client closed the connection for an oversized
frame and every other call on it failed."""

from __future__ import annotations

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext, RequestProcessor
from remoting import AbortProcessError, ClientConfig, ServerConfig, open_client, open_server

LIMIT = 64 * 1024
LONG = "x" * (LIMIT + 100)
SYNC, ASYNC_AT_ONCE, ASYNC_LATER, ABORT, SLOW = 90, 91, 92, 93, 94


class RaisesSync(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        raise ValueError("cannot parse " + LONG)


class RaisesAtOnce(AsyncRequestProcessor):
    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        raise ValueError("cannot parse " + LONG)


class RaisesLater(AsyncRequestProcessor):
    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        await trio.lowlevel.checkpoint()  # suspended first: its failure is replied by another path
        raise ValueError("cannot parse " + LONG)


class Aborts(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        raise AbortProcessError(ResponseCode.SYSTEM_BUSY, LONG)


class Slow(AsyncRequestProcessor):
    """Answers once released: a call that shares the connection with the failing one."""

    def __init__(self) -> None:
        self.release = trio.Event()

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        await self.release.wait()
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


class Hook:
    """A server hook: requests then take the hooked path."""

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        return None

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        return None


@pytest.mark.parametrize("hooked", [False, True])
@pytest.mark.parametrize("code", [SYNC, ASYNC_AT_ONCE, ASYNC_LATER, ABORT])
async def test_the_call_gets_system_error_and_the_connection_stays(code: int,
                                                                  hooked: bool) -> None:
    slow = Slow()
    async with open_server(ServerConfig(max_frame_bytes=LIMIT)) as server:
        for each, processor in ((SYNC, RaisesSync()), (ASYNC_AT_ONCE, RaisesAtOnce()),
                                (ASYNC_LATER, RaisesLater()), (ABORT, Aborts()),
                                (SLOW, slow)):
            server.register_processor(each, processor)
        if hooked:
            server.register_rpc_hook(Hook())
        addr = f"127.0.0.1:{server.port}"
        async with open_client(ClientConfig(max_frame_bytes=LIMIT)) as client:
            with trio.fail_after(10):
                other = await client.invoke_async(addr, RemotingCommand.create_request(SLOW), 8)
                failed = await client.invoke_sync(addr, RemotingCommand.create_request(code), 8)
                slow.release.set()
                answered = await other.wait()
    assert failed.code == ResponseCode.SYSTEM_ERROR
    assert "exceeds the limit" in (failed.remark or "")
    assert answered.code == ResponseCode.SUCCESS
