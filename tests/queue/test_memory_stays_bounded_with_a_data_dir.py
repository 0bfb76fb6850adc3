"""Bounded memory (NSQ's memory queue overflowing to disk, real processes): messages far
beyond ``memory_messages`` go through a service with a data directory, its resident memory
stays bounded, and a subscriber receives them all in order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from remoting import RemotingClient
from remoting.queue import BlockingQueueClient, QueueClient

from .service_process import QueueProcess

BODY = 1024


@pytest.fixture
def q() -> Iterator[BlockingQueueClient]:
    client = RemotingClient().start()
    try:
        yield QueueClient(client)
    finally:
        client.shutdown()


def run_through(q: BlockingQueueClient, tmp_path: Path, messages: int, memory: int,
                bound: int) -> None:
    service = QueueProcess("--data-dir", str(tmp_path / "queue"), "--memory-messages",
                           str(memory), "--fsync", "never")
    try:
        q.create_topic(service.addr, "bulk")
        baseline = service.rss_bytes()
        with q.subscribe(service.addr, "bulk", "all", credits=256) as sub:
            for first in range(0, messages, 500):
                q.publish_many(service.addr, "bulk", [
                    first.to_bytes(8, "big") + i.to_bytes(4, "big") + bytes(BODY - 12)
                    for i in range(500)])
            expected = 0
            for msg in sub:
                assert msg.offset == expected and len(msg.body) == BODY
                assert int.from_bytes(msg.body[:8], "big") + int.from_bytes(
                    msg.body[8:12], "big") == expected
                msg.ack()
                expected += 1
                if expected == messages:
                    break
        grown = service.rss_bytes(peak=True) - baseline
        stats = q.statistics(service.addr, "bulk").topics["bulk"]
    finally:
        service.stop()
    assert expected == messages
    assert stats.in_memory <= memory and stats.channels["all"].finished == messages
    print(f"{messages} messages: resident memory grew by {grown / 2**20:.1f} MiB")
    assert grown < bound, f"resident memory grew by {grown / 2**20:.0f} MiB"


def test_two_hundred_thousand_messages_through_ten_thousand_in_memory(
        q: BlockingQueueClient, tmp_path: Path) -> None:
    run_through(q, tmp_path, 200_000, memory=10_000, bound=96 * 2**20)
