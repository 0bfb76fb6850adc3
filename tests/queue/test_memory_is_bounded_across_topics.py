"""The messages a service holds in memory are bounded across its topics (real sockets):
without a data directory, a publish past ``total_memory_bytes`` is refused with
`QueueFullError` saying so, whatever topic it is for, and nothing of it is kept; with a data
directory every publish is taken, and the caches of the topics written least recently give
memory back (their messages are read from their segments). Each topic's own bound
(``memory_bytes``) let 1,024 topics hold 256 MiB each."""

from __future__ import annotations

from pathlib import Path

import pytest

from codec import ResponseCode
from remoting import RemotingServer, ServerConfig
from remoting.queue import BlockingQueueClient, QueueFullError, QueueService

BODY = b"x" * 100_000
TOTAL = 1_000_000


def _serve(service: QueueService) -> RemotingServer:
    server = RemotingServer(ServerConfig())
    service.attach(server)
    return server.start()


def test_without_a_data_dir_a_publish_past_the_service_total_is_refused(
        q: BlockingQueueClient) -> None:
    service = QueueService(total_memory_bytes=TOTAL)
    server = _serve(service)
    try:
        taken = 0
        for i in range(9):  # one message to each topic: each fits its own bound many times
            q.publish(server.addr, f"t{i}", BODY)
            taken += 1
        with pytest.raises(QueueFullError, match="its total_memory_bytes is 1000000") as full:
            q.publish(server.addr, "t9", BODY)
        assert full.value.code == ResponseCode.SYSTEM_BUSY
        assert taken == 9  # 9 x 100 KB (and their records' heads) fit in 1 MB, not 10
        stats = q.statistics(server.addr)
        assert stats.memory_bytes <= TOTAL and stats.total_memory_bytes == TOTAL
        assert sum(q.offsets(server.addr, f"t{i}").end for i in range(10)) == taken
        # consumed (a group reads past them), they make room again
        for i in range(9):
            q.commit(server.addr, f"t{i}", "g", 1)
        q.publish(server.addr, "t9", BODY)  # the full topic trims what nobody needs first
    finally:
        server.shutdown()


def test_with_a_data_dir_the_least_recently_written_caches_give_memory_back(
        tmp_path: Path, q: BlockingQueueClient) -> None:
    service = QueueService(tmp_path, total_memory_bytes=TOTAL)
    server = _serve(service)
    try:
        for i in range(40):  # 4 MB in all, five messages to each topic in turn
            q.publish(server.addr, f"t{i // 5}", BODY)
        stats = q.statistics(server.addr)
        assert stats.memory_bytes <= TOTAL
        newest = q.statistics(server.addr, "t7").topics["t7"]
        oldest = q.statistics(server.addr, "t0").topics["t0"]
        assert newest.in_memory == 5 and oldest.in_memory == 0  # written longest ago
        for i in range(8):  # every message is served, from memory or from its segment
            assert [m.body for m in q.pull(server.addr, f"t{i}", offset=0,
                                           max_messages=10, max_wait=0)] == [BODY] * 5
    finally:
        server.shutdown()


def test_idempotence_keys_count_in_the_total_and_the_oldest_go_early(
        tmp_path: Path, q: BlockingQueueClient) -> None:
    service = QueueService(tmp_path, total_memory_bytes=TOTAL)
    server = _serve(service)
    try:
        for i in range(2_000):  # 2,000 keys of 1 KiB on 40 topics: about 2.4 MB of keys
            q.publish(server.addr, f"k{i % 40}", b"m", key=f"{i:04d}" + "k" * 1_020)
        stats = q.statistics(server.addr)
        assert stats.memory_bytes <= TOTAL + 1_300  # within one key of the total
        remembered = sum(len(t.keys) for t in service.broker.topics.values())
        assert 0 < remembered < 2_000  # the oldest went early...
        assert q.publish(server.addr, "k39", b"m", key="1999" + "k" * 1_020) == 49  # ...not these
        assert q.offsets(server.addr, "k39").end == 50
    finally:
        server.shutdown()
