"""A read of small frames allocates a small buffer: no ``mmap`` and ``munmap`` per read.

glibc serves allocations of 128 KiB or more (its default ``M_MMAP_THRESHOLD``) with a fresh
``mmap``; a socket read of that size that gets 200 bytes then costs an ``mmap``, an ``mremap``
to shrink it and a ``munmap`` on free, about 12 µs of CPU per read measured
(docs/performance.md). Reads of small frames must stay below that size.
"""

from __future__ import annotations

import tracemalloc

import trio

from remoting import TrioRemotingClient, TrioRemotingServer

from ..factories import req
from .conftest import ASYNC_ECHO, addr_of

GLIBC_MMAP_THRESHOLD = 128 * 1024
CALLS = 30


async def test_sequential_small_calls_never_allocate_an_mmap_sized_buffer(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    addr = addr_of(server)
    for _ in range(5):  # connect and warm up outside the measurement
        await client.invoke_sync(addr, req(ASYNC_ECHO, b"x" * 128), 5)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        with trio.fail_after(10):
            for _ in range(CALLS):
                response = await client.invoke_sync(addr, req(ASYNC_ECHO, b"x" * 128), 5)
                assert response.body == b"x" * 128
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - before < GLIBC_MMAP_THRESHOLD, (
        f"{CALLS} small calls peaked {peak - before} bytes above the start: a read buffer of "
        "mmap size is allocated per read")
