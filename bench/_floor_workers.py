"""The hand-off floor (bench/floor.py): a raw echo with the hand-offs of our design, no protocol.

A multiplexed connection cannot have the caller read its own answer: one reader task per
connection receives every frame and wakes the caller it belongs to. A blocking caller waits on
a lock that the loop's reader releases. A pool processor runs on a thread; a reply computed
alone leaves from that thread (the server's shortcut, `Dispatcher._run_sync`). These workers
measure exactly those hand-offs around the raw echo's framing, with no header, no id matching
and no processor, so that the distance from our figures to them is what the protocol costs.

Server kind ``raw-pool``: every frame goes to one worker thread (a queue), which sends it back
on the socket itself. Client kind ``raw-handoff``: modes
``latency_reader`` (a trio task waits; a reader task wakes it), ``latency_thread`` (a thread
sends on the socket and waits on a lock; the loop's reader releases it) and ``tasks64`` (64
trio tasks, each sending and waiting to be woken by the reader: bench/rpc.py's "64 tasks x
invoke_sync" without the protocol).
"""

from __future__ import annotations

import os
import queue
import threading
from collections import deque
from typing import Any

import trio
import trio.lowlevel as ll
from _rpc_workers import (
    _HDR,
    WINDOW,
    _AsyncRunner,
    _RawReader,
    _Runner,
    _setup,
    _wait_stop,
    report,
)
from _rpc_workers import client_main as rpc_client_main
from _rpc_workers import server_main as rpc_server_main


def server_main(kind: str, cpu: int | None, conn: Any) -> None:
    """`_rpc_workers.server_main`, plus the kind ``raw-pool``."""
    if kind != "raw-pool":
        rpc_server_main(kind, cpu, conn)
        return
    _setup(cpu)
    trio.run(raw_pool_server, conn)


def client_main(kind: str, addr: str, modes: list[str], params: dict[str, Any],
                cpu: int | None, conn: Any) -> None:
    """`_rpc_workers.client_main`, plus the kind ``raw-handoff``."""
    if kind != "raw-handoff":
        rpc_client_main(kind, addr, modes, params, cpu, conn)
        return
    _setup(cpu)
    report(conn, lambda: trio.run(raw_handoff_client, addr, modes, params))


async def _pool_echo(stream: Any) -> None:
    """Echo each frame through a worker thread, which sends it."""
    sock = stream.socket._sock  # noqa: SLF001 - non-blocking; the thread sends as ours does
    work: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

    def worker() -> None:
        while (frame := work.get()) is not None:
            if sock.send(frame) != len(frame):  # small frames leave in one send
                raise RuntimeError("partial send of a small frame")

    threading.Thread(target=worker, daemon=True).start()
    reader = _RawReader(stream)
    try:
        while True:
            size = await reader.frame_length()
            work.put(_HDR.pack(size - 4, 0) + b"x" * (size - 8))
    except (RuntimeError, trio.BrokenResourceError, trio.ClosedResourceError):
        return
    finally:
        work.put(None)


async def raw_pool_server(conn: Any) -> None:
    from functools import partial

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(trio.serve_listeners, _pool_echo, listeners))
        conn.send(("ready", port, os.getpid()))
        await _wait_stop(conn)
        nursery.cancel_scope.cancel()


async def raw_handoff_client(addr: str, modes: list[str], p: dict[str, Any]) -> dict[str, Any]:
    host, _, port = addr.rpartition(":")
    stream = await trio.open_tcp_stream(host, int(port))
    frame = _HDR.pack(4 + p["body"], 0) + b"x" * p["body"]
    trio_socket: Any = stream.socket
    raw_socket = trio_socket._sock  # the stdlib socket under trio's
    waiter: list[Any] = []  # the trio task waiting for the next answer, if any
    early = [0]  # answers that arrived before their caller parked
    lock = threading.Lock()
    lock.acquire()
    out: dict[str, Any] = {}

    parked: deque[Any] = deque()  # tasks64: the echo keeps the order of the calls

    async def read_loop(mode: str) -> None:
        reader = _RawReader(stream)
        while True:
            if mode == "tasks64":
                for _ in range(await reader.count_frames()):
                    ll.reschedule(parked.popleft())
                continue
            await reader.frame_length()
            if mode == "latency_thread":
                lock.release()
            elif waiter:
                ll.reschedule(waiter.pop())
            else:
                early[0] += 1

    async def call_reader(f: bytes) -> None:
        await stream.send_all(f)
        if early[0]:
            early[0] -= 1
            return
        waiter.append(ll.current_task())
        await ll.wait_task_rescheduled(lambda _: ll.Abort.FAILED)

    def call_thread(f: bytes) -> None:
        raw_socket.sendall(f)  # the blocking face's direct send
        lock.acquire()

    async def tasks64(n: int) -> None:
        remaining = n

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                parked.append(ll.current_task())
                if raw_socket.send(frame) != len(frame):  # as ours: a direct send when idle
                    raise RuntimeError("partial send of a small frame")
                await ll.wait_task_rescheduled(lambda _: ll.Abort.FAILED)

        async with trio.open_nursery() as nursery:
            for _ in range(WINDOW):
                nursery.start_soon(worker)

    async with stream:
        for mode in modes:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_loop, mode)
                if mode == "latency_reader":
                    out[mode] = await _AsyncRunner(p).latency(call_reader, frame)
                elif mode == "tasks64":
                    out[mode] = await _AsyncRunner(p).pipelined(tasks64, p["n_tput"],
                                                                p["warm_tput"])
                elif mode == "latency_thread":
                    out[mode] = await trio.to_thread.run_sync(_Runner(p).latency, call_thread,
                                                              frame)
                else:
                    raise ValueError(f"unknown mode {mode!r} for the hand-off client")
                nursery.cancel_scope.cancel()
    return out
