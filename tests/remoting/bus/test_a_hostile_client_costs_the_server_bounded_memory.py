"""What one client can make a bus server keep is bounded beyond each consumer's window: the
messages (and their bytes) held for one connection's consumers together, whatever windows
they announce and however many consumers share an address (a publish to 1,000 consumers of
one connection is 1,000 messages held for it), and the consumers registered on the whole bus.
Beyond a bound a send fails at once as RECIPIENT_FAILURE, a publish is dropped (counted), a
registration is refused with a reason; the rest of the bus goes on."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Literal

import pytest

from codec import RemotingCommand
from processors import RequestContext, RequestProcessor
from remoting import ClientConfig, RemotingClient, RemotingServer, ResponseCode
from remoting._bus._wire import BusCode, register_command, send_command
from remoting.bus import BusClient, EventBus

from .conftest import WAIT, Collected, eventually

CONSUMERS = 10  # of the hostile connection, all at one address


class NeverAnswers(RequestProcessor):
    """Takes the server's pushes and answers none of them (until released)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> None:
        self.release.wait(WAIT)
        return None


@pytest.fixture
def hostile(blocking_server: RemotingServer) -> Iterator[RemotingClient]:
    """A client with CONSUMERS consumers at "fan", each announcing a window of 1,000, that
    takes every push and answers none."""
    stuck = NeverAnswers()
    with RemotingClient(ClientConfig()) as client:
        client.register_processor(BusCode.DELIVER, stuck, threads=2)
        for i in range(CONSUMERS):
            assert client.invoke_sync(blocking_server.addr,
                                      register_command(i, "fan", 1000), WAIT).code == 0
        try:
            yield client
        finally:
            stuck.release.set()


def _sends(client: RemotingClient, addr: str, n: int, body: bytes, refused: int
           ) -> list[RemotingCommand]:
    """Send ``n`` messages to "fan" at once; return the answers of the ``refused`` ones
    answered at once (the others wait for receipts that never come)."""
    futures = [client.invoke_async(addr, send_command("send", "fan", body, {}, 3 * WAIT),
                                   4 * WAIT) for _ in range(n)]
    eventually(lambda: sum(f.done() for f in futures) >= refused, "the refusals")
    return [f.result() for f in futures if f.done()]


@pytest.mark.parametrize("bus", [{"max_held_per_connection": 25}], indirect=True)
def test_a_connection_s_consumers_together_hold_at_most_their_bound(
        blocking_server: RemotingServer, bus: EventBus, hostile: RemotingClient,
        bus_clients: Callable[..., BusClient]) -> None:
    with RemotingClient(ClientConfig()) as sender:
        refused = _sends(sender, blocking_server.addr, 30, b"x", 5)
        assert len(refused) == 5  # 25 held (pushed, unanswered), 5 refused at once
        assert {r.code for r in refused} == {32382}  # RECIPIENT_FAILURE
        assert "holds" in (refused[0].remark or "")
        publisher = bus_clients()
        for _ in range(3):  # each reaches all 10 consumers: dropped, counted
            publisher.publish("fan", b"p")
        assert bus.statistics().dropped == 3 * CONSUMERS
        healthy = bus_clients()  # another connection's consumers are not held back
        seen = Collected()
        healthy.consumer("other", lambda m: seen.add(m.body))
        publisher.send("other", b"fine", timeout=WAIT)
        assert seen.wait_for(1) == [b"fine"]


@pytest.mark.parametrize("bus", [{"max_held_bytes_per_connection": 100_000}], indirect=True)
def test_a_connection_s_consumers_together_hold_at_most_their_bytes(
        blocking_server: RemotingServer, bus: EventBus, hostile: RemotingClient) -> None:
    with RemotingClient(ClientConfig()) as sender:
        refused = _sends(sender, blocking_server.addr, 8, b"x" * 30_000, 5)
        assert len(refused) == 5 and {r.code for r in refused} == {32382}  # 3 fit in 100 kB


@pytest.mark.parametrize("bus", [{"max_held_bytes_per_connection": 100_000}], indirect=True)
def test_headers_count_in_a_connection_s_bytes(
        blocking_server: RemotingServer, bus: EventBus, hostile: RemotingClient) -> None:
    headers = {f"h{i}": "v" * 1000 for i in range(30)}  # ~30 kB of headers, no body
    with RemotingClient(ClientConfig()) as sender:
        futures = [sender.invoke_async(blocking_server.addr, send_command(
            "send", "fan", b"", headers, 3 * WAIT), 4 * WAIT) for _ in range(8)]
        eventually(lambda: sum(f.done() for f in futures) >= 5, "the refusals")
        assert {f.result().code for f in futures if f.done()} == {32382}


def test_one_message_larger_than_the_byte_bound_still_goes_alone() -> None:
    from remoting._bus._outlet import Budget

    budget = Budget(max_messages=10, max_bytes=100)
    assert budget.fits(1000)  # nothing held: it goes, alone
    budget.charge(1000)
    assert not budget.fits(1)
    budget.release(1000)
    assert budget.fits(60) and (budget.messages, budget.bytes) == (0, 0)


@pytest.mark.parametrize("bus", [{"max_consumers": 4}], indirect=True)
def test_the_bus_holds_at_most_max_consumers_remote_consumers(
        blocking_server: RemotingServer, bus: EventBus) -> None:
    with RemotingClient(ClientConfig()) as a, RemotingClient(ClientConfig()) as b:
        for i in range(3):
            assert a.invoke_sync(blocking_server.addr, register_command(i, "x", 1), WAIT).code == 0
        assert b.invoke_sync(blocking_server.addr, register_command(9, "y", 1), WAIT).code == 0
        refused = b.invoke_sync(blocking_server.addr, register_command(10, "y", 1), WAIT)
        assert refused.code == ResponseCode.INVALID_PARAMETER
        assert "4 consumers" in (refused.remark or "")
        a.shutdown()  # its three are forgotten once the server sees the close: room again
        eventually(lambda: bus.statistics().remote_consumers == 1, "a's consumers forgotten")
        again = b.invoke_sync(blocking_server.addr, register_command(10, "y", 1), WAIT)
        assert again.code == 0


@pytest.mark.parametrize("bus", [{"max_waiting_per_connection": 8}], indirect=True)
def test_a_connection_s_sends_and_requests_waiting_for_an_outcome_are_bounded(
        blocking_server: RemotingServer, bus: EventBus, hostile: RemotingClient,
        bus_clients: Callable[..., BusClient]) -> None:
    """The server answers a send or a request from its outcome's callback, holding no
    processor, so ``max_requests_per_connection`` no longer bounds what one connection can
    leave waiting (an answer kept, a reply entry for a request; with no timeout, until the
    connection closes): ``max_waiting_per_connection`` does, refusing more at once."""
    kinds: list[Literal["request", "send"]] = ["request", "send"] * 5
    with RemotingClient(ClientConfig()) as sender:
        calls = [sender.invoke_async(blocking_server.addr, send_command(
            kind, "fan", b"q", {}, 3 * WAIT), 4 * WAIT) for kind in kinds]
        eventually(lambda: sum(f.done() for f in calls) >= 2, "the refusals")
        refused = [f.result() for f in calls if f.done()]
        assert len(refused) == 2 and {r.code for r in refused} == {ResponseCode.SYSTEM_BUSY}
        assert "8 sends and requests waiting for their outcome" in (refused[0].remark or "")
        healthy = bus_clients()  # another connection's sends go on
        seen = Collected()
        healthy.consumer("other", lambda m: seen.add(m.body))
        healthy.send("other", b"fine", timeout=WAIT)
        assert seen.wait_for(1) == [b"fine"]
