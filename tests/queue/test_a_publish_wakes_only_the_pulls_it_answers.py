"""Held pulls cost a publish only what it answers (real sockets): pulls held behind a deferred
message are not woken by publishes after it (each wake re-read the topic and held the pull
again: every publish stalled the service for as long as all of them took), but by that
message coming due; pulls held at the end are woken by the next publish, once each, and
answered; and the service holds at most ``max_held_pulls`` in all, refusing one more with
POLLING_FULL at once.

Counted, not timed: the calls to `Topic.pull_body` a held pull's wake makes (one per wake).
"""

from __future__ import annotations

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from remoting import RemotingError, TrioRemotingClient
from remoting.queue import QueueError, QueueService
from remoting.queue._requests import pull_request
from remoting.queue._topic import Topic

from .counted import counting, serve_trio

HELD = 300
PUBLISHES = 20


async def _hold(nursery: trio.Nursery, client: TrioRemotingClient, addr: str,
                service: QueueService, offset: int, count: int,
                answers: list[RemotingCommand | RemotingError]) -> None:
    """Hold ``count`` pulls at ``offset`` (waiting, bounded, until the service holds them)."""
    requests = [pull_request("t", None, offset, 10, 30.0) for _ in range(count)]

    async def pull_all() -> None:
        answers.extend(await client.invoke_many(addr, requests, 60.0, limit=count))

    held = len(service.broker.holds)
    nursery.start_soon(pull_all)
    with trio.fail_after(30):
        while len(service.broker.holds) < held + count:  # noqa: ASYNC110 - bounded poll
            await trio.sleep(0.01)


async def test_publishes_after_a_deferred_message_wake_none_of_the_pulls_held_behind_it(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    service = QueueService(msg_timeout=30.0)
    addr, client, q = await serve_trio(nursery, service)
    await q.publish(addr, "t", b"later", defer=1.0)  # offset 0: a pull from 0 waits for it
    behind: list[RemotingCommand | RemotingError] = []
    async with trio.open_nursery() as pulls:
        await _hold(pulls, client, addr, service, 0, HELD, behind)
        reads = counting(monkeypatch, Topic, "pull_body")
        for i in range(PUBLISHES):
            await q.publish(addr, "t", b"now %d" % i)
        await q.statistics(addr)  # answered after every publish's wake-ups ran
        woken_by_publishes = reads()
        # ...and the deferred message coming due answers them all, with it first
    assert woken_by_publishes == 0  # each publish woke all 300 and held them again: 6,000
    assert len(behind) == HELD
    assert all(isinstance(a, RemotingCommand) and a.code == ResponseCode.SUCCESS
               and a.body and a.body.count(b"later") == 1 for a in behind)


async def test_a_publish_wakes_the_pulls_held_at_the_end_once_each(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    service = QueueService(msg_timeout=30.0)
    addr, client, q = await serve_trio(nursery, service)
    await q.publish(addr, "t", b"first")
    answers: list[RemotingCommand | RemotingError] = []
    async with trio.open_nursery() as pulls:
        await _hold(pulls, client, addr, service, 1, HELD, answers)
        reads = counting(monkeypatch, Topic, "pull_body")
        await q.publish(addr, "t", b"second")
    assert reads() == HELD  # one read each (the records are joined once: the pull cache)
    assert service.broker.pulls_woken == HELD and service.broker.pulls_rewaited == 0
    assert all(isinstance(a, RemotingCommand) and a.body and b"second" in a.body
               for a in answers)


async def test_the_service_holds_at_most_max_held_pulls_in_all(
        nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=30.0, max_held_pulls=50)
    addr, client, q = await serve_trio(nursery, service)
    await q.create_topic(addr, "t")
    answers: list[RemotingCommand | RemotingError] = []
    async with trio.open_nursery() as pulls:
        await _hold(pulls, client, addr, service, 0, 50, answers)
        with pytest.raises(QueueError, match="holds 50 pulls already, its max_held_pulls") as full:
            await q.pull(addr, "t", offset=0, max_wait=10)
        assert full.value.code == ResponseCode.POLLING_FULL
        assert await q.pull(addr, "t", offset=0, max_wait=0) == []  # not held: answered
        assert (await q.statistics(addr)).pulls_refused == 1
        await q.publish(addr, "t", b"x")
    assert len(answers) == 50


async def test_a_pull_from_an_offset_let_go_of_waits_at_the_earliest_held(
        nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=30.0)
    addr, _, q = await serve_trio(nursery, service)
    await q.publish_many(addr, "t", [b"a", b"b", b"c"])
    await q.commit(addr, "t", "g", 3)
    service.broker.topics["t"].trim()  # nobody needs 0-2 any more: let go of (this loop's)
    got: list[bytes] = []

    async def pull() -> None:
        got.extend(m.body for m in await q.pull(addr, "t", offset=0, max_wait=30.0))

    async with trio.open_nursery() as pulls:
        pulls.start_soon(pull)
        with trio.fail_after(10):
            while not len(service.broker.holds):  # noqa: ASYNC110 - bounded poll
                await trio.sleep(0.01)
        await q.publish(addr, "t", b"d")  # at 3, where it reads from: it is woken
    assert got == [b"d"]
    assert service.broker.pulls_woken == 1
