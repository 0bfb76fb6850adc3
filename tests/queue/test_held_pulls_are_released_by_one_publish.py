"""Long polling at scale (RocketMQ's PullRequestHoldService, real processes): 10,000 pulls
held on an empty topic cost the service no thread and little memory, and one publish
releases them all, in about 40 ms of the service's CPU; pulls held on another topic are
answered empty at their max_wait.

The release is measured in the service's CPU time (its threads' schedstat), which other
processes on a busy machine do not change, not in wall-clock time, which they do (a release
that took 40 ms of CPU was seen to take 320 ms on a loaded machine). The wall-clock figures
are printed; `bench/queue_hostile.py` measures what held pulls cost other connections.
Three rounds are run and the cheapest must hold the bound (a slow release is slow in every
round; a busy machine can add a little CPU to one)."""

from __future__ import annotations

from pathlib import Path

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
    service = QueueProcess()
    rounds: list[tuple[float, float]] = []  # (released after, the service's CPU for it)
    try:
        client = TrioRemotingClient()
        await nursery.start(client.serve)
        q = QueueClient(client)
        await q.create_topic(service.addr, "other")
        threads, rss = service.threads(), service.rss_bytes()
        for round_ in range(ROUNDS):
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
            rounds.append((trio.current_time() - published, _cpu_seconds(service.pid) - cpu))
            assert len(answers) == HELD
            assert all(isinstance(a, RemotingCommand) and a.code == ResponseCode.SUCCESS
                       and a.body for a in answers)
    finally:
        service.stop()
    print("released 10,000 held pulls in " + ", ".join(
        f"{wall * 1000:.1f} ms (the service's CPU: {cpu * 1000:.1f} ms)" for wall, cpu in rounds))
    cpus = [_cpu_seconds_of(round_) for round_ in rounds]
    assert min(cpus) < 0.1, rounds  # CPU time, which other processes do not change


def _cpu_seconds_of(round_: tuple[float, float]) -> float:
    """The service's CPU time for a round's release (not its wall-clock time)."""
    return round_[1]


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
