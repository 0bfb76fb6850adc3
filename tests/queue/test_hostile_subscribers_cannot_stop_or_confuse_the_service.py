"""Subscribers that attack the queue service (real sockets, raw frames where the client would
never send them): credits granted beyond the window, a stream id reused at once, floods of
acknowledgements. The service and its other subscribers go on."""

from __future__ import annotations

import trio

from codec import RemotingCommand, ResponseCode
from remoting import ServerConfig, StreamCode, TrioRemotingClient, TrioRemotingServer
from remoting._core._streams._stream_in import control_frame
from remoting._messaging._credits import MAX_CREDITS
from remoting.queue import QueueClient, QueueCode, QueueService, TrioQueueClient
from remoting.queue._requests import subscribe_request
from remoting.queue._sansio._acks import AckOp, pack_acks


async def _queue(nursery: trio.Nursery, service: QueueService
                 ) -> tuple[TrioRemotingServer, str, TrioQueueClient]:
    server = TrioRemotingServer(ServerConfig())
    service.attach(server)
    port = await nursery.start(server.serve)
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    return server, f"127.0.0.1:{port}", QueueClient(client)


def _raw_subscribe(stream_id: int, credits: int, topic: str = "t", channel: str = "c"
                   ) -> RemotingCommand:
    request = subscribe_request(topic, channel)
    request.add_ext_field("streamId", str(stream_id))
    request.add_ext_field("credits", str(credits))
    return request


def _ack(stream_id: int, acks: list[tuple[AckOp, int, int]]) -> RemotingCommand:
    return RemotingCommand.create_request(QueueCode.ACK, header={
        "streamId": str(stream_id), "topic": "t", "channel": "c"}, body=pack_acks(acks))


async def test_credits_granted_past_the_window_then_timeouts_do_not_stop_the_service(
        nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=0.3)
    server, addr, q = await _queue(nursery, service)
    await q.publish_many(addr, "t", [b"x"] * 10)
    async with q.subscribe(addr, "t", "c", credits=MAX_CREDITS) as sub:
        held = [await sub.receive() for _ in range(10)]
        assert all(m is not None for m in held)
        await sub._stream.grant(10)  # a full window again: what timeouts give back overflows
        with trio.fail_after(10):
            redelivered = await sub.receive()  # the service's timer survived the timeouts
        assert redelivered is not None and redelivered.attempts == 2
    assert server.endpoint.running
    assert await q.publish(addr, "t", b"still served") == 10
    assert service.statistics("t").topics["t"].channels["c"].timed_out == 10


async def test_a_stream_id_reused_at_once_is_a_subscription_of_its_own(
        nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=30.0)
    _, addr, q = await _queue(nursery, service)
    await q.publish(addr, "t", b"x")
    caller = q.client.endpoint.caller
    stream_id = 77
    opened = await q.client.invoke_sync(addr, _raw_subscribe(stream_id, 1), 5)
    assert opened.code == ResponseCode.SUCCESS
    for _ in range(20):  # the old subscription's end and the new one's start race
        await caller.ainvoke_oneway(addr, addr, control_frame(StreamCode.CANCEL, stream_id), 5)
        again = await q.client.invoke_sync(addr, _raw_subscribe(stream_id, 1), 5)
        assert again.code == ResponseCode.SUCCESS
        answer = await q.client.invoke_sync(addr, _ack(stream_id, []), 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark  # the new one is known
    assert len(service.broker.consumers) == 1


async def test_a_flood_of_acknowledgements_in_one_request_is_refused_whole(
        nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=30.0)
    _, addr, q = await _queue(nursery, service)
    await q.publish(addr, "t", b"x")
    async with q.subscribe(addr, "t", "c", credits=1) as sub:
        msg = await sub.receive()
        assert msg is not None
        flood = [(AckOp.FINISH, i, 0) for i in range(MAX_CREDITS + 1)]
        answer = await q.client.invoke_sync(addr, _ack(sub._stream.stream_id, flood), 5)
        assert answer.code == ResponseCode.INVALID_PARAMETER
        assert f"at most {MAX_CREDITS} acknowledgements" in (answer.remark or "")
        queue = service.broker.topics["t"].channels["c"].queue
        assert msg.offset in queue.in_flight  # nothing of it was applied
        await msg.ack()
    assert service.statistics("t").topics["t"].channels["c"].finished == 1


async def test_another_connection_cannot_grant_ack_or_cancel_a_subscription(
        nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=30.0)
    _, addr, q = await _queue(nursery, service)
    await q.publish_many(addr, "t", [b"x"] * 10)
    intruder = TrioRemotingClient()
    await nursery.start(intruder.serve)
    caller = intruder.endpoint.caller
    async with q.subscribe(addr, "t", "c", credits=2) as sub:
        held = [await sub.receive() for _ in range(2)]
        stream_id = sub._stream.stream_id  # guessed by the intruder: ids are per connection
        await caller.ainvoke_oneway(addr, addr, control_frame(
            StreamCode.CREDIT, stream_id, MAX_CREDITS - 2), 5)
        forged = await intruder.invoke_sync(addr, _ack(stream_id, [
            (AckOp.FINISH, m.offset, 0) for m in held if m is not None]), 5)
        assert forged.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
        await caller.ainvoke_oneway(addr, addr, control_frame(StreamCode.CANCEL, stream_id), 5)
        await intruder.invoke_sync(addr, _ack(stream_id, []), 5)  # after the frames above
        queue = service.broker.topics["t"].channels["c"].queue
        assert len(queue.in_flight) == 2 and queue.finished == 0  # nothing of it applied
        [consumer] = service.broker.consumers.values()
        assert consumer.stream.credits == 0  # no credit granted by the intruder
        for msg in held:
            assert msg is not None
            await msg.ack()
        assert (await sub.receive()) is not None  # the subscription goes on
    assert service.statistics("t").topics["t"].channels["c"].finished >= 2
