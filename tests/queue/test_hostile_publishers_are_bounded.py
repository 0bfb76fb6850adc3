"""Publishers that attack the queue service (real sockets, raw requests where the client
would refuse to send them): a batch of millions of tiny messages, floods of topics, channels
and groups. Each is refused early with a clear reason, or bounded (the files a service keeps
open); the service serves on."""

from __future__ import annotations

import os
import resource
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from codec import RemotingCommand, ResponseCode
from remoting import RemotingClient, RemotingServer, ServerConfig
from remoting._messaging._records import MAX_HEADERS, MAX_PUBLISH_HEADERS, pack_entries
from remoting.queue import (
    BlockingQueueClient,
    QueueClient,
    QueueCode,
    QueueError,
    QueueFullError,
    QueueService,
)
from remoting.queue._wire import MAX_PUBLISH

from .conftest import serving
from .service_process import QueueProcess


@pytest.fixture
def roomy() -> Iterator[tuple[QueueService, RemotingServer]]:
    """An in-memory service whose topics hold the largest publish."""
    service = QueueService(memory_messages=MAX_PUBLISH)
    server = RemotingServer(ServerConfig())
    service.attach(server)
    server.start()
    try:
        yield service, server
    finally:
        server.shutdown()


def test_a_publish_of_too_many_messages_is_refused_before_it_is_read(
        roomy: tuple[QueueService, RemotingServer], q: BlockingQueueClient) -> None:
    service, server = roomy
    entries = struct.pack(">IH", 2, 0) * 1_000_000  # a million empty messages: 6 MB
    reply = q.client.invoke_sync(server.addr, RemotingCommand.create_request(
        QueueCode.PUBLISH, header={"topic": "t"}, body=entries), 10)
    assert reply.code == ResponseCode.INVALID_PARAMETER
    assert f"at most {MAX_PUBLISH} messages: split the batch" in (reply.remark or "")
    assert "t" not in service.broker.topics or service.broker.topics["t"].end == 0
    with pytest.raises(ValueError, match=f"at most {MAX_PUBLISH} messages"):
        q.publish_many(server.addr, "t", [b""] * (MAX_PUBLISH + 1))
    assert q.publish_many(server.addr, "t", [b""] * MAX_PUBLISH)[-1] == MAX_PUBLISH - 1


@pytest.fixture
def bounded() -> Iterator[tuple[QueueService, RemotingServer]]:
    """An in-memory service with 3 topics and 2 channels (and groups) a topic at most."""
    with serving(QueueService(max_topics=3, max_channels=2)) as served:
        yield served


def test_a_flood_of_topics_channels_and_groups_stops_at_the_limits(
        bounded: tuple[QueueService, RemotingServer], q: BlockingQueueClient) -> None:
    service, server = bounded
    for name in ("a", "b", "c"):
        q.publish(server.addr, name, b"x")
    with pytest.raises(QueueError, match="the service holds 3 topics, its max_topics") as new:
        q.publish(server.addr, "d", b"x")
    assert new.value.code == ResponseCode.NO_PERMISSION
    with pytest.raises(QueueError, match="max_topics"):
        q.create_topic(server.addr, "e")
    assert q.publish(server.addr, "a", b"y") == 1  # existing topics are served
    for channel in ("c1", "c2"):
        with q.subscribe(server.addr, "a", channel, credits=1) as sub:
            assert sub.receive(5) is not None
    with pytest.raises(QueueError, match="has 2 channels, the service's max_channels"):
        q.subscribe(server.addr, "a", "c3")
    q.commit(server.addr, "a", "g1", 0)
    q.commit(server.addr, "a", "g2", 0)
    with pytest.raises(QueueError, match="has 2 groups") as groups:
        q.commit(server.addr, "a", "g3", 0)
    assert groups.value.code == ResponseCode.NO_PERMISSION
    q.commit(server.addr, "a", "g1", 1)  # an existing group commits on
    assert service.delete_channel("a", "c1") and not service.delete_channel("a", "c1")
    assert service.delete_group("a", "g2") and not service.delete_group("a", "nope")
    with q.subscribe(server.addr, "a", "c3", credits=1) as sub:  # room again
        assert sub.receive(5) is not None
        with pytest.raises(RuntimeError, match="has 1 subscribers"):
            service.delete_channel("a", "c3")
    q.commit(server.addr, "a", "g3", 0)
    assert set(service.statistics(limit=10).topics) == {"a", "b", "c"}
    a = service.statistics("a").topics["a"]
    assert set(a.channels) == {"c2", "c3"} and set(a.groups) == {"g1", "g3"}
    totals = service.statistics()
    assert (totals.topic_count, totals.channel_count, totals.group_count) == (3, 2, 2)


def test_many_topics_do_not_run_the_service_out_of_file_descriptors(tmp_path: Path) -> None:
    service = QueueProcess("--data-dir", str(tmp_path))
    try:
        # a process limit some systems still ship; more topics than it, each with a file
        resource.prlimit(service.pid, resource.RLIMIT_NOFILE, (400, 400))
        with RemotingClient() as client:
            q = QueueClient(client)
            for i in range(600):
                q.publish(service.addr, f"t{i}", b"x")
            with RemotingClient() as another:  # the server still accepts connections
                assert QueueClient(another).publish(service.addr, "t0", b"y") == 1
            assert q.pull(service.addr, "t1", offset=0, max_wait=0)[0].body == b"x"
        open_files = len(os.listdir(f"/proc/{service.pid}/fd"))
        assert open_files < 300, open_files  # at most 256 topics keep a file open
    finally:
        assert "Too many open files" not in service.stop()


def _empty_headers(count: int) -> bytes:
    """A message content of ``count`` headers with empty keys and values, and no body."""
    return struct.pack(">H", count) + b"\x00\x00\x00\x00\x00\x00" * count


def test_a_publish_of_many_headers_is_refused_before_they_are_all_read(
        roomy: tuple[QueueService, RemotingServer], q: BlockingQueueClient) -> None:
    """Headers are checked one by one on the service's loop: 16,384 messages of 160 empty
    headers each (2.6 million, the last one broken) cost 1.3 s of the loop's CPU and stalled
    every connection before it was refused. A message holds at most 64 headers, a publish
    65,536 in all: the check stops at the first message over (its index in the reply)."""
    service, server = roomy
    over_one = pack_entries([_empty_headers(MAX_HEADERS + 1)] * 3)
    reply = q.client.invoke_sync(server.addr, RemotingCommand.create_request(
        QueueCode.PUBLISH, header={"topic": "t"}, body=over_one), 10)
    assert reply.code == ResponseCode.MESSAGE_ILLEGAL
    assert f"entry 0: {MAX_HEADERS + 1} headers, at most {MAX_HEADERS}" in (reply.remark or "")

    # 16,384 messages of 5 headers: 81,920, refused at the message that goes over
    per_message = 5
    over_all = pack_entries([_empty_headers(per_message)] * MAX_PUBLISH)
    reply = q.client.invoke_sync(server.addr, RemotingCommand.create_request(
        QueueCode.PUBLISH, header={"topic": "t"}, body=over_all), 10)
    assert reply.code == ResponseCode.MESSAGE_ILLEGAL
    first_over = MAX_PUBLISH_HEADERS // per_message  # entries 0..first_over-1 fit
    assert (f"entry {first_over}: more than {MAX_PUBLISH_HEADERS} headers in one publish: "
            "split the batch") in (reply.remark or "")
    assert "t" not in service.broker.topics or service.broker.topics["t"].end == 0

    # the client says the same before sending; up to the bounds, a publish is stored
    headers = {f"h{i}": "v" for i in range(MAX_HEADERS + 1)}
    with pytest.raises(ValueError, match=f"at most {MAX_HEADERS} headers"):
        q.publish(server.addr, "t", b"x", headers=headers)
    few = {f"h{i}": "v" for i in range(per_message)}
    with pytest.raises(ValueError, match=f"at most {MAX_PUBLISH_HEADERS} headers in all"):
        q.publish_many(server.addr, "t", [(b"", few)] * MAX_PUBLISH)
    most = {f"h{i}": "v" for i in range(MAX_HEADERS)}
    fits = MAX_PUBLISH_HEADERS // MAX_HEADERS
    assert q.publish_many(server.addr, "t", [(b"", most)] * fits)[-1] == fits - 1
    assert q.publish(server.addr, "t", b"after") == fits  # and the service serves on


def test_deferred_messages_are_bounded_in_all(q: BlockingQueueClient) -> None:
    """Deferred messages cost memory until due (with a data directory too, where nothing
    bounded them): ``max_deferred`` bounds those not yet due across topics; a publish with
    a ``defer`` past it is refused whole, publishes without one go on."""
    with serving(QueueService(max_deferred=5)) as (service, server):
        assert q.publish_many(server.addr, "a", [b"1", b"2", b"3"], defer=3600) == [0, 1, 2]
        with pytest.raises(QueueFullError, match="max_deferred"):
            q.publish_many(server.addr, "b", [b"4", b"5", b"6"], defer=3600)
        assert q.publish_many(server.addr, "b", [b"4", b"5"], defer=3600) == [0, 1]
        with pytest.raises(QueueFullError, match="5 deferred messages not yet due"):
            q.publish(server.addr, "a", b"x", defer=1)
        assert q.publish(server.addr, "a", b"now") == 3
        assert sum(len(t.deferred) for t in service.broker.topics.values()) == 5
