"""A reply address is answered only by whoever holds its message: the client whose consumer
got the request (or, for a reply that awaits an answer, the requester it went to). Another
client that guesses or learns the address cannot answer, fail or hijack the conversation: its
REPLY is refused as NO_HANDLERS, as for an address that expired, and the real answer still
gets through."""

from __future__ import annotations

import threading
from collections.abc import Callable

from remoting import ClientConfig, RemotingClient, RemotingServer
from remoting._bus._wire import reply_command
from remoting.bus import BusClient, EventBus, Message

from .conftest import WAIT, Collected

GUESSES = 200  # reply addresses a hostile client tries


def _spoof(client: RemotingClient, addr: str, reply_address: str) -> list[int]:
    """Answer, fail and reply-and-request ``reply_address`` from ``client``; return the codes."""
    return [client.invoke_sync(addr, command, WAIT).code for command in (
        reply_command("reply", reply_address, b"spoofed", {}, None),
        reply_command("fail", reply_address, b"", {}, None, 7, "spoofed"),
        reply_command("request", reply_address, b"spoofed", {}, 1.0))]


def test_another_client_cannot_answer_a_request_it_does_not_hold(
        blocking_server: RemotingServer, bus: EventBus,
        bus_clients: Callable[..., BusClient]) -> None:
    worker, asker = bus_clients(), bus_clients()
    held: list[Message] = []
    got = threading.Event()

    def hold(message: Message) -> None:
        held.append(message)
        got.set()

    worker.consumer("svc", hold)
    answer: list[object] = []
    thread = threading.Thread(target=lambda: answer.append(asker.request("svc", b"q",
                                                                         timeout=WAIT)))
    thread.start()
    assert got.wait(WAIT)
    reply_address = held[0].reply_address
    assert reply_address is not None
    with RemotingClient(ClientConfig()) as hostile:
        refused = [_spoof(hostile, blocking_server.addr, str(guess))
                   for guess in range(1, GUESSES)]
        refused.append(_spoof(hostile, blocking_server.addr, reply_address))
    assert {code for codes in refused for code in codes} == {32380}  # NO_HANDLERS, each
    held[0].reply(b"real")
    thread.join(WAIT)
    assert [m.body for m in answer] == [b"real"]  # type: ignore[attr-defined]


def test_another_client_cannot_answer_a_reply_that_awaits_an_answer(
        blocking_server: RemotingServer, bus: EventBus,
        bus_clients: Callable[..., BusClient]) -> None:
    worker, asker = bus_clients(), bus_clients()
    final = Collected()

    def tailor(message: Message) -> None:
        final.add(message.reply_and_request(b"which size?", timeout=WAIT).body)

    worker.consumer("tailor", tailor)
    question = asker.request("tailor", b"shirt", timeout=WAIT)
    assert question.reply_address is not None
    with RemotingClient(ClientConfig()) as hostile:
        codes = _spoof(hostile, blocking_server.addr, question.reply_address)
    assert codes == [32380, 32380, 32380]
    question.reply(b"M")
    assert final.wait_for(1) == [b"M"]
