"""GO_AWAY and subscriptions (real sockets, two queue services): a subscription made with
``addr=None`` (the client's address list) moves to the next address when its server drains
or dies (a real process, SIGKILLed), and goes on with that server's messages; the deliveries
it held from the old server go back to that server's channel, and acknowledging them counts
as refused (never applied to the new server, whose offsets are another log's). A
subscription made to one address ends with `RemotingStreamError` (GO_AWAY): it cannot
move."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio
import trio.testing

from codec import ResponseCode
from remoting import (
    RemotingClient,
    RemotingServer,
    RemotingStreamError,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)
from remoting.queue import QueueClient, QueueService, TrioDelivery, TrioQueueClient

from .service_process import QueueProcess


async def _two_queues(nursery: trio.Nursery
                      ) -> tuple[dict[str, tuple[TrioRemotingServer, QueueService]],
                                 TrioQueueClient]:
    servers = {}
    for _ in range(2):
        service = QueueService(msg_timeout=30.0)
        server = TrioRemotingServer(ServerConfig())
        service.attach(server)
        port = await nursery.start(server.serve)
        servers[f"127.0.0.1:{port}"] = (server, service)
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    q = QueueClient(client)
    for addr in servers:  # each server's messages say where they come from
        await q.publish_many(addr, "t", [b"%s/%d" % (addr.encode(), i) for i in range(10)])
    client.update_name_server_address_list(list(servers))
    return servers, q


async def test_a_trio_subscription_moves_to_the_next_address_and_goes_on(
        nursery: trio.Nursery) -> None:
    servers, q = await _two_queues(nursery)
    async with q.subscribe(None, "t", "c", credits=4) as sub:
        first = await sub.receive()
        assert first is not None
        await first.ack()
        await sub.flush()
        drained = first.body.split(b"/")[0].decode()
        [other] = [addr for addr in servers if addr != drained]
        channel = servers[drained][1].broker.topics["t"].channels["c"].queue
        with trio.fail_after(5):
            while not channel.finished:  # applied before the drain (one after: GO_AWAY)
                await trio.testing.wait_all_tasks_blocked()
        servers[drained][0].drain()
        held: list[TrioDelivery] = []
        moved: list[bytes] = []
        with trio.fail_after(10):
            while len(moved) < 10:
                msg = await sub.receive()
                assert msg is not None
                if msg.body.startswith(drained.encode()):
                    held.append(msg)  # received before the stream's end: not acked yet
                else:
                    moved.append(msg.body)
                    await msg.ack()
        assert moved == [b"%s/%d" % (other.encode(), i) for i in range(10)]
        assert sub.moves == 1 and len(held) <= 4  # at most its credits
        refused = sub.refused
        for msg in held:  # from the drained server: never sent to the other one
            await msg.ack()
        assert sub.refused == refused + len(held)
    drained_channel = servers[drained][1].statistics("t").topics["t"].channels["c"]
    assert (drained_channel.finished, drained_channel.in_flight) == (1, 0)  # held: back
    assert drained_channel.depth == 9
    assert servers[other][1].statistics("t").topics["t"].channels["c"].finished == 10


async def test_a_subscription_to_one_address_ends_with_go_away(
        nursery: trio.Nursery) -> None:
    servers, q = await _two_queues(nursery)
    addr = next(iter(servers))
    async with q.subscribe(addr, "t", "c", credits=2) as sub:
        assert await sub.receive() is not None
        servers[addr][0].drain()

        async def receive_all() -> None:
            while await sub.receive() is not None:
                pass

        with trio.fail_after(10), pytest.raises(RemotingStreamError) as ended:
            await receive_all()
    assert ended.value.code == ResponseCode.GO_AWAY
    assert sub.moves == 0


@pytest.fixture
def blocking_queues() -> Iterator[tuple[dict[str, RemotingServer], RemotingClient]]:
    servers: dict[str, RemotingServer] = {}
    client = RemotingClient().start()
    try:
        for name in ("A", "B"):
            service = QueueService(msg_timeout=30.0)
            server = RemotingServer(ServerConfig())
            service.attach(server)
            server.start()
            servers[server.addr] = server
            QueueClient(client).publish_many(server.addr, "t", [name.encode()] * 5)
        client.update_name_server_address_list(list(servers))
        yield servers, client
    finally:
        client.shutdown()
        for server in servers.values():
            server.shutdown()


def test_a_blocking_subscription_moves_to_the_next_address_and_goes_on(
        blocking_queues: tuple[dict[str, RemotingServer], RemotingClient]) -> None:
    servers, client = blocking_queues
    q = QueueClient(client)
    with q.subscribe(None, "t", "c", credits=2) as sub:
        first = sub.receive(10)
        assert first is not None
        first.ack()
        current = client.current_name_server
        assert current is not None
        servers[current].drain()
        moved = 0
        while moved < 5:  # the other server's five, after what was received before the end
            msg = sub.receive(10)
            assert msg is not None
            moved += msg.body != first.body
            msg.ack()
        assert sub.moves == 1


def test_a_subscription_whose_server_dies_moves_to_the_next_address() -> None:
    processes = [QueueProcess(), QueueProcess()]
    killed: list[QueueProcess] = []
    client = RemotingClient().start()
    try:
        q = QueueClient(client)
        for process in processes:
            q.publish_many(process.addr, "t", [process.addr.encode()] * 5)
        client.update_name_server_address_list([p.addr for p in processes])
        with q.subscribe(None, "t", "c", credits=1) as sub:
            first = sub.receive(10)
            assert first is not None
            [dying] = [p for p in processes if p.addr.encode() == first.body]
            dying.kill()  # SIGKILL: the connection is lost, no GO_AWAY
            killed.append(dying)
            msg = sub.receive(20)
            assert msg is not None and msg.body != first.body
            assert sub.moves == 1
            msg.ack()
            first.ack()  # from the dead server: refused, not applied elsewhere
            assert sub.refused == 1
    finally:
        client.shutdown()
        for process in processes:
            if process not in killed:
                process.stop()
