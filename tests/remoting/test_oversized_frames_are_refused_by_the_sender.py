"""A frame over ``max_frame_bytes`` is refused where it is made, not by the peer.

The peer would close the connection on reading its length prefix, failing every other call
on that connection. So an oversized request fails alone with `RemotingCommandError`, and an
oversized response becomes a SYSTEM_ERROR reply; the connection and its other calls go on.
"""

from __future__ import annotations

import pytest
import trio

from codec import FrameTooLargeError, RemotingCommand, ResponseCode, encode_frame
from processors import AsyncRequestProcessor, RequestContext, RequestProcessor
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingCommandError,
    RemotingServer,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)

from ..factories import req
from ..logs import capture_logs
from .conftest import ECHO, GATED, Gate, addr_of, install_standard_processors

LIMIT = 64 * 1024
TOO_BIG = b"x" * LIMIT  # with its header, over the limit
BIG_REPLY = 20
BIG_REPLY_ASYNC = 21
SIZE = 22


def sized_to(frame_bytes: int) -> RemotingCommand:
    """A request to SIZE whose whole frame is ``frame_bytes`` long."""
    cmd = req(SIZE, b"")
    cmd.body = b"y" * (frame_bytes - len(encode_frame(cmd)))
    assert len(encode_frame(cmd)) == frame_bytes
    return cmd


def big_response() -> RemotingCommand:
    response = RemotingCommand.create_response(ResponseCode.SUCCESS)
    response.body = TOO_BIG
    return response


class BigReply(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return big_response()


class Size(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = str(len(request.body or b"")).encode()
        return response


class BigReplyAsync(AsyncRequestProcessor):
    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        return big_response()


@pytest.fixture
async def limited(nursery: trio.Nursery) -> tuple[TrioRemotingServer, TrioRemotingClient, Gate]:
    server = TrioRemotingServer(ServerConfig(max_frame_bytes=LIMIT))
    install_standard_processors(server)
    gate = Gate()
    server.register_processor(GATED, gate)
    server.register_processor(BIG_REPLY, BigReply())
    server.register_processor(BIG_REPLY_ASYNC, BigReplyAsync())
    server.register_processor(SIZE, Size())
    await nursery.start(server.serve)
    client = TrioRemotingClient(ClientConfig(max_frame_bytes=LIMIT))
    await nursery.start(client.serve)
    return server, client, gate


async def test_an_oversized_request_fails_alone_and_the_call_in_flight_beside_it_succeeds(
    limited: tuple[TrioRemotingServer, TrioRemotingClient, Gate],
) -> None:
    server, client, gate = limited
    addr = addr_of(server)
    parked = await client.invoke_async(addr, req(GATED, b"beside"), timeout=10)
    assert await trio.to_thread.run_sync(gate.entered.acquire, True, 5)
    with pytest.raises(RemotingCommandError, match="exceeds the limit of 65536") as info:
        await client.invoke_sync(addr, req(ECHO, TOO_BIG), timeout=5)
    assert isinstance(info.value.__cause__, FrameTooLargeError)
    with pytest.raises(RemotingCommandError, match="not sent"):
        await client.invoke_oneway(addr, req(ECHO, TOO_BIG), timeout=5)
    gate.release()
    assert (await parked.wait()).body == b"beside"  # the connection was never broken
    assert client.statistics().connections_opened == 1
    assert server.statistics().requests_received.get(ECHO, 0) == 0


async def test_sender_and_receiver_agree_on_the_limit(
    limited: tuple[TrioRemotingServer, TrioRemotingClient, Gate],
) -> None:
    server, client, _ = limited
    at_limit = sized_to(LIMIT)
    reply = await client.invoke_sync(addr_of(server), at_limit, timeout=5)
    assert reply.code == ResponseCode.SUCCESS
    assert reply.body == str(len(at_limit.body or b"")).encode()
    with pytest.raises(RemotingCommandError, match=f"frame of {LIMIT + 1} bytes"):
        await client.invoke_sync(addr_of(server), sized_to(LIMIT + 1), timeout=5)


@pytest.mark.parametrize("code", [BIG_REPLY, BIG_REPLY_ASYNC])
async def test_an_oversized_response_becomes_a_system_error_and_the_connection_stays(
    limited: tuple[TrioRemotingServer, TrioRemotingClient, Gate], code: int,
) -> None:
    server, client, _ = limited
    addr = addr_of(server)
    with capture_logs() as logs:
        reply = await client.invoke_sync(addr, req(code), timeout=5)
    assert reply.code == ResponseCode.SYSTEM_ERROR
    assert reply.remark is not None and "exceeds the limit of 65536" in reply.remark
    assert [e["event"] for e in logs if e["log_level"] == "error"] == ["processor.bad_response"]
    assert (await client.invoke_sync(addr, req(ECHO, b"after"), timeout=5)).body == b"after"
    assert client.statistics().connections_opened == 1


def test_the_blocking_faces_refuse_an_oversized_frame_too() -> None:
    config = ServerConfig(max_frame_bytes=LIMIT)
    with RemotingServer(config) as server, RemotingClient(
            ClientConfig(max_frame_bytes=LIMIT)) as client:
        install_standard_processors(server)
        server.register_processor(BIG_REPLY, BigReply())
        with pytest.raises(RemotingCommandError, match="not sent"):
            client.invoke_sync(server.addr, req(ECHO, TOO_BIG), timeout=5)
        assert client.invoke_sync(server.addr, req(BIG_REPLY), timeout=5).code == (
            ResponseCode.SYSTEM_ERROR)
        with pytest.raises(RemotingCommandError, match="not sent"):  # connected and idle now
            client.invoke_sync(server.addr, req(ECHO, TOO_BIG), timeout=5)
        [result] = client.invoke_many(server.addr, [req(ECHO, TOO_BIG)], timeout=5)
        assert isinstance(result, RemotingCommandError)
        [channel] = server.channels()
        with pytest.raises(RemotingCommandError, match="not sent"):
            server.invoke_sync(channel, req(ECHO, TOO_BIG), timeout=5)
        assert client.invoke_sync(server.addr, req(ECHO, b"ok"), timeout=5).body == b"ok"
