"""Soak: 1,000,000 requests, 256 in flight over 8 connections, to a server in another process.

Eight `TrioRemotingClient` instances (one connection each) send batches with ``invoke_many``
(32 in flight per client) to a server child process (`server_process`), alternating the pool
processor and the event-loop processor. Every request carries a unique id in its body; every id
must come back exactly once, on its own request, with no timeout, orphan or error. Memory must
stay flat: the resident set size of the server and of this process is read from /proc after a
warm-up and at the end. Bounded: fails after `TIME_LIMIT` seconds.

    .venv/bin/python -m pytest tests/faults/test_soak.py -m slow -s
    SOAK_REQUESTS=100000 .venv/bin/python -m pytest tests/faults/test_soak.py -m slow -s
"""

from __future__ import annotations

import gc
import json
import os
import struct
import time

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from remoting import ClientConfig, TrioRemotingClient

from . import server_process
from .support import ServerProcess, vm_rss_kib

REQUESTS = int(os.environ.get("SOAK_REQUESTS", "1000000"))
CLIENTS = 8
IN_FLIGHT = 256  # in all: IN_FLIGHT // CLIENTS per client
BATCH = 4096  # requests per invoke_many call
WARM_UP = 64 * 1024  # requests before the "before" RSS reading
TIME_LIMIT = 600.0  # seconds
RSS_GROWTH_LIMIT_KIB = 16 * 1024  # per process after the warm-up: ~17 bytes per request
_ID = struct.Struct(">Q")


def server_stats(server: ServerProcess) -> dict[str, object]:
    server.command("stats")
    stats: dict[str, object] = json.loads(server.expect("STATS ", 10)[len("STATS "):])
    return stats


class Ids:
    """Hand out ids in batches and count how often each one came back."""

    def __init__(self, total: int) -> None:
        self.next = 0
        self.total = total
        self.returned = bytearray(total)  # saturating counters
        self.wrong = 0  # a response carrying another request's id, or an error

    def take(self, n: int) -> range:
        start = self.next
        self.next = min(self.total, start + n)
        return range(start, self.next)


async def drive(client: TrioRemotingClient, addr: str, ids: Ids, stop_at: int) -> None:
    """Send batches until ``stop_at`` ids were handed out."""
    limit = IN_FLIGHT // CLIENTS
    while ids.next < stop_at:
        batch = ids.take(min(BATCH, stop_at - ids.next))
        requests = [
            RemotingCommand.create_request(
                server_process.ECHO if i & 1 else server_process.ASYNC_ECHO, body=_ID.pack(i))
            for i in batch
        ]
        results = await client.invoke_many(addr, requests, 30.0, limit)
        returned = ids.returned
        for i, result in zip(batch, results, strict=True):
            if (isinstance(result, RemotingCommand) and result.code == ResponseCode.SUCCESS
                    and result.body is not None and len(result.body) == 8):
                got = _ID.unpack(result.body)[0]
                if got < ids.total and returned[got] < 255:
                    returned[got] += 1
                if got != i:
                    ids.wrong += 1
            else:
                ids.wrong += 1


@pytest.mark.slow
async def test_soak_a_million_requests_no_loss_no_duplicates_flat_memory(
    nursery: trio.Nursery,
) -> None:
    server = ServerProcess("--port", "0", "--threads", "4")
    await trio.to_thread.run_sync(server.start)
    try:
        addr = server.addr
        clients = []
        for _ in range(CLIENTS):
            client = TrioRemotingClient(ClientConfig())
            await nursery.start(client.serve)
            clients.append(client)
        ids = Ids(REQUESTS)
        with trio.fail_after(TIME_LIMIT):
            # warm-up: connections, pools, allocator arenas; then the "before" readings
            async with trio.open_nursery() as group:
                for client in clients:
                    group.start_soon(drive, client, addr, ids, min(WARM_UP, REQUESTS))
            gc.collect()
            before = (vm_rss_kib(server.pid), vm_rss_kib(os.getpid()))
            start = time.monotonic()
            async with trio.open_nursery() as group:
                for client in clients:
                    group.start_soon(drive, client, addr, ids, REQUESTS)
            seconds = time.monotonic() - start
            gc.collect()
            after = (vm_rss_kib(server.pid), vm_rss_kib(os.getpid()))
        stats = await trio.to_thread.run_sync(server_stats, server)
        measured = REQUESTS - min(WARM_UP, REQUESTS)
        lost = ids.returned.count(0)
        duplicated = REQUESTS - lost - ids.returned.count(1)
        client_stats = [c.statistics() for c in clients]
        print(
            f"\nsoak: {REQUESTS} requests ({measured} after a {WARM_UP} warm-up) in "
            f"{seconds:.1f} s = {measured / seconds:,.0f} req/s; {IN_FLIGHT} in flight over "
            f"{CLIENTS} connections; lost {lost}, duplicated {duplicated}, wrong {ids.wrong}\n"
            f"RSS server {before[0] / 1024:.1f} -> {after[0] / 1024:.1f} MiB, "
            f"client {before[1] / 1024:.1f} -> {after[1] / 1024:.1f} MiB\n"
            f"server: {stats}"
        )
        assert (lost, duplicated, ids.wrong) == (0, 0, 0)
        received = stats["requests_received"]
        assert isinstance(received, dict)
        assert sum(received.values()) == REQUESTS
        assert stats["connections"] == CLIENTS and stats["connections_opened"] == CLIENTS
        assert stats["processing"] == 0 and stats["error_replies"] == {}
        for cs in client_stats:
            assert (cs.in_flight, cs.timeouts, cs.orphaned_responses) == (0, 0, 0)
            assert cs.connections_opened == 1
        assert after[0] - before[0] < RSS_GROWTH_LIMIT_KIB, "server memory grew"
        assert after[1] - before[1] < RSS_GROWTH_LIMIT_KIB, "client memory grew"
    finally:
        await trio.to_thread.run_sync(server.stop)
