"""A service restarted on its data directory (real processes): every publish it acknowledged
before being SIGKILLed is there, in order; idempotence keys still de-duplicate; after a clean
stop, group offsets and channel positions are back too; a corrupt segment is named and set
aside, and everything else is served."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from remoting import RemotingClient
from remoting.queue import BlockingQueueClient, QueueClient

from .service_process import QueueProcess


@pytest.fixture
def q() -> Iterator[BlockingQueueClient]:
    client = RemotingClient().start()
    try:
        yield QueueClient(client)
    finally:
        client.shutdown()


def read_all(q: BlockingQueueClient, addr: str, topic: str) -> list[bytes]:
    got: list[bytes] = []
    offset = 0
    while True:
        batch = q.pull(addr, topic, offset=offset, max_messages=4096, max_wait=0)
        if not batch:
            return got
        got += [m.body for m in batch]
        offset = batch[-1].offset + 1


def test_a_killed_service_restarts_with_every_acknowledged_message(
        tmp_path: Path, q: BlockingQueueClient) -> None:
    data = tmp_path / "queue"
    service = QueueProcess("--data-dir", str(data), "--segment-bytes", "65536")
    try:
        published: list[bytes] = []
        for batch in range(20):
            bodies = [b"%05d-" % (batch * 250 + i) + bytes(100) for i in range(250)]
            q.publish_many(service.addr, "events", bodies, key=f"batch-{batch}")
            published += bodies
        q.publish(service.addr, "other", b"elsewhere")
    finally:
        service.kill()  # no shutdown: only what the kernel has survives
    again = QueueProcess("--data-dir", str(data), "--segment-bytes", "65536")
    try:
        assert read_all(q, again.addr, "events") == published
        assert read_all(q, again.addr, "other") == [b"elsewhere"]
        repeat = q.publish_many(again.addr, "events", [b"dup"], key="batch-7")
        assert repeat == list(range(7 * 250, 8 * 250))  # the key is remembered: no append
        assert q.offsets(again.addr, "events").end == 5000
        assert q.publish(again.addr, "events", b"new") == 5000
    finally:
        again.stop()


def test_a_cleanly_stopped_service_keeps_its_offsets_and_channel_positions(
        tmp_path: Path, q: BlockingQueueClient) -> None:
    data = tmp_path / "queue"
    service = QueueProcess("--data-dir", str(data))
    try:
        q.publish_many(service.addr, "t", [b"%d" % i for i in range(10)])
        q.commit(service.addr, "t", "readers", 6)
        with q.subscribe(service.addr, "t", "workers", credits=4) as sub:
            for _ in range(4):
                msg = sub.receive(10)
                assert msg is not None
                msg.ack()
    finally:
        service.stop()
    again = QueueProcess("--data-dir", str(data))
    try:
        assert q.offsets(again.addr, "t").groups == {"readers": 6}
        assert [m.offset for m in q.pull(again.addr, "t", "readers", max_wait=0)] == [
            6, 7, 8, 9]
        with q.subscribe(again.addr, "t", "workers", credits=10) as sub:
            first = sub.receive(10)
        assert first is not None and first.offset == 4  # where the channel had got to
    finally:
        again.stop()


def test_a_corrupt_segment_is_named_at_start_and_the_rest_is_served(
        tmp_path: Path, q: BlockingQueueClient) -> None:
    data = tmp_path / "queue"
    service = QueueProcess("--data-dir", str(data), "--segment-bytes", "8192")
    try:
        for first in range(0, 300, 30):  # a publish is one write: ten make several segments
            q.publish_many(service.addr, "damaged",
                           [b"%04d" % i + bytes(200) for i in range(first, first + 30)])
        q.publish_many(service.addr, "intact", [b"%04d" % i for i in range(300)])
    finally:
        service.stop()
    victim = sorted((data / "topics" / "damaged").glob("*.log"))[3]
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    victim.write_bytes(bytes(raw))
    again = QueueProcess("--data-dir", str(data), "--segment-bytes", "8192")
    try:
        kept = [int(body[:4]) for body in read_all(q, again.addr, "damaged")]
        assert read_all(q, again.addr, "intact") == [b"%04d" % i for i in range(300)]
        stats = q.statistics(again.addr)
        assert len(stats.problems) == 1 and str(victim) in stats.problems[0]
    finally:
        stderr = again.stop()
    assert str(victim) in stderr and "corrupt" in stderr
    assert kept == sorted(kept) and kept[0] == 0 and kept[-1] == 299
    assert 250 < len(kept) < 300  # only the damaged segment's tail was set aside
    assert list(victim.parent.glob(victim.name + ".corrupt-*"))
