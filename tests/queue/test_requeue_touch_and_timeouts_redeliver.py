"""Acknowledged delivery over real sockets (NSQ's REQ, TOUCH and in-flight timeout): a
requeued message comes back after its delay, a touched one keeps its consumer, one not
acknowledged in time is redelivered with one more attempt (and the late acknowledgement is
refused), and max_attempts hands a message to the dead-letter hook."""

from __future__ import annotations

import trio

from remoting.queue import Message, QueueService

from .trio_served import serve_trio


async def test_a_requeued_message_comes_back_after_its_delay(nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=30.0)
    addr, q = await serve_trio(nursery, service)
    await q.publish(addr, "t", b"retry me")
    async with q.subscribe(addr, "t", "c") as sub:
        first = await sub.receive()
        assert first is not None and first.attempts == 1
        requeued_at = trio.current_time()
        await first.requeue(delay=0.4)
        again = await sub.receive()
        waited = trio.current_time() - requeued_at
    assert again is not None and (again.offset, again.attempts) == (0, 2)
    assert waited >= 0.4  # wall-clock: a lower bound (the requeue's delay was kept)
    assert service.broker.topics["t"].channels["c"].queue.requeued == 1


async def test_a_delivery_not_acked_in_time_is_redelivered_with_one_more_attempt(
        nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=0.4)
    addr, q = await serve_trio(nursery, service)
    await q.publish(addr, "t", b"slow")
    subscribed_at = trio.current_time()  # before the service delivers it and starts its timer
    async with q.subscribe(addr, "t", "c", credits=1) as sub:
        msg = await sub.receive()
        assert msg is not None and msg.attempts == 1
        with trio.fail_after(10):
            redelivered = await sub.receive()  # its credit came back with the timeout
        assert redelivered is not None and (redelivered.offset, redelivered.attempts) == (0, 2)
        assert trio.current_time() - subscribed_at >= 0.4  # wall-clock: a lower bound
        await redelivered.ack()
        await msg.ack()  # by message, not by delivery: this one is refused, it is finished
    assert sub.refused == 1  # closing waited for the acknowledgements' answers
    channel = (await q.statistics(addr, "t")).topics["t"].channels["c"]
    assert (channel.timed_out, channel.acks_refused, channel.finished) == (1, 1, 1)


async def test_touch_gives_a_delivery_a_full_timeout_again(nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=0.6)
    addr, q = await serve_trio(nursery, service)
    await q.publish(addr, "t", b"long job")
    async with q.subscribe(addr, "t", "c") as sub:
        msg = await sub.receive()
        assert msg is not None
        for _ in range(4):  # 4 x 0.3 s: twice the timeout, touched each time
            await trio.sleep(0.3)
            await msg.touch()
        await msg.ack()
        await sub.flush()
    queue = service.broker.topics["t"].channels["c"].queue
    assert (queue.timed_out, queue.finished) == (0, 1)


async def test_max_attempts_hands_the_message_to_the_dead_letter_hook(
        nursery: trio.Nursery) -> None:
    dead: list[tuple[str, Message]] = []
    service = QueueService(msg_timeout=30.0, max_attempts=2,
                           dead_letter=lambda channel, message: dead.append((channel, message)))
    addr, q = await serve_trio(nursery, service)
    await q.publish(addr, "t", b"poison", {"id": "7"})
    async with q.subscribe(addr, "t", "c") as sub:
        for attempt in (1, 2):
            msg = await sub.receive()
            assert msg is not None and msg.attempts == attempt
            await msg.requeue()
    [(channel, message)] = dead  # closing waited for the requeues' answers
    assert (channel, message.body, message.headers, message.attempts) == (
        "c", b"poison", {"id": "7"}, 2)
    assert service.broker.topics["t"].channels["c"].queue.dead_lettered == 1
