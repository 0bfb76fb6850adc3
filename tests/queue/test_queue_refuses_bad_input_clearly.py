"""Bad input to the queue service (real sockets): each gets a clear error, and loses nothing;
the connection and the service serve on."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from codec import RemotingCommand, ResponseCode
from remoting import RemotingClient, RemotingServer, ServerConfig
from remoting.queue import (
    BlockingQueueClient,
    QueueClient,
    QueueCode,
    QueueError,
    QueueFullError,
    QueueService,
    TrioQueueClient,
)
from remoting.queue._sansio._acks import AckOp, pack_acks


@pytest.mark.parametrize("call", [
    lambda q, addr: q.subscribe(addr, "nowhere", "c"),
    lambda q, addr: q.pull(addr, "nowhere", "g", max_wait=0),
    lambda q, addr: q.commit(addr, "nowhere", "g", 0),
    lambda q, addr: q.offsets(addr, "nowhere"),
], ids=["subscribe", "pull", "commit", "offsets"])
def test_an_unknown_topic_is_refused_with_topic_not_exist(
        queue_server: tuple[QueueService, RemotingServer], q: BlockingQueueClient,
        call: Callable[[BlockingQueueClient, str], object]) -> None:
    _, server = queue_server
    with pytest.raises(QueueError) as caught:
        call(q, server.addr)
    assert caught.value.code == ResponseCode.TOPIC_NOT_EXIST
    assert "does not exist: publish to it, or create it" in str(caught.value)


@pytest.mark.parametrize("name", ["bad name", "", "x" * 129, "caf\u00e9", "a/b", "..", "."])
def test_a_bad_topic_name_is_refused(queue_server: tuple[QueueService, RemotingServer],
                                     q: BlockingQueueClient, name: str) -> None:
    _, server = queue_server
    with pytest.raises(QueueError, match="name is 1-128 of") as caught:
        q.publish(server.addr, name, b"x")
    assert caught.value.code == ResponseCode.INVALID_PARAMETER


@pytest.mark.parametrize("credits", [0, -1, 65_537])
def test_credits_out_of_range_are_refused_before_anything_is_sent(
        queue_server: tuple[QueueService, RemotingServer], q: BlockingQueueClient,
        credits: int) -> None:
    service, server = queue_server
    q.create_topic(server.addr, "t")
    with pytest.raises(ValueError, match="credits must be from 1 to 65536"):
        q.subscribe(server.addr, "t", "c", credits=credits)
    assert not service.broker.consumers


def test_a_raw_subscription_with_zero_credits_is_refused_by_the_service(
        queue_server: tuple[QueueService, RemotingServer], q: BlockingQueueClient) -> None:
    _, server = queue_server
    q.create_topic(server.addr, "t")
    request = RemotingCommand.create_request(QueueCode.SUBSCRIBE, header={
        "topic": "t", "channel": "c", "streamId": "5", "credits": "0"})
    reply = q.client.invoke_sync(server.addr, request)
    assert reply.code == ResponseCode.INVALID_PARAMETER and "credits" in (reply.remark or "")


def test_acks_for_unknown_and_foreign_deliveries_are_refused_and_change_nothing(
        queue_server: tuple[QueueService, RemotingServer], q: BlockingQueueClient) -> None:
    service, server = queue_server
    q.publish_many(server.addr, "t", [b"a", b"b"])
    with q.subscribe(server.addr, "t", "c", credits=1) as holder, \
            q.subscribe(server.addr, "t", "c", credits=1) as other:
        mine = holder.receive(5)
        theirs = other.receive(5)
        assert mine is not None and theirs is not None
        stream_id = other._stream.stream_id
        forged = RemotingCommand.create_request(QueueCode.ACK, header={
            "streamId": str(stream_id), "topic": "t", "channel": "c"},
            body=pack_acks([(AckOp.FINISH, mine.offset, 0), (AckOp.FINISH, 77, 0),
                            (AckOp.TOUCH, 78, 0)]))
        conn = other._stream._conn
        reply = q.client.endpoint.caller.invoke_sync(conn, server.addr, forged, 5)
        assert reply.code == ResponseCode.SUCCESS
        assert reply.ext_fields is not None and reply.ext_fields["refused"] == "3"
        assert len(reply.body or b"") == 3 * 8
        queue = service.broker.topics["t"].channels["c"].queue
        assert queue.in_flight.holder(mine.offset) == service.broker.by_stream[
            (server.channels()[0], holder._stream.stream_id)].id  # still the holder's
        mine.ack()
        theirs.ack()
    channel = service.statistics("t").topics["t"].channels["c"]
    assert (channel.finished, channel.acks_refused) == (2, 3)


def test_an_ack_for_a_subscription_that_is_not_there_is_refused(
        queue_server: tuple[QueueService, RemotingServer], q: BlockingQueueClient) -> None:
    _, server = queue_server
    request = RemotingCommand.create_request(QueueCode.ACK, header={"streamId": "424242"},
                                             body=pack_acks([(AckOp.FINISH, 0, 0)]))
    reply = q.client.invoke_sync(server.addr, request)
    assert reply.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    assert "its deliveries went back to the channel" in (reply.remark or "")


@pytest.mark.parametrize(("code", "fields", "body", "says"), [
    (QueueCode.PUBLISH, {"topic": "t"}, b"\x00\x00\x00\x09\x00", "not well-formed"),
    (QueueCode.PUBLISH, {"topic": "t"}, None, "carries its messages in its body"),
    (QueueCode.PUBLISH, {"topic": "t", "deferMs": "-5"}, b"", "deferMs must be from 0"),
    (QueueCode.PULL, {"topic": "t"}, None, "from a group's offset or from an offset"),
    (QueueCode.PULL, {"topic": "t", "offset": "999"}, None, "past the end"),
    (QueueCode.PULL, {"topic": "t", "offset": "0", "max": "0"}, None, "max must be from 1"),
    (QueueCode.COMMIT, {"topic": "t", "group": "g", "offset": "x"}, None, "must be an int"),
    (QueueCode.ACK, {"streamId": "1"}, b"\x01\x02", "no subscription"),
])
def test_malformed_requests_are_answered_with_the_reason(
        queue_server: tuple[QueueService, RemotingServer], q: BlockingQueueClient,
        code: int, fields: dict[str, str], body: bytes | None, says: str) -> None:
    _, server = queue_server
    q.create_topic(server.addr, "t")
    reply = q.client.invoke_sync(server.addr, RemotingCommand.create_request(
        code, header=fields, body=body))
    assert reply.code != ResponseCode.SUCCESS and says in (reply.remark or ""), reply.remark
    assert q.publish(server.addr, "t", b"still served") == 0


@pytest.fixture
def small_queue() -> Iterator[tuple[RemotingServer, BlockingQueueClient]]:
    service = QueueService(memory_messages=100)
    server = RemotingServer(ServerConfig())
    service.attach(server)
    server.start()
    client = RemotingClient().start()
    try:
        yield server, QueueClient(client)
    finally:
        client.shutdown()
        server.shutdown()


def test_a_publisher_flooding_a_full_queue_is_refused_and_nothing_acknowledged_is_lost(
        small_queue: tuple[RemotingServer, BlockingQueueClient]) -> None:
    server, q = small_queue
    acknowledged: list[int] = []
    refusals: list[QueueFullError] = []
    q.create_topic(server.addr, "t")
    with q.subscribe(server.addr, "t", "c", credits=10) as sub:
        for i in range(150):
            try:
                acknowledged.append(q.publish(server.addr, "t", b"%d" % i))
            except QueueFullError as exc:
                refusals.append(exc)
        assert len(acknowledged) == 100 and len(refusals) == 50
        assert {e.code for e in refusals} == {ResponseCode.SYSTEM_BUSY}
        assert "consume them, or run the service with a data_dir" in str(refusals[0])
        delivered = []
        for _ in range(100):
            msg = sub.receive(5)
            assert msg is not None
            delivered.append(int(msg.body))
            msg.ack()
        sub.flush()
    assert delivered == list(range(100))  # every acknowledged one, none refused
    assert q.publish(server.addr, "t", b"room again") == 100


def test_a_bad_defer_key_or_body_is_refused_before_sending(
        queue_server: tuple[QueueService, RemotingServer], q: BlockingQueueClient) -> None:
    _, server = queue_server
    with pytest.raises(ValueError, match="defer must be a number of seconds >= 0"):
        q.publish(server.addr, "t", b"x", defer=-1)
    with pytest.raises(TypeError, match="a message body must be bytes"):
        q.publish(server.addr, "t", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="header keys and values must be str"):
        q.publish(server.addr, "t", b"x", {"n": 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="at least one body"):
        q.publish_many(server.addr, "t", [])
    with pytest.raises(ValueError, match="max_messages must be an int from 1 to 4096"):
        q.pull(server.addr, "t", "g", max_messages=0)
    with pytest.raises(TypeError, match="QueueClient needs a RemotingClient"):
        QueueClient(object())  # type: ignore[call-overload]


async def test_refusals_of_oneway_acknowledgements_come_back_on_the_stream(
        trio_queue: tuple[QueueService, str, TrioQueueClient]) -> None:
    service, addr, q = trio_queue
    await q.publish_many(addr, "t", [b"a", b"b"])
    async with q.subscribe(addr, "t", "c", credits=1) as sub:
        first = await sub.receive()
        assert first is not None
        forged = RemotingCommand.create_request(QueueCode.ACK, header={
            "streamId": str(sub._stream.stream_id), "topic": "t", "channel": "c"},
            body=pack_acks([(AckOp.FINISH, 1, 0)]))  # delivered to nobody yet
        conn = sub._stream._conn
        await q.client.endpoint.caller.ainvoke_oneway(conn, addr, forged, 5)
        await first.ack()
        second = await sub.receive()  # the notice is read on the way
        assert second is not None and second.offset == 1
        assert sub.refused == 1  # while the subscription is open
        await second.ack()
    assert service.broker.topics["t"].channels["c"].queue.finished == 2
