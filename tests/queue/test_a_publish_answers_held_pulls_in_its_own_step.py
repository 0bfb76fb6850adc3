"""A publish answers the pulls held at its offset in its own step: by the time the publish
is done on the server, no pull is held and each has its answer (no task woken for them, no
pass of the loop, not the loop's wake-up socket: `TrioToken.run_sync_soon` costs a system
call to write it, one to read it and a pass of the loop); and it wakes nothing when no pull
is held on the topic (one that comes later finds the records).

Counted, not timed: the calls to `TrioToken.run_sync_soon` and `Broker.wake_pulls`, and the
pulls still held when `Broker.publish` returns.
"""

from __future__ import annotations

from typing import Any

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


async def test_a_held_pull_is_answered_in_the_publishs_own_step(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    service = QueueService(msg_timeout=30.0)
    addr, _, q = await serve_trio(nursery, service)
    await q.create_topic(addr, "t")
    hops = counting(monkeypatch, trio.lowlevel.TrioToken, "run_sync_soon")
    wakes = counting(monkeypatch, Broker, "wake_pulls")
    still_held: list[int] = []  # pulls held when each publish was done, on the server
    publish = Broker.publish

    async def publish_then_count(self: Broker, *args: Any) -> tuple[int, int, bool]:
        done = await publish(self, *args)
        still_held.append(len(self.holds))
        return done

    monkeypatch.setattr(Broker, "publish", publish_then_count)
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
    assert still_held == [0] * PUBLISHES  # answered before the publish was done
    assert service.broker.holds.answered == PUBLISHES
    assert hops() == 0
