"""Held requests and hostile or careless clients (real sockets): a connection holds at most
``max_per_connection`` requests (one more is answered POLLING_FULL at once, other connections
hold on), and the requests a connection held are dropped as soon as it closes, so clients that
connect, hold and leave cannot pile them up for their whole wait."""

from __future__ import annotations

import threading

import trio

from codec import RemotingCommand, ResponseCode
from processors import RequestContext
from remoting import ClientConfig, HeldRequests, TrioRemotingClient, TrioRemotingServer
from remoting._core._receiving._channel_handle import ChannelHandle

from ..logs import capture_logs
from .conftest import addr_of
from .test_held_requests_are_answered_when_notified_or_at_their_deadline import (
    POLL,
    Mailbox,
    poll,
)


class Counted(Mailbox):
    """A `Mailbox` whose test waits, on the server's loop, until it holds ``n`` requests."""

    def __init__(self, holds: HeldRequests | None = None) -> None:
        super().__init__()
        if holds is not None:
            self.holds = holds
        self._waiting: tuple[int, trio.Event] | None = None

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand | None:
        answer = await super().process_request(ctx, request)
        if self._waiting is not None and len(self.holds) >= self._waiting[0]:
            self._waiting[1].set()
        return answer

    async def held(self, n: int) -> None:
        if len(self.holds) < n:
            self._waiting = (n, trio.Event())
            with trio.fail_after(10):
                await self._waiting[1].wait()
            self._waiting = None


async def test_one_request_over_the_connection_s_maximum_is_answered_polling_full(
        server: TrioRemotingServer, client: TrioRemotingClient, nursery: trio.Nursery
        ) -> None:
    mailbox = Counted(HeldRequests(max_per_connection=5))
    server.register_processor(POLL, mailbox)
    addr = addr_of(server)
    held = [await client.invoke_async(addr, poll("box", 60.0), 90.0) for _ in range(5)]
    await mailbox.held(5)
    with capture_logs() as logs:  # one over the maximum after another: never a line each
        for _ in range(9):
            refused = await client.invoke_sync(addr, poll("box", 60.0), 10.0)
            assert refused.code == ResponseCode.POLLING_FULL
    assert "5 requests are held on this connection already" in (refused.remark or "")
    lines = [e for e in logs if e["event"] == "held.refused"]
    assert [e["refused_on_connection"] for e in lines] == [1, 2, 4, 8]
    other = TrioRemotingClient(ClientConfig())
    await nursery.start(other.serve)
    elsewhere = await other.invoke_async(addr, poll("box", 60.0), 90.0)
    await mailbox.held(6)  # another connection holds on
    for _ in range(6):
        mailbox.post("box", b"letter")
    with trio.fail_after(10):
        answers = [await fut.wait() for fut in [*held, elsewhere]]
    assert [a.body for a in answers] == [b"letter"] * 6
    assert mailbox.holds.refused == 9 and len(mailbox.holds) == 0


class Closes:
    """A channel listener: sets ``closed`` when a connection closes (on the event thread)."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    def on_channel_connect(self, remote_addr: str, channel: ChannelHandle) -> None:
        pass

    def on_channel_close(self, remote_addr: str, channel: ChannelHandle) -> None:
        self.closed.set()

    def on_channel_exception(self, remote_addr: str, channel: ChannelHandle) -> None:
        pass

    def on_channel_idle(self, remote_addr: str, channel: ChannelHandle) -> None:
        pass


async def test_the_requests_a_connection_held_are_dropped_when_it_closes(
        server: TrioRemotingServer) -> None:
    mailbox = Counted()
    server.register_processor(POLL, mailbox)
    closes = Closes()
    server.register_channel_event_listener(closes)
    addr = addr_of(server)
    for _ in range(3):  # clients come, hold 100 pulls each for an hour, and leave
        closes.closed.clear()
        leaving = TrioRemotingClient(ClientConfig())
        async with trio.open_nursery() as own:
            await own.start(leaving.serve)
            for _ in range(100):
                await leaving.invoke_async(addr, poll("box", 3600.0), 3600.0)
            await mailbox.held(100)
            own.cancel_scope.cancel()  # the client stops: its connection closes
        with trio.fail_after(10):
            await trio.to_thread.run_sync(closes.closed.wait)  # after the drop: same step
        assert len(mailbox.holds) == 0
    assert mailbox.holds.dropped == 300
