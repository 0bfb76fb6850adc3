"""Fixtures: a queue service on a real server (blocking or trio-native), and its clients."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import trio

from remoting import (
    RemotingClient,
    RemotingServer,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)
from remoting.queue import BlockingQueueClient, QueueClient, QueueService, TrioQueueClient


@contextmanager
def serving(service: QueueService) -> Iterator[tuple[QueueService, RemotingServer]]:
    """``service`` attached to a started blocking server, shut down on exit."""
    server = RemotingServer(ServerConfig())
    service.attach(server)
    server.start()
    try:
        yield service, server
    finally:
        server.shutdown()


@pytest.fixture
def queue_server() -> Iterator[tuple[QueueService, RemotingServer]]:
    """A blocking server with an in-memory queue service (msg_timeout 30 s)."""
    with serving(QueueService(msg_timeout=30.0)) as served:
        yield served


@pytest.fixture
def q() -> Iterator[BlockingQueueClient]:
    client = RemotingClient().start()
    try:
        yield QueueClient(client)
    finally:
        client.shutdown()


@pytest.fixture
async def trio_queue(nursery: trio.Nursery) -> tuple[QueueService, str, TrioQueueClient]:
    """A trio server with an in-memory queue service, and a trio queue client."""
    service = QueueService(msg_timeout=30.0)
    server = TrioRemotingServer(ServerConfig())
    service.attach(server)
    port = await nursery.start(server.serve)
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    return service, f"127.0.0.1:{port}", QueueClient(client)
