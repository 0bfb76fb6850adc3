"""A disk that fills under a queue service with a data directory (a real ``remoting queue``
process whose file size limit, ``RLIMIT_FSIZE``, is lowered and raised again from outside, as
a disk that fills and gets room again): publishes are refused with SERVICE_NOT_AVAILABLE and
nothing of them is kept, the background work (offsets, fsync) fails, is reported and goes on,
and once there is room again every acknowledged message is served and survives a restart."""

from __future__ import annotations

import resource
from pathlib import Path

import trio

from codec import ResponseCode
from remoting import TrioRemotingClient
from remoting.queue import QueueClient, QueueError, QueueService, TrioQueueClient

from .service_process import QueueProcess

BODY = b"x" * 1000


def _limit(pid: int, size: int) -> None:
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))


async def _problems(q: TrioQueueClient, addr: str, says: str) -> list[str]:
    """Wait (bounded) until the service reports a problem saying ``says``: another process,
    whose statistics are polled."""
    with trio.fail_after(20):
        while True:
            problems = (await q.statistics(addr)).problems
            if any(says in p for p in problems):
                return problems
            await trio.sleep(0.05)


async def test_a_full_disk_refuses_publishes_and_loses_nothing_acknowledged(
        nursery: trio.Nursery, tmp_path: Path) -> None:
    service = QueueProcess("--data-dir", str(tmp_path), "--segment-bytes", "10000000")
    acknowledged: list[bytes] = []
    refused: list[QueueError] = []
    try:
        client = TrioRemotingClient()
        await nursery.start(client.serve)
        q = QueueClient(client)
        _limit(service.pid, 150_000)  # about 145 records fit in the segment
        for i in range(200):
            body = b"%05d" % i + BODY
            try:
                await q.publish(service.addr, "t", body)
            except QueueError as exc:
                refused.append(exc)
            else:
                acknowledged.append(body)
        assert 100 < len(acknowledged) < 200 and len(refused) == 200 - len(acknowledged)
        assert {e.code for e in refused} == {ResponseCode.SERVICE_NOT_AVAILABLE}
        assert "nothing of this publish was kept; retry once its disk has room" in str(
            refused[0])
        await q.commit(service.addr, "t", "g", 3)
        _limit(service.pid, 10)  # even offsets.json cannot be written now
        problems = await _problems(q, service.addr, "save_offsets of topic 't' failed")
        assert any("File too large" in p for p in problems)
        assert (await q.offsets(service.addr, "t")).end == len(acknowledged)  # serving on
        _limit(service.pid, resource.RLIM_INFINITY)  # room again
        for i in range(200, 250):
            body = b"%05d" % i + BODY
            await q.publish(service.addr, "t", body)
            acknowledged.append(body)
        served = await q.pull(service.addr, "t", offset=0, max_messages=4096, max_wait=0)
        assert [m.body for m in served] == acknowledged
        assert [m.offset for m in served] == list(range(len(acknowledged)))
    finally:
        stderr = service.stop()
    assert "queue.disk_failed" in stderr and "queue.disk_recovered" in stderr
    restarted = QueueService(tmp_path)
    try:
        assert restarted.problems == []  # no bytes of a refused publish were left behind
        store = restarted.broker.topics["t"].store
        assert store.end == len(acknowledged)
        assert restarted.broker.topics["t"].groups == {"g": 3}
    finally:
        restarted.broker.close()
