"""Long polling at scale (RocketMQ's PullRequestHoldService, real processes): 10,000 pulls
held on an empty topic cost the service no thread and little memory, and one publish
releases them all, for under 100 ms of the service's CPU time; pulls held on another topic
are answered empty at their max_wait.

The ``slow`` set also times the release from the publish to the last answer read by the
client (this process): within 100 ms on a quiet machine, both processes' work (about 30 ms of
the service's CPU and 40 ms of the client's for 10,000 answers, one frame each). On a machine
other processes keep busy, a round can wait for a CPU well past that: up to three rounds are
timed, and the best must hold the bound (a slow release is slow in every round)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from remoting import RemotingError, TrioRemotingClient
from remoting.queue import QueueClient, TrioQueueClient
from remoting.queue._client import pull_request

from .service_process import QueueProcess

HELD = 10_000
ROUNDS = 3


async def _held(q: TrioQueueClient, addr: str, count: int) -> None:
    """Wait (bounded) until the service holds ``count`` pulls: it is another process, whose
    statistics are polled."""
    with trio.fail_after(60):
        while (await q.statistics(addr)).held_pulls < count:  # noqa: ASYNC110
            await trio.sleep(0.02)


def _cpu_seconds(pid: int) -> float:
    """The CPU time of every thread of ``pid`` so far (from its schedstat, in ns)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


async def test_ten_thousand_held_pulls_are_released_by_one_publish(
        nursery: trio.Nursery) -> None:
    _, cpus = await _release_rounds(nursery, rounds=1)
    assert max(cpus) < 0.1, cpus  # the service's CPU time, which other processes do not change


@pytest.mark.slow
async def test_ten_thousand_held_pulls_are_released_within_100_ms(nursery: trio.Nursery) -> None:
    walls, cpus = await _release_rounds(nursery, rounds=ROUNDS)
    assert min(walls) < 0.1, (walls, cpus)


async def _release_rounds(nursery: trio.Nursery, rounds: int) -> tuple[list[float], list[float]]:
    """Hold `HELD` pulls and release them by one publish, up to ``rounds`` times (until one
    takes under 100 ms); return each round's wall time from the publish to the last answer
    and the service's CPU time for it. Checks what does not depend on time on the way."""
    service = QueueProcess()
    walls: list[float] = []
    cpus: list[float] = []
    try:
        client = TrioRemotingClient()
        await nursery.start(client.serve)
        q = QueueClient(client)
        await q.create_topic(service.addr, "other")
        threads, rss = service.threads(), service.rss_bytes()
        for round_ in range(rounds):
            topic = f"empty{round_}"
            await q.create_topic(service.addr, topic)
            waiting = [pull_request(topic, None, 0, 1, 60.0) for _ in range(HELD)]
            answers: list[RemotingCommand | RemotingError] = []

            async def hold_all(requests: list[RemotingCommand] = waiting,
                               answers: list[RemotingCommand | RemotingError] = answers
                               ) -> None:
                answers.extend(await client.invoke_many(service.addr, requests, 90.0,
                                                        limit=len(requests)))

            async with trio.open_nursery() as pulls:
                pulls.start_soon(hold_all)
                await _held(q, service.addr, HELD)
                if round_ == 0:
                    assert service.threads() == threads  # no thread per held pull
                    grown = service.rss_bytes() - rss
                    assert grown < 64 * 1024 * 1024, f"{grown} bytes for {HELD} held pulls"
                    await _others_answered_empty_at_their_max_wait(client, q, service.addr)
                cpu = _cpu_seconds(service.pid)
                published = trio.current_time()
                await q.publish(service.addr, topic, b"at last")
            walls.append(trio.current_time() - published)
            cpus.append(_cpu_seconds(service.pid) - cpu)
            assert len(answers) == HELD
            assert all(isinstance(a, RemotingCommand) and a.code == ResponseCode.SUCCESS
                       and a.body for a in answers)
            if walls[-1] < 0.1:
                break
    finally:
        service.stop()
    print("released 10,000 held pulls in " + ", ".join(
        f"{wall * 1000:.1f} ms (the service's CPU: {cpu * 1000:.1f} ms)"
        for wall, cpu in zip(walls, cpus, strict=True)))
    return walls, cpus


async def _others_answered_empty_at_their_max_wait(
        client: TrioRemotingClient, q: TrioQueueClient, addr: str) -> None:
    started = trio.current_time()
    empties = await client.invoke_many(addr, [pull_request("other", None, 0, 1, 0.5)
                                              for _ in range(10)], 30.0, limit=10)
    waited = trio.current_time() - started
    # answered empty at their max_wait (a pull still held at the call's 30 s would fail)
    assert all(isinstance(a, RemotingCommand) and a.code == ResponseCode.SUCCESS
               and not a.body for a in empties)
    assert waited >= 0.5  # wall-clock: a lower bound (each was held its max_wait)
    assert (await q.statistics(addr)).held_pulls == HELD  # the others are still held
