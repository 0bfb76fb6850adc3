"""The event bus's OpenTelemetry metrics, with the real SDK: messages sent by kind, delivered,
failures by kind, messages lost by reason, handler failures, each handler run's duration,
and gauges of consumers, pending replies and queued messages, by role (a bus server, bus
clients). They match the buses' own statistics."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from remoting import RemotingClient, RemotingServer
from remoting.bus import BusClient, EventBus, Message, ReplyFailure

from ..remoting.bus.conftest import eventually
from .conftest import Telemetry

WAIT = 10.0


def by(points: list[Any], *keys: str) -> dict[tuple[object, ...], Any]:
    """Index data points by the values of attributes ``keys``."""
    return {tuple(p.attributes.get(k) for k in keys): p for p in points}


def test_bus_metrics_count_what_the_bus_does(otel: Telemetry) -> None:
    failed = threading.Event()

    def raising(message: Message) -> None:
        failed.set()
        raise ValueError("bad")

    with (RemotingServer(otel.server_config()) as server,
          RemotingClient(otel.client_config()) as c1, RemotingClient(otel.client_config()) as c2,
          EventBus() as bus):
        bus.attach(server)
        with BusClient(c1, server.addr) as worker, BusClient(c2, server.addr) as asker:
            worker.consumer("echo", lambda m: m.reply(m.body))
            bus.consumer("boom", raising)
            for _ in range(3):
                asker.send("echo", b"s", timeout=WAIT)
            assert asker.request("echo", b"r", timeout=WAIT).body == b"r"
            asker.publish("nobody", b"p")  # unrouted: no error
            with pytest.raises(ReplyFailure, match="NO_HANDLERS"):
                asker.send("nobody", timeout=WAIT)
            bus.send("boom", timeout=WAIT)
            assert failed.wait(WAIT)
            eventually(lambda: bus.statistics().handler_failures == 1, "the failure counted")

            sent = by(otel.points("messaging.client.sent.messages"), "remoting.role",
                      "messaging.operation.name")
            assert sent["client", "send"].value == 4  # three delivered, one NO_HANDLERS
            assert sent["client", "request"].value == 1
            assert sent["client", "publish"].value == 1
            assert sent["client", "reply"].value == 1  # the worker's reply
            assert sent["server", "send"].value == 1
            consumed = by(otel.points("messaging.client.consumed.messages"), "remoting.role")
            assert consumed["client",].value == 4 and consumed["server",].value == 1
            failures = by(otel.points("remoting.bus.failures"), "remoting.role",
                          "remoting.bus.failure")
            assert failures["client", "NO_HANDLERS"].value == 1
            assert failures["client", "TIMEOUT"].value == 0
            lost = by(otel.points("remoting.bus.messages.lost"), "remoting.role",
                      "remoting.bus.reason")
            assert lost["server", "unrouted"].value == 1
            assert by(otel.points("remoting.bus.handler_failures"),
                      "remoting.role")["server",].value == 1
            consumers = by(otel.points("remoting.bus.consumers"), "remoting.role")
            assert consumers["server",].value == 2  # its own, and the worker's remote one
            assert consumers["client",].value == 1
            assert by(otel.points("remoting.bus.queued"), "remoting.role")["server",].value == 0

            runs = by(otel.points("messaging.process.duration"), "messaging.destination.name",
                      "messaging.operation.name", "error.type")
            assert runs["echo", "send", None].count == 3
            assert runs["echo", "request", None].count == 1
            assert runs["boom", "send", "ValueError"].count == 1
            assert all(p.attributes["messaging.system"] == "remoting.bus"
                       for p in runs.values())
            assert bus.statistics().unrouted_publishes == 1
            assert worker.statistics().delivered + asker.statistics().delivered == 4


def test_without_a_meter_provider_no_bus_metrics(otel: Telemetry) -> None:
    with (RemotingServer(otel.server_config(meter_provider=None)) as server,
          EventBus() as bus):
        bus.attach(server)
        bus.consumer("x", lambda m: None)
        bus.send("x", timeout=WAIT)
    assert otel.points("messaging.client.sent.messages") == []
    assert otel.points("messaging.process.duration") == []
