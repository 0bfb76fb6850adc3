"""A queue service served by a trio server in the test's own run, with a trio client."""

from __future__ import annotations

import trio

from remoting import ServerConfig, TrioRemotingClient, TrioRemotingServer
from remoting.queue import QueueClient, QueueService, TrioQueueClient


async def serve_trio(nursery: trio.Nursery, service: QueueService
                     ) -> tuple[str, TrioQueueClient]:
    """Attach ``service`` to a trio server started in ``nursery``; return its address and a
    trio queue client (also started there)."""
    server = TrioRemotingServer(ServerConfig())
    service.attach(server)
    port = await nursery.start(server.serve)
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    return f"127.0.0.1:{port}", QueueClient(client)
