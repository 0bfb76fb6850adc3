"""An executor's read of an offset range, against a real queue service on 127.0.0.1 (no
Spark): the range's messages as Arrow batches of the source's schema, in order, each once;
offsets the service let go fail the read (`MessagesLostError`) or, with
``failOnDataLoss=false``, are skipped and logged; a service that is down is waited for."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from remoting import RemotingClient, RemotingServer, ServerConfig
from remoting.queue import BlockingQueueClient, QueueClient, QueueService
from remoting.spark import MessagesLostError
from remoting.spark._streaming._calls import QueueCalls
from remoting.spark._streaming._options import QueueOptions
from remoting.spark._streaming._reading import arrow_schema, read_range


@pytest.fixture
def q() -> Iterator[BlockingQueueClient]:
    client = RemotingClient().start()
    try:
        yield QueueClient(client)
    finally:
        client.shutdown()


def serve(service: QueueService, port: int = 0) -> RemotingServer:
    server = RemotingServer(ServerConfig(listen_port=port))
    service.attach(server)
    server.start()
    return server


def calls(addr: str, topic: str = "t", reconnect: float = 0.0) -> QueueCalls:
    return QueueCalls(QueueOptions(addresses=(addr,), topic=topic, timeout=2.0,
                                   reconnect_timeout=reconnect))


def test_a_range_comes_back_whole_in_order_as_arrow_of_the_schema(
        q: BlockingQueueClient) -> None:
    server = serve(QueueService(memory_messages=20_000))
    try:
        q.publish_many(server.addr, "t", [b"m%d" % i for i in range(10_000)])
        before = datetime.now(UTC) - timedelta(milliseconds=1)  # stamps are in milliseconds
        q.publish(server.addr, "t", b"with headers", headers={"kind": "x", "v": "1"})
        after = datetime.now(UTC)

        batches = list(read_range(calls(server.addr), 3, 10_001))
    finally:
        server.shutdown()

    assert all(b.schema.equals(arrow_schema()) for b in batches)
    assert len(batches) == 3  # pulls of 4,096 messages at most
    rows = [r for b in batches for r in b.to_pylist()]
    assert [r["offset"] for r in rows] == list(range(3, 10_001))
    assert [r["body"] for r in rows[:2]] == [b"m3", b"m4"]
    assert dict(rows[-1]["headers"]) == {"kind": "x", "v": "1"}
    stamp = rows[-1]["timestamp"]
    assert before <= stamp <= after  # when the service appended it


def test_offsets_let_go_fail_the_read_or_are_skipped_and_logged(
        q: BlockingQueueClient, caplog: pytest.LogCaptureFixture) -> None:
    server = serve(QueueService(memory_messages=10))
    try:
        q.publish_many(server.addr, "t", [b"%d" % i for i in range(10)])
        q.commit(server.addr, "t", "other-reader", 6)
        q.publish_many(server.addr, "t", [b"10", b"11"])  # full: 0-5 are let go
        assert q.offsets(server.addr, "t").earliest == 6

        with pytest.raises(MessagesLostError, match=r"no longer holds offsets 2 to 5") as lost:
            list(read_range(calls(server.addr), 2, 12))
        with caplog.at_level(logging.WARNING, logger="remoting"):
            kept = list(read_range(calls(server.addr), 2, 12, fail_on_data_loss=False))
    finally:
        server.shutdown()

    assert (lost.value.topic, lost.value.first, lost.value.end) == ("t", 2, 6)
    assert [r["offset"] for b in kept for r in b.to_pylist()] == list(range(6, 12))
    assert "queue.messages_lost" in caplog.text


def test_a_topic_gone_with_a_restarted_service_is_messages_lost(
        q: BlockingQueueClient) -> None:
    server = serve(QueueService())
    try:
        q.create_topic(server.addr, "other")
        with pytest.raises(MessagesLostError, match="offsets 0 to 9") as lost:
            list(read_range(calls(server.addr), 0, 10))  # no topic t: it lost everything
    finally:
        server.shutdown()
    assert "does not exist" in str(lost.value.__cause__)


def test_a_read_waits_for_a_service_restarted_on_its_data_directory(
        q: BlockingQueueClient, tmp_path: Path) -> None:
    first = serve(QueueService(data_dir=tmp_path))
    addr, port = first.addr, first.port
    q.publish_many(addr, "t", [b"%d" % i for i in range(100)])
    first.shutdown()
    failing = threading.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "queue.call_retried" in str(record.msg):
                failing.set()

    watch = Watch()
    logging.getLogger("remoting.spark").addHandler(watch)
    got: list[list[int]] = []
    reader = threading.Thread(target=lambda: got.append(
        [r["offset"] for b in read_range(calls(addr, reconnect=30.0), 0, 100)
         for r in b.to_pylist()]))
    try:
        reader.start()
        assert failing.wait(20), "the read never found the service down"
        again = serve(QueueService(data_dir=tmp_path), port)
        try:
            reader.join(30)
        finally:
            again.shutdown()
    finally:
        logging.getLogger("remoting.spark").removeHandler(watch)
    assert not reader.is_alive()
    assert got == [list(range(100))]
