"""Bad input on the bus gets a clear error and loses nothing: a caller's bad argument fails
at once with nothing sent; a peer's bad bus request is refused (INVALID_PARAMETER, logged
with its reason) and its connection, and every other, goes on; a handler that raises is
logged and counted, and its consumer carries on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from codec import RemotingCommand, ResponseCode
from remoting import ClientConfig, RemotingClient, RemotingError, RemotingServer, TrioRemotingClient
from remoting.bus import (
    MAX_ADDRESS_BYTES,
    BusClient,
    BusCode,
    EventBus,
    ReplyFailure,
    TrioBusClient,
)

from ...logs import capture_logs
from .conftest import WAIT, Collected


@pytest.mark.parametrize(("address", "error"), [
    ("", ValueError), ("a" * (MAX_ADDRESS_BYTES + 1), ValueError), (None, TypeError),
    (b"bytes", TypeError),
])
def test_a_bad_address_fails_at_once_everywhere(
        address: object, error: type[Exception], bus: EventBus,
        bus_clients: Callable[..., BusClient]) -> None:
    client = bus_clients()
    calls: list[Callable[[], object]] = [
        lambda: client.send(address),  # type: ignore[arg-type]
        lambda: client.publish(address),  # type: ignore[arg-type]
        lambda: client.request(address),  # type: ignore[arg-type]
        lambda: client.consumer(address, print),  # type: ignore[arg-type]
        lambda: client.local_consumer(address, print),  # type: ignore[arg-type]
        lambda: bus.send(address),  # type: ignore[arg-type]
        lambda: bus.consumer(address, print),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(error):
            call()
    assert bus.statistics() == EventBus().statistics()  # nothing reached the server


def test_bad_arguments_name_themselves(bus: EventBus, bus_clients: Callable[..., BusClient]
                                       ) -> None:
    client = bus_clients()

    async def async_handler(message: object) -> None:
        pass

    with pytest.raises(TypeError, match="plain function"):
        client.consumer("x", async_handler)
    with pytest.raises(TypeError, match="on_discard"):
        bus.consumer("x", print, on_discard=async_handler)
    with pytest.raises(TypeError, match="callable"):
        bus.consumer("x", "not a function")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_buffered"):
        client.consumer("x", print, max_buffered=0)
    with pytest.raises(TypeError, match="body"):
        client.send("x", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="headers"):
        client.send("x", b"", {"k": 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="timeout"):
        client.request("x", timeout=0)
    with pytest.raises(TypeError, match="TrioBusClient"):
        BusClient(TrioRemotingClient(), "127.0.0.1:1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="addr"):
        BusClient(RemotingClient(), "nowhere")
    assert bus.statistics().consumers == 0


def test_a_bus_must_be_attached_once_before_it_takes_consumers(
        blocking_server: RemotingServer) -> None:
    bus = EventBus()
    with pytest.raises(RuntimeError, match="attach"):
        bus.consumer("x", print)
    with pytest.raises(TypeError, match="RemotingServer"):
        bus.attach(RemotingClient())  # type: ignore[arg-type]
    bus.attach(blocking_server)
    with pytest.raises(RuntimeError, match="already"):
        bus.attach(blocking_server)
    bus.close()


def test_a_server_without_a_bus_is_named(blocking_server: RemotingServer) -> None:
    with RemotingClient(ClientConfig()) as client, BusClient(client, blocking_server.addr) as bus:
        with pytest.raises(RemotingError, match="serves no event bus"):
            bus.send("x", timeout=WAIT)
        with pytest.raises(RemotingError, match="serves no event bus"):
            bus.consumer("x", print)


@pytest.mark.parametrize(("code", "ext"), [
    (BusCode.SEND, {"kind": "send", "address": ""}),
    (BusCode.SEND, {"kind": "yell", "address": "x"}),
    (BusCode.SEND, {"kind": "request", "address": "x", "timeoutMillis": "-5"}),
    (BusCode.REPLY, {"kind": "reply"}),
    (BusCode.REGISTER, {"consumerId": "x", "address": "a", "window": "1"}),
    (BusCode.REGISTER, {"consumerId": "1", "address": "a" * 2000, "window": "1"}),
    (BusCode.UNREGISTER, {}),
])
def test_a_peer_s_bad_bus_request_is_refused_and_its_connection_goes_on(
        code: int, ext: dict[str, str], blocking_server: RemotingServer, bus: EventBus,
        bus_clients: Callable[..., BusClient]) -> None:
    bus.consumer("ok", lambda m: m.reply(b"fine"))
    peer = bus_clients()
    raw: RemotingClient = peer._blocking
    with capture_logs() as events:
        response = raw.invoke_sync(blocking_server.addr,
                                   RemotingCommand.create_request(code, ext), WAIT)
    assert response.code == ResponseCode.INVALID_PARAMETER
    assert response.remark is not None and response.remark.startswith("bad bus request")
    refused = [e for e in events if e["event"] == "bus.request_refused"]
    assert len(refused) == 1 and refused[0]["log_level"] == "warning"
    assert refused[0]["code"] == code and "a" * 100 not in str(refused[0])  # no peer values
    assert peer.request("ok", timeout=WAIT).body == b"fine"  # the same connection goes on


def test_a_raising_handler_is_logged_and_its_consumer_carries_on(
        bus_clients: Callable[..., BusClient]) -> None:
    owner, sender = bus_clients(), bus_clients()
    seen = Collected()

    def handler(message: object) -> None:
        body = message.body  # type: ignore[attr-defined]
        if body == b"bad":
            seen.add(body)
            raise KeyError("missing")
        seen.add(body)

    owner.consumer("x", handler)
    with capture_logs() as events:
        sender.send("x", b"bad", timeout=WAIT)
        sender.send("x", b"good", timeout=WAIT)
        assert seen.wait_for(2) == [b"bad", b"good"]
    failed = [e for e in events if e["event"] == "bus.handler_failed"]
    assert len(failed) == 1 and failed[0]["address"] == "x"
    assert owner.statistics().handler_failures == 1


async def test_a_trio_bus_client_refuses_bad_input_alike(
        trio_bus_clients: Callable[[], Awaitable[TrioBusClient]]) -> None:
    bus = await trio_bus_clients()
    with pytest.raises(ValueError, match="empty"):
        await bus.send("")
    with pytest.raises(TypeError, match="callable"):
        await bus.consumer("x", "no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="BusClient"):
        TrioBusClient(RemotingClient(), "127.0.0.1:1")  # type: ignore[arg-type]


def test_a_closed_bus_client_refuses_calls_and_a_closed_bus_its_consumers(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    client = bus_clients()
    own = bus.consumer("x", lambda m: None)
    client.close()
    client.close()  # twice: nothing more happens
    for call in (lambda: client.send("x"), lambda: client.consumer("x", print)):
        with pytest.raises(RemotingError, match="closed"):
            call()
    bus.close()
    assert not own.registered
    with pytest.raises(ReplyFailure, match="NO_HANDLERS"):
        bus.send("x")


@pytest.mark.parametrize(("options", "error"), [
    ({"max_queued_per_consumer": -1}, ValueError), ({"max_queued_per_consumer": "9"}, TypeError),
    ({"handler_threads": 0}, ValueError), ({"handler_threads": 2.5}, TypeError),
    ({"max_consumers": 0}, ValueError), ({"max_held_per_connection": True}, TypeError),
    ({"max_held_bytes_per_connection": 0}, ValueError),
])
def test_bad_bus_options_fail_when_made(options: dict[str, object],
                                        error: type[Exception]) -> None:
    with pytest.raises(error):
        EventBus(**options)  # type: ignore[arg-type]
    if "handler_threads" in options:
        with pytest.raises(error), RemotingClient() as client:
            BusClient(client, "127.0.0.1:1", **options)  # type: ignore[arg-type]


def test_a_heartbeat_or_credit_sent_as_a_request_is_answered(
        blocking_server: RemotingServer, bus: EventBus) -> None:
    # our clients send them oneway; a peer that asks for an answer must not wait its timeout
    with RemotingClient(ClientConfig()) as peer:
        for code, ext in ((BusCode.HEARTBEAT, None),
                          (BusCode.CREDIT, {"consumerId": "7", "credits": "1"})):
            response = peer.invoke_sync(blocking_server.addr,
                                        RemotingCommand.create_request(code, ext), WAIT)
            assert response.code == ResponseCode.SUCCESS


def test_a_flood_of_bad_bus_requests_is_answered_each_and_logged_once_per_reason(
        blocking_server: RemotingServer, bus: EventBus) -> None:
    bad_kind = RemotingCommand.create_request(BusCode.SEND, {"kind": "shout", "address": "x"})
    with RemotingClient(ClientConfig()) as peer, capture_logs() as events:
        codes = {peer.invoke_sync(blocking_server.addr, bad, WAIT).code
                 for _ in range(100) for bad in (bad_kind, RemotingCommand.create_request(
                     BusCode.SEND, {"kind": "send", "address": "x", "timeoutMillis": "\u00b2"}))}
    assert codes == {ResponseCode.INVALID_PARAMETER}
    refused = [e["reason"] for e in events if e["event"] == "bus.request_refused"]
    assert len(refused) == 2, refused  # one per reason, whatever the peer repeats
    assert "kind must be one of" in refused[0] and "timeoutMillis is not an integer" in refused[1]
