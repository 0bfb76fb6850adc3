"""Long polling at scale (RocketMQ's PullRequestHoldService, real processes): 10,000 pulls
held on an empty topic cost the service no thread and little memory, and one publish
releases them all within 100 ms; pulls held on another topic are answered empty at their
max_wait."""

from __future__ import annotations

import trio

from codec import ResponseCode
from remoting import TrioRemotingClient
from remoting.queue import QueueClient
from remoting.queue._client import pull_request

from .service_process import QueueProcess

HELD = 10_000


async def _held(q: object, addr: str, count: int) -> None:
    """Wait (bounded) until the service holds ``count`` pulls: it is another process, whose
    statistics are polled."""
    with trio.fail_after(60):
        stats = q.statistics  # type: ignore[attr-defined]
        while (await stats(addr)).held_pulls < count:  # noqa: ASYNC110 - another process
            await trio.sleep(0.02)


async def test_ten_thousand_held_pulls_are_released_by_one_publish(
        nursery: trio.Nursery) -> None:
    service = QueueProcess()
    try:
        client = TrioRemotingClient()
        await nursery.start(client.serve)
        q = QueueClient(client)
        await q.create_topic(service.addr, "empty")
        await q.create_topic(service.addr, "other")
        threads, rss = service.threads(), service.rss_bytes()
        waiting = [pull_request("empty", None, 0, 1, 60.0) for _ in range(HELD)]
        others = [pull_request("other", None, 0, 1, 0.5) for _ in range(10)]
        results: dict[str, object] = {}
        others_done = trio.Event()

        async def send(name: str, requests: list[object], timeout: float) -> None:
            started = trio.current_time()
            results[name] = await client.invoke_many(service.addr, requests,  # type: ignore[arg-type]
                                                     timeout, limit=len(requests))
            results[name + "_seconds"] = trio.current_time() - started
            if name == "others":
                others_done.set()

        async with trio.open_nursery() as pulls:
            pulls.start_soon(send, "waiting", waiting, 90.0)
            await _held(q, service.addr, HELD)
            pulls.start_soon(send, "others", others, 30.0)
            assert service.threads() == threads  # no thread per held pull
            grown = service.rss_bytes() - rss
            assert grown < 64 * 1024 * 1024, f"{grown} bytes for {HELD} held pulls"
            with trio.fail_after(30):
                await others_done.wait()
            assert (await q.statistics(service.addr)).held_pulls == HELD
            published = trio.current_time()
            await q.publish(service.addr, "empty", b"at last")
        released = trio.current_time() - published
    finally:
        service.stop()
    answers = results["waiting"]
    assert isinstance(answers, list) and len(answers) == HELD
    assert all(getattr(a, "code", None) == ResponseCode.SUCCESS and a.body for a in answers)
    print(f"released {HELD} in {released * 1000:.1f} ms; {grown / HELD:.0f} bytes each")
    assert released < 0.1, f"released in {released:.3f}s"
    empties = results["others"]
    assert isinstance(empties, list)
    assert all(getattr(a, "code", None) == ResponseCode.SUCCESS and not a.body for a in empties)
    assert 0.5 <= results["others_seconds"] < 5  # type: ignore[operator]
