"""How streams end (real sockets): the processor returns (the iteration stops), raises (the
client's iteration raises `RemotingStreamError` naming it), refuses before sending (the
opening fails), the client leaves early (the processor is cancelled), the connection is lost
(both sides end), the server drains (GO_AWAY); and bad input gets a clear refusal."""

from __future__ import annotations

import pytest
import trio

from codec import FLAG_ONEWAY, RemotingCommand, ResponseCode, encode_frame
from processors import RequestContext, ServerStream, StreamProcessor
from remoting import (
    AbortProcessError,
    RemotingClient,
    RemotingServer,
    RemotingStreamError,
    ServerConfig,
    StreamCode,
    TrioRemotingClient,
    TrioRemotingServer,
)

from .conftest import addr_of

STREAM = 710


def opening(**fields: str) -> RemotingCommand:
    return RemotingCommand.create_request(STREAM, header=fields or None)


class Scripted(StreamProcessor):
    """Sends ``n`` items, then does what ``then`` says; records how it ended."""

    def __init__(self) -> None:
        self.ended = trio.Event()
        self.how: str | None = None

    async def process_stream(self, ctx: RequestContext, request: RemotingCommand,
                             stream: ServerStream) -> None:
        fields = request.ext_fields or {}
        try:
            if fields.get("then") == "refuse":
                raise AbortProcessError(ResponseCode.NO_PERMISSION, "not for you")
            for i in range(int(fields.get("n") or "0")):
                await stream.send(RemotingCommand.create_request(0, body=b"%d" % i))
            if fields.get("then") == "raise":
                raise ValueError("the source broke")
            if fields.get("then") == "forever":
                await trio.sleep_forever()
            self.how = "returned"
        except trio.Cancelled:
            self.how = "cancelled"
            raise
        finally:
            self.ended.set()


@pytest.fixture
def scripted(server: TrioRemotingServer) -> Scripted:
    processor = Scripted()
    server.register_processor(STREAM, processor)
    return processor


async def test_an_error_ends_the_iteration_with_a_clear_exception_after_the_items(
        server: TrioRemotingServer, client: TrioRemotingClient, scripted: Scripted) -> None:
    got: list[bytes] = []

    async def read_all() -> None:
        async with client.open_stream(addr_of(server), opening(n="3", then="raise")) as stream:
            async for item in stream:
                got.append(item.body or b"")

    with pytest.raises(RemotingStreamError) as caught:
        await read_all()
    assert got == [b"0", b"1", b"2"]
    assert caught.value.code == ResponseCode.SYSTEM_ERROR
    assert "ValueError: the source broke" in str(caught.value)


async def test_a_processor_refusing_before_it_sends_fails_the_opening(
        server: TrioRemotingServer, client: TrioRemotingClient, scripted: Scripted) -> None:
    with pytest.raises(RemotingStreamError) as caught:
        async with client.open_stream(addr_of(server), opening(then="refuse")):
            pytest.fail("the stream must not open")
    assert (caught.value.code, caught.value.remark) == (ResponseCode.NO_PERMISSION,
                                                         "not for you")
    assert not client.endpoint.streams.incoming.open


async def test_an_empty_stream_opens_and_ends_at_once(
        server: TrioRemotingServer, client: TrioRemotingClient, scripted: Scripted) -> None:
    async with client.open_stream(addr_of(server), opening(n="0")) as stream:
        assert [item async for item in stream] == []
    assert scripted.how == "returned"


async def test_leaving_early_cancels_the_processor(
        server: TrioRemotingServer, client: TrioRemotingClient, scripted: Scripted) -> None:
    async with client.open_stream(addr_of(server), opening(n="2", then="forever")) as stream:
        assert (await stream.receive()) is not None
    with trio.fail_after(5):
        await scripted.ended.wait()
    assert scripted.how == "cancelled"
    assert not server.endpoint.streams.outgoing.open


async def test_a_lost_connection_ends_both_sides(
        server: TrioRemotingServer, client: TrioRemotingClient, scripted: Scripted) -> None:
    async with client.open_stream(addr_of(server), opening(n="1", then="forever")) as stream:
        assert (await stream.receive()) is not None
        [channel] = server.channels()
        channel.close()
        with trio.fail_after(5), pytest.raises(RemotingStreamError) as caught:
            await stream.receive()
        assert caught.value.code is None and "connection" in str(caught.value)
    with trio.fail_after(5):
        await scripted.ended.wait()
    assert scripted.how == "cancelled"


async def test_a_draining_server_ends_its_streams_with_go_away(
        server: TrioRemotingServer, client: TrioRemotingClient, scripted: Scripted) -> None:
    async with client.open_stream(addr_of(server), opening(n="1", then="forever")) as stream:
        assert (await stream.receive()) is not None
        server.drain()
        with trio.fail_after(5), pytest.raises(RemotingStreamError) as caught:
            await stream.receive()
    assert caught.value.code == ResponseCode.GO_AWAY
    assert scripted.how == "cancelled"


def test_the_blocking_face_raises_the_same_errors() -> None:
    with RemotingServer(ServerConfig()) as server, RemotingClient() as client:
        server.register_processor(STREAM, Scripted())
        with pytest.raises(RemotingStreamError, match="the source broke"), \
                client.open_stream(server.addr, opening(n="2", then="raise")) as stream:
            assert len(list(stream)) == 2
        with pytest.raises(RemotingStreamError) as caught:
            client.open_stream(server.addr, opening(then="refuse"))
        assert caught.value.code == ResponseCode.NO_PERMISSION


@pytest.mark.parametrize("credits", [0, -3, 65_537])
async def test_credits_out_of_range_are_refused_before_anything_is_sent(
        client: TrioRemotingClient, credits: int) -> None:
    with pytest.raises(ValueError, match="credits must be from 1 to 65536"):
        async with client.open_stream("127.0.0.1:1", opening(), credits=credits):
            pass
    assert not client.endpoint.streams.incoming.open


@pytest.mark.parametrize(("fields", "says"), [
    ({}, "needs the int fields streamId and credits"),
    ({"streamId": "1", "credits": "0"}, "from 1 to 65536"),
    ({"streamId": "1", "credits": "99999999"}, "from 1 to 65536"),
    ({"streamId": "x", "credits": "5"}, "streamId is not an integer"),
])
async def test_a_bad_opening_request_is_answered_invalid_parameter(
        server: TrioRemotingServer, client: TrioRemotingClient, scripted: Scripted,
        fields: dict[str, str], says: str) -> None:
    reply = await client.invoke_sync(addr_of(server), RemotingCommand.create_request(
        STREAM, header=fields or None))
    assert reply.code == ResponseCode.INVALID_PARAMETER and says in (reply.remark or "")
    assert not server.endpoint.streams.outgoing.open


async def test_an_absurd_credit_frame_ends_that_stream_only(
        server: TrioRemotingServer, client: TrioRemotingClient, scripted: Scripted) -> None:
    async with client.open_stream(addr_of(server), opening(n="1", then="forever"),
                                  auto_credit=False) as stream:
        assert (await stream.receive()) is not None
        bad = RemotingCommand.create_request(StreamCode.CREDIT, header={
            "streamId": str(stream.stream_id), "credits": "100000000"})
        await client.invoke_oneway(addr_of(server), bad)
        with trio.fail_after(5), pytest.raises(RemotingStreamError) as caught:
            await stream.receive()
    assert caught.value.code == ResponseCode.INVALID_PARAMETER
    reply = await client.invoke_sync(addr_of(server), RemotingCommand.create_request(2))
    assert reply.code == ResponseCode.SUCCESS  # the connection serves on


async def test_frames_of_unknown_streams_are_dropped_and_the_connection_serves_on(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    async with stream:
        for code in StreamCode:
            frame = RemotingCommand.create_request(code, header={"streamId": "12345"})
            frame.flag |= FLAG_ONEWAY
            await stream.send_all(encode_frame(frame))
    reply = await client.invoke_sync(addr_of(server), RemotingCommand.create_request(2))
    assert reply.code == ResponseCode.SUCCESS


async def test_a_stream_code_cannot_be_registered(server: TrioRemotingServer) -> None:
    with pytest.raises(ValueError, match="reserved for the transport's stream frames"):
        server.register_processor(StreamCode.ITEM, Scripted())
