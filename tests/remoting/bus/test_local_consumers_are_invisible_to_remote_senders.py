"""A local consumer (Vert.x's ``localConsumer``) receives only its own bus's messages: other
clients and the server never reach a client's, clients never reach the server's. A bus's
sends go to its local consumers first, with no network in between."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from remoting.bus import BusClient, EventBus, ReplyFailure, TrioBusClient

from .conftest import WAIT, eventually


def test_a_client_s_local_consumer_is_reached_by_that_client_only(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    owner, other = bus_clients(), bus_clients()
    owner.local_consumer("private", lambda m: m.reply(b"mine"))
    assert owner.request("private", timeout=WAIT).body == b"mine"
    with pytest.raises(ReplyFailure, match="NO_HANDLERS"):
        other.request("private", timeout=WAIT)
    with pytest.raises(ReplyFailure, match="NO_HANDLERS"):
        bus.send("private")
    assert bus.statistics().addresses == 0  # the server never heard of it


def test_the_server_s_local_consumer_is_reached_by_the_server_only(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    bus.local_consumer("admin", lambda m: m.reply(b"ok"))
    assert bus.request("admin", timeout=WAIT).body == b"ok"
    with pytest.raises(ReplyFailure, match="NO_HANDLERS"):
        bus_clients().request("admin", timeout=WAIT)


def test_a_bus_s_local_consumers_come_first_for_its_own_sends(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    owner, other = bus_clients(), bus_clients()
    local = owner.local_consumer("w", lambda m: None)
    remote = other.consumer("w", lambda m: None)
    local.pause()
    remote.pause()
    for _ in range(5):
        owner.send("w", timeout=WAIT)
    assert (local.buffered, remote.buffered) == (5, 0)  # its bus's sends go to it...
    bus.send("w")
    eventually(lambda: remote.buffered == 1, "the server's send reached the other client")
    assert local.buffered == 5  # ...and nobody else's do


async def test_the_trio_client_s_local_consumer_alike(
        trio_bus: EventBus, trio_bus_clients: Callable[[], Awaitable[TrioBusClient]]) -> None:
    owner, other = await trio_bus_clients(), await trio_bus_clients()
    await owner.local_consumer("private", lambda m: m.reply(b"mine"))
    assert (await owner.request("private", timeout=WAIT)).body == b"mine"
    with pytest.raises(ReplyFailure, match="NO_HANDLERS"):
        await other.request("private", timeout=WAIT)
