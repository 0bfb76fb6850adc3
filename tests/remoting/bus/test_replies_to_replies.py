"""A reply may itself await an answer (``reply_and_request``), and so on: a conversation of
several turns between a requester and a handler, wherever each lives, on both faces."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable

import pytest

from remoting.bus import BusClient, EventBus, Message, ReplyFailure, TrioBusClient

from .conftest import WAIT, eventually


def conversation(message: Message) -> None:
    """Asks the requester a question, then answers its answer."""
    answer = message.reply_and_request(b"which size?", timeout=WAIT)
    answer.reply(b"size " + answer.body + b" it is")


def test_a_client_and_another_client_s_handler_talk_three_turns(
        bus_clients: Callable[..., BusClient]) -> None:
    shop, customer = bus_clients(), bus_clients()
    shop.consumer("order", conversation)
    question = customer.request("order", b"a shirt", timeout=WAIT)
    assert question.body == b"which size?" and question.reply_address is not None
    final = question.reply_and_request(b"M", timeout=WAIT)
    assert final.body == b"size M it is" and final.reply_address is None


def test_the_server_s_handler_and_a_client_talk_alike(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    bus.consumer("order", conversation)
    customer = bus_clients()
    question = customer.request("order", b"a hat", timeout=WAIT)
    assert question.reply_and_request(b"L", timeout=WAIT).body == b"size L it is"


def test_a_local_conversation_needs_no_server(bus_clients: Callable[..., BusClient]) -> None:
    client = bus_clients()
    client.local_consumer("order", conversation)
    question = client.request("order", b"socks", timeout=WAIT)
    assert question.reply_and_request(b"S", timeout=WAIT).body == b"size S it is"


def test_answering_a_reply_after_its_requester_gave_up_fails_as_no_handlers(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    shop, customer = bus_clients(), bus_clients()
    gave_up = threading.Event()
    kinds: list[str] = []

    def impatient(message: Message) -> None:
        try:
            message.reply_and_request(b"?", timeout=0.2)
        except ReplyFailure as failure:
            kinds.append(failure.kind)
            gave_up.set()

    shop.consumer("order", impatient)
    question = customer.request("order", b"x", timeout=WAIT)
    assert gave_up.wait(WAIT) and kinds == ["TIMEOUT"]
    with pytest.raises(ReplyFailure) as info:
        question.reply_and_request(b"too late", timeout=WAIT)
    assert info.value.kind == "NO_HANDLERS"
    question.reply(b"too late")  # a plain reply is dropped, counted, no error
    eventually(lambda: bus.statistics().expired_replies == 2, "both late answers counted")


async def test_the_trio_faces_talk_alike(
        trio_bus: EventBus, trio_bus_clients: Callable[[], Awaitable[TrioBusClient]]) -> None:
    shop, customer = await trio_bus_clients(), await trio_bus_clients()

    async def talk(message: Message) -> None:
        answer = await message.reply_and_request_async(b"which size?", timeout=WAIT)
        answer.reply(b"size " + answer.body + b" it is")

    await shop.consumer("order", talk)
    question = await customer.request("order", b"a shirt", timeout=WAIT)
    final = await question.reply_and_request_async(b"XL", timeout=WAIT)
    assert final.body == b"size XL it is"
    trio_bus.consumer("server-order", talk)
    question = await customer.request("server-order", b"a hat", timeout=WAIT)
    assert (await question.reply_and_request_async(b"S", timeout=WAIT)).body == b"size S it is"


def test_a_message_that_awaits_no_reply_cannot_start_a_conversation(
        bus: EventBus) -> None:
    seen: list[Message] = []
    bus.consumer("s", seen.append)
    bus.send("s")
    message = Message(address="s", body=b"", headers={}, kind="send")
    with pytest.raises(ValueError, match="awaits no reply"):
        message.reply_and_request(b"?")
    message.reply(b"ignored")  # nothing to answer: nothing happens
