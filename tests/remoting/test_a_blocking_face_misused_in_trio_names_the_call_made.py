"""A blocking face that wraps the blocking client (the queue's, the bus's; Spark's calls in
tests/spark/test_spark_calls_misused_in_trio_name_themselves.py),
called in a thread that runs trio, refuses at once naming the call the user made and its
trio form: it said ``RemotingClient.invoke_sync blocks...`` when the user had called
``QueueClient.publish``. `remoting._checks.blocking_call` marks such methods: the client's
own check (`outside_trio`) names the outermost marked call made in its context."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest
import trio

import remoting
from codec import RemotingCommand
from remoting import RemotingClient, ServerConfig
from remoting._checks import blocking_call, outside_trio
from remoting.bus import BusClient, EventBus
from remoting.queue import QueueClient, QueueService
from remoting.rocketmq import LitePullConsumer, Producer, PushConsumer

pytestmark = pytest.mark.default_io  # the check is the face's, before any io


def refused(call: Callable[[], Any]) -> str:
    with pytest.raises(RuntimeError) as caught:
        call()
    return str(caught.value)


async def test_the_queue_s_blocking_calls_name_themselves() -> None:
    async with remoting.open_server(ServerConfig()) as server:
        QueueService().attach(server)
        addr = f"127.0.0.1:{server.port}"
        with RemotingClient() as client:
            q = QueueClient(client)
            for name, call in [
                ("publish", lambda: q.publish(addr, "t", b"x")),
                ("publish_many", lambda: q.publish_many(addr, "t", [b"x"])),
                ("subscribe", lambda: q.subscribe(addr, "t", "c")),
                ("pull", lambda: q.pull(addr, "t", offset=0)),
                ("offsets", lambda: q.offsets(addr, "t")),
                ("statistics", lambda: q.statistics(addr)),
            ]:
                message = refused(call)
                assert message.startswith(f"QueueClient.{name} blocks"), message
                assert "RemotingClient" not in message.split(" blocks")[0]
                assert "QueueClient(client) over a TrioRemotingClient" in message


async def test_the_bus_client_s_blocking_calls_name_themselves() -> None:
    async with remoting.open_server(ServerConfig()) as server:
        bus = EventBus()
        bus.attach(server)
        addr = f"127.0.0.1:{server.port}"
        with RemotingClient() as client:
            bus_client = BusClient(client, addr)
            try:
                for name, call in [
                    ("send", lambda: bus_client.send("a", b"x")),
                    ("publish", lambda: bus_client.publish("a", b"x")),
                    ("request", lambda: bus_client.request("a", b"x", timeout=1)),
                    ("consumer", lambda: bus_client.consumer("a", print)),
                ]:
                    message = refused(call)
                    assert message.startswith(f"BusClient.{name} blocks"), message
                    assert "TrioBusClient(client, addr)" in message
            finally:
                await trio.to_thread.run_sync(bus_client.close)
        bus.close()


async def test_the_outermost_marked_call_is_named_and_a_thread_runs_it() -> None:
    ran = []

    def invoke(message: RemotingCommand) -> None:  # a blocking client's call
        outside_trio("RemotingClient.invoke_sync")
        ran.append(message)

    @blocking_call("RocketClient.send_batch", "`await TrioRocketClient.send_batch(...)`")
    def send_batch(messages: list[RemotingCommand]) -> None:
        for message in messages:
            send(message)

    @blocking_call("RocketClient.send", "`await TrioRocketClient.send(...)`")
    def send(message: RemotingCommand) -> None:
        invoke(message)

    message = refused(lambda: send(RemotingCommand.create_request(1)))
    assert message.startswith("RocketClient.send blocks")
    assert "`await TrioRocketClient.send(...)`" in message
    message = refused(lambda: send_batch([RemotingCommand.create_request(1)]))
    assert message.startswith("RocketClient.send_batch blocks")
    message = refused(lambda: invoke(RemotingCommand.create_request(1)))
    assert message.startswith("RemotingClient.invoke_sync blocks")  # outside a marked call
    assert ran == []
    await trio.to_thread.run_sync(send, RemotingCommand.create_request(1))  # a thread: runs
    assert len(ran) == 1


def _closed_port() -> str:
    with socket.socket() as probe:  # a port nobody listens on (nothing is sent: refused first)
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


async def test_the_rocketmq_blocking_faces_name_themselves() -> None:
    name_servers = [_closed_port()]
    producer = Producer(name_servers, group="misused").start()
    try:
        for name, call in [
            ("send", lambda: producer.send("t", b"x")),
            ("send_batch", lambda: producer.send_batch("t", [b"x"])),
            ("send_oneway", lambda: producer.send_oneway("t", b"x")),
        ]:
            message = refused(call)
            assert message.startswith(f"Producer.{name} blocks"), message
            assert f"open_producer() and `await producer.{name}(...)`" in message
    finally:
        await trio.to_thread.run_sync(producer.shutdown)
    consumer = LitePullConsumer(name_servers, "misused", "t")
    consumer_calls: list[tuple[str, Callable[[], object]]] = [
        ("poll", lambda: consumer.poll(0.1)), ("commit", consumer.commit)]
    for name, consumer_call in consumer_calls:
        message = refused(consumer_call)
        assert message.startswith(f"LitePullConsumer.{name} blocks"), message
        assert "open_lite_pull_consumer()" in message
    for face in (consumer, PushConsumer(name_servers, "misused", "t", handler=print)):
        message = refused(face.start)
        assert message.startswith(f"{type(face).__name__}.start (or entering its with block) "
                                  "blocks"), message
