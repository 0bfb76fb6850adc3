"""Bus interceptors (Vert.x's outbound and inbound interceptors): outbound ones see every
message their bus sends (sends, publishes, requests, replies, failures) and may change it
or stop it; inbound ones see every message before a consumer's handler does, once per
consumer, and what they raise fails it as the handler's own failure would."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Awaitable, Callable

import pytest

from remoting.bus import (
    BusClient,
    BusInterceptor,
    EventBus,
    Message,
    OutboundMessage,
    ReplyFailure,
    TrioBusClient,
)

from .conftest import WAIT, Collected


class Recorder(BusInterceptor):
    def __init__(self) -> None:
        self.outbound_kinds: Counter[str] = Counter()
        self.received = Collected()
        self._lock = threading.Lock()

    def outbound(self, message: OutboundMessage) -> None:
        with self._lock:
            self.outbound_kinds[message.kind] += 1
        message.headers["stamped"] = "yes"

    def inbound(self, message: Message) -> None:
        self.received.add(message.body)

    @property
    def inbound_bodies(self) -> list[bytes]:
        return list(self.received.items)


def test_interceptors_see_every_message_sent_and_received(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    sender, receiver = bus_clients(), bus_clients()
    on_sender, on_receiver, on_server = Recorder(), Recorder(), Recorder()
    sender.add_interceptor(on_sender)
    sender.add_interceptor(on_sender)  # once is enough
    receiver.add_interceptor(on_receiver)
    bus.add_interceptor(on_server)
    stamps: list[str | None] = []

    def handler(message: Message) -> None:
        stamps.append(message.headers.get("stamped"))
        if message.reply_address:
            message.reply(b"r")

    receiver.consumer("a", handler)
    receiver.consumer("a", handler)
    for i in range(10):
        sender.send("a", b"s%d" % i, timeout=WAIT)
        sender.request("a", b"q%d" % i, timeout=WAIT)
    sender.publish("a", b"p")  # two consumers: seen inbound twice
    on_receiver.received.wait_for(22)
    assert on_sender.outbound_kinds == {"send": 10, "request": 10, "publish": 1}
    assert on_receiver.outbound_kinds == {"reply": 10}
    assert sorted(on_receiver.inbound_bodies) == sorted(
        [b"s%d" % i for i in range(10)] + [b"q%d" % i for i in range(10)] + [b"p", b"p"])
    assert set(stamps) == {"yes"}  # an outbound interceptor's change reached the handlers
    assert on_server.outbound_kinds == {} and on_server.inbound_bodies == []  # relays only
    bus.consumer("b", handler)
    sender.request("b", b"to the server", timeout=WAIT)
    assert on_server.inbound_bodies == [b"to the server"]
    assert on_server.outbound_kinds == {"reply": 1}


class Refusing(BusInterceptor):
    def outbound(self, message: OutboundMessage) -> None:
        if message.address == "forbidden":
            raise PermissionError("not that address")

    def inbound(self, message: Message) -> None:
        if message.body == b"poison":
            raise ValueError("poisoned")


def test_an_outbound_interceptor_stops_a_message_and_an_inbound_one_fails_it(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    sender, receiver = bus_clients(), bus_clients()
    sender.add_interceptor(Refusing())
    receiver.add_interceptor(Refusing())
    handled: list[bytes] = []
    receiver.consumer("forbidden", lambda m: handled.append(m.body))

    def keep_and_reply(m: Message) -> None:
        handled.append(m.body)
        m.reply(b"ok")

    receiver.consumer("x", keep_and_reply)
    with pytest.raises(PermissionError):
        sender.send("forbidden", b"x")
    with pytest.raises(ReplyFailure) as info:
        sender.request("x", b"poison", timeout=WAIT)
    assert info.value.kind == "RECIPIENT_FAILURE" and "poisoned" in info.value.message
    assert sender.request("x", b"fine", timeout=WAIT).body == b"ok"
    assert handled == [b"fine"]
    assert receiver.statistics().handler_failures == 1


def test_only_bus_interceptors_are_accepted(bus: EventBus) -> None:
    with pytest.raises(TypeError, match="BusInterceptor"):
        bus.add_interceptor(object())  # type: ignore[arg-type]


async def test_trio_bus_clients_run_interceptors_alike(
        trio_bus_clients: Callable[[], Awaitable[TrioBusClient]]) -> None:
    sender, receiver = await trio_bus_clients(), await trio_bus_clients()
    on_sender, on_receiver = Recorder(), Recorder()
    sender.add_interceptor(on_sender)
    receiver.add_interceptor(on_receiver)
    await receiver.consumer("a", lambda m: m.reply(b"r"))
    await sender.request("a", b"q", timeout=WAIT)
    await sender.send("a", b"s", timeout=WAIT)
    assert on_sender.outbound_kinds == {"request": 1, "send": 1}
    assert on_receiver.outbound_kinds == {"reply": 1}
    assert on_receiver.inbound_bodies[0] == b"q"
