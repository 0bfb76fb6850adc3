"""A publish wakes the pulls held at its offset through the service's waker task, once its
answer is on its way: not through the loop's wake-up socket (`TrioToken.run_sync_soon`: a
system call to write it, one to read it, a pass of the loop), and not at all when no pull is
held on the topic (one that comes later finds the records).

Counted, not timed: the calls to `TrioToken.run_sync_soon` and `Broker.wake_pulls`.
"""

from __future__ import annotations

import pytest
import trio
import trio.lowlevel

from remoting.queue import QueueService
from remoting.queue._broker import Broker

from .counted import counting, serve_trio

PUBLISHES = 20


async def test_publishes_with_no_pull_held_wake_nothing(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    service = QueueService()
    addr, _, q = await serve_trio(nursery, service)
    await q.publish(addr, "t", b"warm")
    hops = counting(monkeypatch, trio.lowlevel.TrioToken, "run_sync_soon")
    wakes = counting(monkeypatch, Broker, "wake_pulls")
    for i in range(PUBLISHES):
        await q.publish(addr, "t", b"%d" % i)
    assert wakes() == 0
    assert hops() == 0  # each publish went through the loop's wake-up socket: 20
    assert [m.body for m in await q.pull(
        addr, "t", max_messages=PUBLISHES, max_wait=0, offset=1)] == [
        b"%d" % i for i in range(PUBLISHES)]


async def test_a_held_pull_is_woken_by_the_waker_task_not_the_wakeup_socket(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    service = QueueService(msg_timeout=30.0)
    addr, _, q = await serve_trio(nursery, service)
    await q.create_topic(addr, "t")
    hops = counting(monkeypatch, trio.lowlevel.TrioToken, "run_sync_soon")
    wakes = counting(monkeypatch, Broker, "wake_pulls")
    for offset in range(PUBLISHES):  # a pull held at the end each time, then a publish
        got: list[bytes] = []

        async def pull(offset: int = offset, got: list[bytes] = got) -> None:
            got.extend(m.body for m in await q.pull(addr, "t", offset=offset, max_wait=30.0))

        async with trio.open_nursery() as pulls:
            pulls.start_soon(pull)
            with trio.fail_after(10):
                while not len(service.broker.holds):  # noqa: ASYNC110 - bounded poll
                    await trio.sleep(0.001)
            await q.publish(addr, "t", b"%d" % offset)
        assert got == [b"%d" % offset]
    assert service.broker.pulls_woken == PUBLISHES
    assert wakes() == PUBLISHES
    assert hops() == 0
