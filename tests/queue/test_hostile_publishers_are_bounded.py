"""Publishers that attack the queue service (real sockets, raw requests where the client
would refuse to send them): a batch of millions of tiny messages, floods of topics. Each is
refused early with a clear reason; the service serves on."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest

from codec import RemotingCommand, ResponseCode
from remoting import RemotingServer, ServerConfig
from remoting.queue import BlockingQueueClient, QueueCode, QueueService
from remoting.queue._wire import MAX_PUBLISH


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
