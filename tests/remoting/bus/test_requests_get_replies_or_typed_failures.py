"""Request and reply over real sockets, on both faces: a reply comes back to its requester;
every failure is a `ReplyFailure` of its kind (NO_HANDLERS, TIMEOUT, RECIPIENT_FAILURE with
the recipient's code and message), whether the consumer is in the server or in a client."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.lowlevel

from remoting.bus import BusClient, EventBus, Message, ReplyFailure, TrioBusClient

from .conftest import WAIT


def test_a_client_s_request_is_answered_by_another_client_s_consumer(
        bus_clients: Callable[..., BusClient]) -> None:
    answering, asking = bus_clients(), bus_clients()
    answering.consumer("greet", lambda m: m.reply(b"hello " + m.body, {"by": "answering"}))
    reply = asking.request("greet", b"bob", timeout=WAIT)
    assert reply.body == b"hello bob"
    assert reply.headers == {"by": "answering"}
    assert reply.kind == "reply" and reply.reply_address is None


def test_the_server_s_consumer_answers_clients_and_the_server_asks_clients(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    client = bus_clients()
    bus.consumer("on-server", lambda m: m.reply(m.body.upper()))
    assert client.request("on-server", b"abc", timeout=WAIT).body == b"ABC"
    client.consumer("on-client", lambda m: m.reply(m.body[::-1]))
    assert bus.request("on-client", b"abc", timeout=WAIT).body == b"cba"


def test_no_handlers(bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    client = bus_clients()
    with pytest.raises(ReplyFailure) as info:
        client.request("nobody", b"x", timeout=WAIT)
    assert info.value.kind == "NO_HANDLERS" and info.value.address == "nobody"
    with pytest.raises(ReplyFailure, match="NO_HANDLERS"):
        client.send("nobody", b"x")
    with pytest.raises(ReplyFailure, match="NO_HANDLERS"):
        bus.request("nobody", b"x", timeout=WAIT)
    assert bus.statistics().no_handlers == 3


def test_timeout_when_the_handler_never_replies(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    silent, asking = bus_clients(), bus_clients()
    seen = threading.Event()
    silent.consumer("silent", lambda m: seen.set())
    with pytest.raises(ReplyFailure) as info:
        asking.request("silent", b"x", timeout=0.3)
    assert info.value.kind == "TIMEOUT"
    assert seen.wait(WAIT)  # it was delivered; only the reply is missing
    assert bus.statistics().pending_replies == 0  # the reply address is gone


def test_a_handler_that_fails_the_message_gives_its_code_and_message(
        bus_clients: Callable[..., BusClient]) -> None:
    refusing, asking = bus_clients(), bus_clients()
    refusing.consumer("orders", lambda m: m.fail(42, "out of stock"))
    with pytest.raises(ReplyFailure) as info:
        asking.request("orders", b"x", timeout=WAIT)
    failure = info.value
    assert (failure.kind, failure.code, failure.message, failure.address) == (
        "RECIPIENT_FAILURE", 42, "out of stock", "orders")


def test_a_handler_that_raises_fails_its_request_and_its_consumer_carries_on(
        bus_clients: Callable[..., BusClient]) -> None:
    flaky, asking = bus_clients(), bus_clients()

    def handler(message: Message) -> None:
        if message.body == b"bad":
            raise ValueError("cannot parse")
        message.reply(b"ok")

    flaky.consumer("parse", handler)
    with pytest.raises(ReplyFailure) as info:
        asking.request("parse", b"bad", timeout=WAIT)
    assert info.value.kind == "RECIPIENT_FAILURE" and info.value.code == -1
    assert "ValueError: cannot parse" in info.value.message
    assert asking.request("parse", b"good", timeout=WAIT).body == b"ok"
    assert flaky.statistics().handler_failures == 1


async def test_the_trio_faces_reply_and_fail_alike(
        trio_bus: EventBus, trio_bus_clients: Callable[[], Awaitable[TrioBusClient]]) -> None:
    answering, asking = await trio_bus_clients(), await trio_bus_clients()

    async def handler(message: Message) -> None:
        await trio.lowlevel.checkpoint()  # a handler is a task: it may await
        if message.body == b"fail":
            message.fail(7, "nope")
        else:
            message.reply(message.body * 2)

    await answering.consumer("twice", handler)
    assert (await asking.request("twice", b"ab", timeout=WAIT)).body == b"abab"
    with pytest.raises(ReplyFailure) as info:
        await asking.request("twice", b"fail", timeout=WAIT)
    assert (info.value.kind, info.value.code) == ("RECIPIENT_FAILURE", 7)
    with pytest.raises(ReplyFailure, match="NO_HANDLERS"):
        await asking.request("nobody", b"x", timeout=WAIT)
    await answering.consumer("silent", lambda m: None)
    with pytest.raises(ReplyFailure, match="TIMEOUT"):
        await asking.request("silent", b"x", timeout=0.2)
    trio_bus.consumer("server-side", lambda m: m.reply(b"from the server"))
    assert (await asking.request("server-side", timeout=WAIT)).body == b"from the server"
    assert (await trio_bus.request_async("twice", b"z", timeout=WAIT)).body == b"zz"


@pytest.mark.parametrize(("call", "instead"), [("request", "request_async"),
                                                ("send", "send_async")])
def test_a_blocking_request_or_send_on_the_server_s_loop_is_refused(
        bus: EventBus, call: str, instead: str) -> None:
    failures: list[BaseException] = []
    done = threading.Event()

    def on_loop() -> None:  # a handler of a trio server would be here
        try:
            getattr(bus, call)("x")
        except BaseException as exc:
            failures.append(exc)
        done.set()

    bus._host.call_on_loop(on_loop)  # type: ignore[union-attr]
    assert done.wait(WAIT)
    assert isinstance(failures[0], RuntimeError) and instead in str(failures[0])
