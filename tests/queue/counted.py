"""Helpers of the tests that count work instead of timing it: a method's calls, counted; a
queue service on a trio server of the test's own, with a trio client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio

from remoting import ServerConfig, TrioRemotingClient, TrioRemotingServer
from remoting.queue import QueueClient, QueueService, TrioQueueClient


def counting(monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> Callable[[], int]:
    """Count the calls of ``cls.name`` from now on (for the test); return a function that
    reads the count."""
    calls = [0]
    real = getattr(cls, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(cls, name, counted)
    return lambda: calls[0]


async def serve_trio(nursery: trio.Nursery, service: QueueService
                     ) -> tuple[str, TrioRemotingClient, TrioQueueClient]:
    """Serve ``service`` on a trio server in ``nursery``; return its address, and a trio
    client of it (raw, and as a queue client)."""
    server = TrioRemotingServer(ServerConfig())
    service.attach(server)
    port = await nursery.start(server.serve)
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    return f"127.0.0.1:{port}", client, QueueClient(client)
