"""A bus server pushes the sends and requests queued for a consumer whose client takes them
(its REGISTER said ``many``) several a push, DELIVER_MANY, in order; the client answers how
it took each one (taken, full, gone), and each sender is told its own message's outcome: a
full consumer fails that message alone, a gone one's messages go to the next consumer. An
answer that does not say how each was taken fails them. A client reads a DELIVER_MANY only if
its body is exactly ``count`` DELIVER frames of its one consumer; anything else is refused
with a reason."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from codec import RemotingCommand, ResponseCode, encode_command
from processors import RequestContext, RequestProcessor
from remoting import ClientConfig, RemotingClient, RemotingServer
from remoting._bus._wire import (
    MAX_DELIVER_MANY,
    BadBusRequest,
    BusCode,
    deliver_command,
    deliver_many_command,
    deliver_many_of,
    register_command,
    send_command,
    taken_response,
    window_command,
)
from remoting.bus import BusClient, EventBus

from .conftest import WAIT, Collected, eventually


class Batches(RequestProcessor):
    """A client's DELIVER and DELIVER_MANY processor: takes a lone DELIVER; answers a
    DELIVER_MANY as each message's body says (``ok``: taken, ``full``, ``gone``), or with a
    bare SUCCESS if ``mute``."""

    def __init__(self, *, mute: bool = False) -> None:
        self.mute = mute
        self.batches: list[list[bytes]] = []
        self.seen = threading.Semaphore(0)

    def process_request(self, ctx: RequestContext, request: RemotingCommand
                        ) -> RemotingCommand:
        if request.code == BusCode.DELIVER:
            self.seen.release()
            return RemotingCommand.create_response(ResponseCode.SUCCESS)
        bodies = [deliver.body for deliver in deliver_many_of(request)]
        self.batches.append(bodies)
        self.seen.release()
        if self.mute:
            return RemotingCommand.create_response(ResponseCode.SUCCESS)
        return taken_response("".join("a" if body.startswith(b"ok") else body[:1].decode()
                                      for body in bodies))


def _queued_behind_a_window_of_one(server: RemotingServer, bus: EventBus, batches: Batches,
                                   consumer: RemotingClient, sender: RemotingClient,
                                   bodies: list[bytes]) -> list[object]:
    """Register ``consumer`` (takes DELIVER_MANY) at "s" with a window of 1, fill it with
    one send, queue sends of ``bodies`` behind it; return their futures."""
    consumer.register_processor(BusCode.DELIVER, batches, threads=4)
    consumer.register_processor(BusCode.DELIVER_MANY, batches, threads=4)
    assert consumer.invoke_sync(server.addr, register_command(1, "s", 1, many=True),
                                WAIT).code == 0

    def send(body: bytes) -> object:
        return sender.invoke_async(server.addr, send_command("send", "s", body, {}, 3 * WAIT),
                                   4 * WAIT)

    first = send(b"ok-first")
    assert batches.seen.acquire(timeout=WAIT)
    assert first.result(WAIT).code == 0  # type: ignore[attr-defined]
    futures = [send(body) for body in bodies]
    eventually(lambda: bus.statistics().queued == len(bodies), "the sends queued")
    return futures


def test_queued_sends_go_in_one_push_and_each_sender_gets_its_own_outcome(
        blocking_server: RemotingServer, bus: EventBus,
        bus_clients: Callable[..., BusClient]) -> None:
    batches = Batches()
    bodies = [b"ok1", b"full2", b"gone3", b"ok4"]
    with RemotingClient(ClientConfig()) as consumer, RemotingClient(ClientConfig()) as sender:
        futures = _queued_behind_a_window_of_one(blocking_server, bus, batches, consumer, sender,
                                                 bodies)
        other = Collected()  # the next consumer of "s", for the message found gone
        bus_clients().consumer("s", lambda message: other.add(message.body))
        # room for all: the credit for the first admits the queued ones at once
        assert consumer.invoke_sync(blocking_server.addr, window_command(1, 100, 1),
                                    WAIT).code == 0
        assert batches.seen.acquire(timeout=WAIT)
        codes = [f.result(WAIT).code for f in futures]  # type: ignore[attr-defined]
    assert batches.batches == [bodies]  # one push, in order
    assert codes == [0, 32382, 0, 0]  # full: RECIPIENT_FAILURE for that message alone
    assert other.wait_for(1) == [b"gone3"]
    stats = bus.statistics()
    assert stats.recipient_failures == 1


def test_an_answer_that_does_not_say_how_each_was_taken_fails_them(
        blocking_server: RemotingServer, bus: EventBus) -> None:
    batches = Batches(mute=True)
    with RemotingClient(ClientConfig()) as consumer, RemotingClient(ClientConfig()) as sender:
        futures = _queued_behind_a_window_of_one(blocking_server, bus, batches, consumer, sender,
                                                 [b"ok1", b"ok2"])
        assert consumer.invoke_sync(blocking_server.addr, window_command(1, 100, 1),
                                    WAIT).code == 0
        answers = [f.result(WAIT) for f in futures]  # type: ignore[attr-defined]
    assert batches.batches == [[b"ok1", b"ok2"]]
    assert [a.code for a in answers] == [32382, 32382]
    assert all("did not say how it took" in (a.remark or "") for a in answers)


def _deliver(consumer_id: int, body: bytes) -> RemotingCommand:
    return deliver_command(consumer_id, "send", "s", body, {"k": "v"}, None)


def test_a_client_reads_the_messages_of_a_deliver_many_in_order() -> None:
    push = deliver_many_command(7, [_deliver(7, b"%d" % i) for i in range(3)])
    delivers = deliver_many_of(push)
    assert [(d.consumer_id, d.body, d.headers) for d in delivers] == [
        (7, b"0", {"k": "v"}), (7, b"1", {"k": "v"}), (7, b"2", {"k": "v"})]


def _many(consumer_id: int, count: object, body: bytes) -> RemotingCommand:
    return RemotingCommand.create_request(
        BusCode.DELIVER_MANY, {"consumerId": str(consumer_id), "count": str(count)}, body)


_TWO = encode_command(_deliver(7, b"a")) + encode_command(_deliver(7, b"b"))


@pytest.mark.parametrize(("push", "field", "says"), [
    (_many(7, 3, _TWO), "count", "fewer than count"),
    (_many(7, 1, _TWO), "body", "more than count"),
    (_many(7, 0, _TWO), "count", "count"),
    (_many(7, MAX_DELIVER_MANY + 1, _TWO), "count", "count"),
    (_many(7, 2, _TWO[:-3]), "count", "fewer than count"),  # the last frame cut short
    (_many(7, 1, b"\x00\x00\x00\x02xx"), "body", "no frame"),
    (_many(8, 2, _TWO), "consumerId", "another consumer"),
    (_many(7, 1, encode_command(send_command("send", "s", b"x", {}, 1.0))), "body",
     "no DELIVER"),
    (_many(7, 1, encode_command(RemotingCommand.create_request(
        BusCode.DELIVER, {"consumerId": "7", "kind": "send"}))), "address", "no address"),
])
def test_a_bad_deliver_many_is_refused_with_a_reason(push: RemotingCommand, field: str,
                                                     says: str) -> None:
    with pytest.raises(BadBusRequest, match=says) as refused:
        deliver_many_of(push)
    assert refused.value.field == field
