"""A bus server pushes what one read of a sender's requests routes to a consumer once that
read is handled (`Endpoint.after_read`), in one DELIVER_MANY, and a lone send's push the same
way: within the read that routed it, with no pass through the loop's inbox (that pass cost a
lone send a third more of the server's CPU). A send routed outside a read (by a task of the
server's loop) is pushed after a pass through the inbox."""

from __future__ import annotations

import pytest
import trio

from codec import RemotingCommand, ResponseCode, encode_command
from processors import AsyncRequestProcessor, RequestContext
from remoting import ClientConfig, TrioRemotingClient, TrioRemotingServer
from remoting._bus._wire import (
    BusCode,
    deliver_many_of,
    deliver_of,
    register_command,
    send_command,
    taken_response,
)
from remoting.bus import EventBus

from ..conftest import addr_of
from .conftest import WAIT


class Pushes(AsyncRequestProcessor):
    """A client's DELIVER and DELIVER_MANY processor: records each push's bodies, takes
    them all."""

    def __init__(self, expected: int) -> None:
        self.pushes: list[tuple[int, list[bytes]]] = []
        self.expected = expected
        self.all_in = trio.Event()

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        many = request.code == BusCode.DELIVER_MANY
        bodies = ([d.body for d in deliver_many_of(request)] if many
                  else [deliver_of(request).body])
        self.pushes.append((request.code, bodies))
        if sum(len(b) for _, b in self.pushes) == self.expected:
            self.all_in.set()
        return (taken_response("a" * len(bodies)) if many
                else RemotingCommand.create_response(ResponseCode.SUCCESS))


@pytest.fixture
def inbox_posts(server: TrioRemotingServer, monkeypatch: pytest.MonkeyPatch
                ) -> list[object]:
    """The server endpoint's `call_soon` posts (counted, then made as before)."""
    posts: list[object] = []
    endpoint = server.endpoint
    real = endpoint.call_soon

    def call_soon(fn: object) -> bool:
        posts.append(fn)
        return real(fn)  # type: ignore[arg-type]

    monkeypatch.setattr(endpoint, "call_soon", call_soon)
    return posts


async def _consumer(nursery: trio.Nursery, server: TrioRemotingServer, pushes: Pushes
                    ) -> None:
    consumer = TrioRemotingClient(ClientConfig())
    await nursery.start(consumer.serve)
    consumer.register_processor(BusCode.DELIVER, pushes)
    consumer.register_processor(BusCode.DELIVER_MANY, pushes)
    answer = await consumer.invoke_sync(addr_of(server), register_command(1, "s", 100, many=True),
                                        WAIT)
    assert answer.code == ResponseCode.SUCCESS


async def _sent_in_one_write(server: TrioRemotingServer, pushes: Pushes, bodies: list[bytes]
                             ) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    try:  # one write: one read on loopback
        await stream.send_all(b"".join(encode_command(send_command("send", "s", body, {}, WAIT))
                                       for body in bodies))
        with trio.fail_after(WAIT):
            await pushes.all_in.wait()
    finally:
        await stream.aclose()


@pytest.mark.parametrize(("bodies", "code"), [
    pytest.param([b"%d" % i for i in range(5)], BusCode.DELIVER_MANY, id="one-read-in-one-push"),
    pytest.param([b"lone"], BusCode.DELIVER, id="a-lone-send-within-its-read"),
])
async def test_a_reads_sends_are_pushed_once_it_is_handled_without_the_inbox(
        nursery: trio.Nursery, server: TrioRemotingServer, trio_bus: EventBus,
        inbox_posts: list[object], bodies: list[bytes], code: int) -> None:
    pushes = Pushes(len(bodies))
    await _consumer(nursery, server, pushes)
    await _sent_in_one_write(server, pushes, bodies)
    assert pushes.pushes == [(code, bodies)]
    assert inbox_posts == []


async def test_a_send_routed_outside_a_read_is_pushed_through_the_inbox(
        nursery: trio.Nursery, server: TrioRemotingServer, trio_bus: EventBus,
        inbox_posts: list[object]) -> None:
    pushes = Pushes(1)
    await _consumer(nursery, server, pushes)
    with trio.fail_after(WAIT):  # a task of the server's loop: no read to end
        await trio_bus.send_async("s", b"from a task", timeout=WAIT)
    assert pushes.pushes == [(BusCode.DELIVER, [b"from a task"])]
    assert len(inbox_posts) == 1
