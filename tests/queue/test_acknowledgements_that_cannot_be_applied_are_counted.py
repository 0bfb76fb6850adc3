"""Acknowledgements that cannot be applied are counted and said (real sockets, both faces): made
after the subscription's server drained (its stream ended with GO_AWAY, its deliveries went
back to the channel), or once its connection is gone, they count in ``refused``, are logged
as ``queue.ack_refused``, and their messages are delivered again; the service did nothing
with them. (They were dropped without a word: ``acked`` said 20, ``refused`` 0.) An
acknowledgement after close of a message acknowledged already says so, not that it went back
to the channel."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio

from codec import ResponseCode
from remoting import (
    RemotingClient,
    RemotingServer,
    RemotingStreamError,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)
from remoting.queue import QueueClient, QueueError, QueueService

from ..logs import capture_logs

COUNT = 20


@pytest.fixture
def served() -> Iterator[tuple[QueueService, RemotingServer, RemotingClient]]:
    """A queue service on a blocking server, and a blocking client."""
    service = QueueService(msg_timeout=30.0)
    server = RemotingServer(ServerConfig())
    service.attach(server)
    server.start()
    try:
        with RemotingClient() as client:
            yield service, server, client
    finally:
        server.shutdown()


def test_blocking_acknowledgements_after_a_drain_are_counted_refused(
        served: tuple[QueueService, RemotingServer, RemotingClient]) -> None:
    service, server, client = served
    q = QueueClient(client)
    q.publish_many(server.addr, "t", [b"%d" % i for i in range(COUNT)])
    with capture_logs() as events, q.subscribe(server.addr, "t", "c", credits=COUNT) as sub:
        held = [sub.receive(10) for _ in range(COUNT)]
        server.drain()
        with pytest.raises(RemotingStreamError) as ended:
            sub.receive(10)
        assert ended.value.code == ResponseCode.GO_AWAY
        for msg in held:
            assert msg is not None
            msg.ack()
        sub.flush()
    assert (sub.acked, sub.refused) == (COUNT, COUNT)  # was (20, 0)
    assert any(e["event"] == "queue.ack_refused" and e["log_level"] == "warning"
               for e in events)
    channel = service.statistics("t").topics["t"].channels["c"]
    assert (channel.finished, channel.in_flight, channel.depth) == (0, 0, COUNT)


async def test_trio_acknowledgements_after_a_drain_are_counted_refused(
        nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=30.0)
    server = TrioRemotingServer(ServerConfig())
    service.attach(server)
    port = await nursery.start(server.serve)
    addr = f"127.0.0.1:{port}"
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    q = QueueClient(client)
    await q.publish_many(addr, "t", [b"%d" % i for i in range(COUNT)])
    async with q.subscribe(addr, "t", "c", credits=COUNT) as sub:
        held = [await sub.receive() for _ in range(COUNT)]
        server.drain()
        with trio.fail_after(10), pytest.raises(RemotingStreamError):
            await sub.receive()
        for msg in held:
            assert msg is not None
            await msg.ack()
        await sub.flush()
    assert (sub.acked, sub.refused) == (COUNT, COUNT)
    channel = service.statistics("t").topics["t"].channels["c"]
    assert (channel.finished, channel.depth) == (0, COUNT)


def test_an_answer_that_is_not_success_counts_its_acknowledgements(
        served: tuple[QueueService, RemotingServer, RemotingClient]) -> None:
    service, server, client = served
    q = QueueClient(client)
    q.publish_many(server.addr, "t", [b"a", b"b", b"c"])
    with q.subscribe(server.addr, "t", "c", credits=3) as sub:
        held = [sub.receive(10) for _ in range(3)]
        # the service forgets the subscription (as when its stream ended on its side
        # first): its ACK is answered SUBSCRIPTION_NOT_EXIST
        service.broker.by_stream.clear()
        for msg in held:
            assert msg is not None
            msg.ack()
        sub.flush()
        if sub._acks.sent:  # else its answer came in during that flush, and was read
            sub._acks.sent[-1][0].result(10)  # its answer is in
        sub.flush()  # ...and read
        assert sub.refused == 3


def test_an_acknowledgement_after_close_of_one_made_already_says_so(
        served: tuple[QueueService, RemotingServer, RemotingClient]) -> None:
    _, server, client = served
    q = QueueClient(client)
    q.publish_many(server.addr, "t", [b"a", b"b"])
    with q.subscribe(server.addr, "t", "c", credits=2) as sub:
        done, kept = sub.receive(10), sub.receive(10)
        assert done is not None and kept is not None
        done.ack()
    with pytest.raises(QueueError, match="t@0 was finished or requeued already") as said:
        done.ack()
    assert "went back to the channel" not in str(said.value)
    with pytest.raises(QueueError, match="t@1 went back to the channel"):
        kept.ack()
