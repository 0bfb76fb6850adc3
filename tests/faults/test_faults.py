"""Faults at the ends of a connection: the server process dies, drops a connection, a peer
stops reading, processors raise, hang or return garbage, a write fails with oneways in it.
All on 127.0.0.1, real sockets. The garbage-processor and oneway-permit tests are regression
tests for bugs these fault tests found (see the commit that fixed them).

"Fast" below means without waiting for the calls' timeouts (in-flight calls have 30 s): the
kind of error says so (a timeout would raise `RemotingTimeoutError`), and the waits for it are
bounded by `FAST`, a third of the timeout, to catch a hang, not to time the failure (a loaded
machine may take seconds).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from functools import partial

import pytest
import trio
import trio.lowlevel
import trio.testing

from codec import RemotingCommand, ResponseCode, SerializeType, encode_frame
from processors import AsyncEchoProcessor, AsyncRequestProcessor, RequestContext, RequestProcessor
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)

from ..factories import req
from . import server_process
from .support import ServerProcess

FAST = 10.0  # seconds: the bound of a wait for a failure that must not wait 30 s
LONG = 30.0

ECHO = 1
ASYNC_ECHO = 2
GATED_ASYNC = 6
DROP = 7
RAISES = 8
ASYNC_RAISES = 9
HANGS = 10
ASYNC_HANGS = 11
FLOOD = 12


class Gate(RequestProcessor):
    """Blocks each call on a threading.Event (a real stall on a pool thread)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.entered = threading.Semaphore(0)

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.entered.release()
        self.event.wait(LONG)
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


class AsyncGate(AsyncRequestProcessor):
    def __init__(self) -> None:
        self.event = trio.Event()
        self.entered = 0

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        self.entered += 1
        await self.event.wait()
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


async def start_server(nursery: trio.Nursery, **cfg: object) -> TrioRemotingServer:
    server = TrioRemotingServer(ServerConfig(**cfg))  # type: ignore[arg-type]
    server.register_processor(ECHO, AsyncEchoProcessor())
    await nursery.start(server.serve)
    return server


async def start_client(nursery: trio.Nursery, **cfg: object) -> TrioRemotingClient:
    client = TrioRemotingClient(ClientConfig(**cfg))  # type: ignore[arg-type]
    await nursery.start(client.serve)
    return client


async def wait_until(predicate: object, timeout: float = 10.0) -> None:
    """Poll a condition at each point where every task is blocked (bounded)."""
    with trio.fail_after(timeout):
        while not predicate():  # type: ignore[operator]
            await trio.testing.wait_all_tasks_blocked()


# --------------------------------------------------------------------------- server process


async def test_killed_server_process_fails_in_flight_calls_fast_and_a_restart_serves_again(
    nursery: trio.Nursery,
) -> None:
    first = ServerProcess("--port", "0")
    restarted: ServerProcess | None = None
    blocking = RemotingClient(ClientConfig()).start()
    try:
        port = await trio.to_thread.run_sync(first.start)
        addr = first.addr
        client = await start_client(nursery)
        assert (await client.invoke_sync(addr, req(server_process.ECHO, b"up"), 5)).body == b"up"

        # requests in flight: 6 + 6 parked in the server's processor, plus echo traffic
        trio_futures = [await client.invoke_async(addr, req(server_process.HANG, b"t%d" % i),
                                                  LONG) for i in range(6)]
        blocking_futures = [blocking.invoke_async(addr, req(server_process.HANG, b"b%d" % i),
                                                  LONG) for i in range(6)]
        for _ in range(12):
            await trio.to_thread.run_sync(first.expect, "ENTERED", 10.0)
        traffic_errors: list[BaseException] = []
        killed = trio.Event()

        async def traffic() -> None:
            while True:
                try:
                    await client.invoke_async(addr, req(server_process.ECHO), LONG)
                    await client.invoke_sync(addr, req(server_process.ASYNC_ECHO), LONG)
                except RemotingError as exc:
                    if killed.is_set():
                        traffic_errors.append(exc)
                        return
                    raise

        nursery.start_soon(traffic)
        await trio.lowlevel.checkpoint()  # let the traffic start; it loops until the kill
        killed.set()
        await trio.to_thread.run_sync(first.kill)

        with trio.fail_after(FAST):
            for fut in trio_futures:
                with pytest.raises(RemotingSendRequestError):
                    await fut.wait()
        for fut in blocking_futures:
            with pytest.raises(RemotingSendRequestError):
                await trio.to_thread.run_sync(partial(fut.result, FAST))
        await wait_until(lambda: bool(traffic_errors), FAST)
        [error] = traffic_errors
        assert isinstance(error, RemotingSendRequestError | RemotingConnectError), error
        assert client.statistics().in_flight == 0
        assert blocking.statistics().in_flight == 0

        # a call while the server is down is refused at once, not after its timeout
        with trio.fail_after(FAST), pytest.raises(RemotingConnectError):
            await client.invoke_sync(addr, req(server_process.ECHO), LONG)

        restarted = ServerProcess("--port", str(port))
        assert await trio.to_thread.run_sync(restarted.start) == port
        opened = (client.statistics().connections_opened,
                  blocking.statistics().connections_opened)
        ok = await client.invoke_sync(addr, req(server_process.ECHO, b"again"), 5)
        assert (ok.code, ok.body) == (ResponseCode.SUCCESS, b"again")
        ok = await trio.to_thread.run_sync(
            blocking.invoke_sync, addr, req(server_process.ECHO, b"again"), 5.0)
        assert (ok.code, ok.body) == (ResponseCode.SUCCESS, b"again")
        assert client.statistics().connections_opened == opened[0] + 1
        assert blocking.statistics().connections_opened == opened[1] + 1
    finally:
        await trio.to_thread.run_sync(blocking.shutdown)
        await trio.to_thread.run_sync(first.kill)
        if restarted is not None:
            await trio.to_thread.run_sync(restarted.stop)


# --------------------------------------------------------------------------- dropped connection


class DropConnection(RequestProcessor):
    """Close the caller's connection instead of answering."""

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> None:
        ctx.channel.close()


async def test_server_closing_the_channel_fails_pending_calls_fast(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery)
    gate = AsyncGate()
    server.register_processor(GATED_ASYNC, gate)
    server.register_processor(DROP, DropConnection())
    addr = f"127.0.0.1:{server.port}"
    client = await start_client(nursery)
    blocking = RemotingClient(ClientConfig()).start()
    try:
        pending = [await client.invoke_async(addr, req(GATED_ASYNC), LONG) for _ in range(5)]
        blocking_pending = [blocking.invoke_async(addr, req(GATED_ASYNC), LONG)
                            for _ in range(5)]
        await wait_until(lambda: gate.entered == 10)
        with pytest.raises(RemotingSendRequestError):
            await client.invoke_sync(addr, req(DROP), LONG)
        with pytest.raises(RemotingSendRequestError):
            await trio.to_thread.run_sync(blocking.invoke_sync, addr, req(DROP), LONG)
        with trio.fail_after(FAST):
            for fut in pending:
                with pytest.raises(RemotingSendRequestError):
                    await fut.wait()
        for fut in blocking_pending:
            with pytest.raises(RemotingSendRequestError):
                await trio.to_thread.run_sync(partial(fut.result, FAST))
        for stats in (client.statistics(), blocking.statistics()):
            assert stats.in_flight == 0
        gate.event.set()
        # both recover on a new connection
        assert (await client.invoke_sync(addr, req(ECHO, b"k"), 5)).body == b"k"
        ok = await trio.to_thread.run_sync(blocking.invoke_sync, addr, req(ECHO, b"k"), 5.0)
        assert ok.body == b"k"
        assert client.statistics().connections_opened == 2
        assert blocking.statistics().connections_opened == 2
        await wait_until(lambda: server.statistics().connections == 2
                         and not server.statistics().processing)
    finally:
        await trio.to_thread.run_sync(blocking.shutdown)


# --------------------------------------------------------------------------- a peer not reading


async def test_a_client_that_stops_reading_does_not_hurt_other_clients(
    nursery: trio.Nursery,
) -> None:
    high = 256 * 1024
    server = await start_server(nursery, write_buffer_high_water_mark=high,
                                write_buffer_low_water_mark=high // 4)
    server.register_processor(ASYNC_ECHO, AsyncEchoProcessor())
    server.register_processor(FLOOD, AsyncEchoProcessor())
    addr = f"127.0.0.1:{server.port}"
    frame = encode_frame(req(FLOOD, b"r" * 64 * 1024))
    stuck = await trio.open_tcp_stream("127.0.0.1", server.port)
    flooding = trio.CancelScope()

    async def flood() -> None:  # send requests until cancelled, never read a response
        with flooding:
            while True:
                await stuck.send_all(frame)

    client = await start_client(nursery)
    blocking = RemotingClient(ClientConfig()).start()
    try:
        nursery.start_soon(flood)
        # the server stops reading that connection once its responses pile up past the mark
        await wait_until(lambda: any(c.queued_bytes > high for c in server.channels()))
        [conn] = server.channels()
        await trio.testing.wait_all_tasks_blocked()
        read_at_stall = server.statistics().requests_received[FLOOD]
        queued_at_stall = conn.queued_bytes
        assert read_at_stall > 0

        # every call of the other clients is served meanwhile (none times out)
        for i in range(100):
            body = b"%d" % i
            assert (await client.invoke_sync(addr, req(ECHO, body), 5)).body == body
            ok = await trio.to_thread.run_sync(blocking.invoke_sync, addr, req(ASYNC_ECHO, body),
                                               5.0)
            assert ok.body == body
        # The stuck connection stayed stuck, and bounded: the server read no more requests from
        # it and queued nothing more for it. (How much more the flooder could push into the
        # kernel's socket buffers is the kernel's business: it grows them over time.)
        from remoting._core._sansio._connection_core import RECEIVE_BYTES

        assert server.statistics().requests_received[FLOOD] == read_at_stall
        assert conn.queued_bytes == queued_at_stall
        assert conn.queued_bytes <= high + RECEIVE_BYTES + len(frame)
        assert conn.is_active
    finally:
        flooding.cancel()
        await trio.to_thread.run_sync(blocking.shutdown)
        await stuck.aclose()
    await wait_until(lambda: not conn.is_active and server.statistics().connections == 1)


# --------------------------------------------------------------------------- processors


class Raises(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("processor failed")


class AsyncRaises(AsyncRequestProcessor):
    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        raise KeyError("async processor failed")


async def test_raising_processors_get_system_error_and_the_connection_stays(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery)
    server.register_processor(RAISES, Raises())
    server.register_processor(ASYNC_RAISES, AsyncRaises())
    addr = f"127.0.0.1:{server.port}"
    client = await start_client(nursery)
    for _ in range(20):
        for code, name in ((RAISES, "RuntimeError"), (ASYNC_RAISES, "KeyError")):
            for st in SerializeType:
                response = await client.invoke_sync(addr, req(code, st=st), 5)
                assert response.code == ResponseCode.SYSTEM_ERROR
                assert name in (response.remark or "")
        assert (await client.invoke_sync(addr, req(ECHO, b"ok"), 5)).body == b"ok"
    assert client.statistics().connections_opened == 1
    # every SYSTEM_ERROR reply counts, the processors' own included (20 calls x 2 headers);
    # a pool thread writes a lone response itself, and the loop counts it (its error reply,
    # and done) just after: the client may read the last answer first
    await wait_until(lambda: not server.statistics().processing)
    await wait_until(lambda: server.statistics().error_replies
                     == {RAISES: 40, ASYNC_RAISES: 40})


async def test_processor_hanging_past_the_deadline_times_out_and_the_server_stays_healthy(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery)
    gate = Gate()
    agate = AsyncGate()
    server.register_processor(HANGS, gate, threads=2)
    server.register_processor(ASYNC_HANGS, agate)
    addr = f"127.0.0.1:{server.port}"
    # no scanner sweep for a minute: only the call's own timer can end it within FAST
    client = await start_client(nursery, scan_initial_delay=60)
    timeout = 0.5
    for code in (HANGS, ASYNC_HANGS):
        start = time.monotonic()
        with trio.fail_after(FAST), pytest.raises(RemotingTimeoutError) as info:
            await client.invoke_sync(addr, req(code), timeout)
        assert time.monotonic() - start >= timeout  # wall-clock: a lower bound (its deadline)
        assert info.value.timeout == timeout
    futures = [await client.invoke_async(addr, req(code), timeout)
               for code in (HANGS, ASYNC_HANGS)]
    for fut in futures:
        with pytest.raises(RemotingTimeoutError):
            await fut.wait()
    # The hung pool processors still hold their threads, and the async one of the open
    # connection its task; the async one of the invoke_sync was cancelled when that timeout
    # closed its connection (an async processor runs in its connection's task tree).
    assert server.statistics().processing == 3
    for i in range(50):
        assert (await client.invoke_sync(addr, req(ECHO, b"%d" % i), 5)).body == b"%d" % i
    assert client.statistics().in_flight == 0
    # once they finish, late replies are dropped or orphaned, and nothing is left over
    gate.event.set()
    agate.event.set()
    await wait_until(lambda: not server.statistics().processing)
    assert (await client.invoke_sync(addr, req(ECHO, b"end"), 5)).body == b"end"
    stats = client.statistics()
    assert stats.timeouts == 4
    assert stats.in_flight == 0
    assert stats.orphaned_responses <= 2  # only the async calls' connection stayed open


class BadExtValue(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.ext_fields = {"count": 3}  # type: ignore[dict-item]
        return response


class AsyncBadExtValue(AsyncRequestProcessor):
    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.ext_fields = {"raw": b"bytes"}  # type: ignore[dict-item]
        return response


async def test_response_with_a_non_str_ext_value_becomes_system_error(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery)
    server.register_processor(HANGS, BadExtValue())
    server.register_processor(ASYNC_HANGS, AsyncBadExtValue())
    addr = f"127.0.0.1:{server.port}"
    client = await start_client(nursery)
    for code in (HANGS, ASYNC_HANGS):
        for st in SerializeType:
            response = await client.invoke_sync(addr, req(code, st=st), 5)
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert "could not be encoded" in (response.remark or "")
            assert response.serialize_type is st
    assert (await client.invoke_sync(addr, req(ECHO, b"ok"), 5)).body == b"ok"
    assert client.statistics().connections_opened == 1
    # a pool thread writes a lone response itself; the loop counts it done just after
    await wait_until(lambda: not server.statistics().processing)


class ReturnsGarbage(RequestProcessor):
    def __init__(self, garbage: object) -> None:
        self.garbage = garbage

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if request.body == b"garbage":
            return self.garbage  # type: ignore[return-value]
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


class AsyncReturnsGarbage(AsyncRequestProcessor):
    def __init__(self, garbage: object) -> None:
        self.garbage = garbage

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        if request.body == b"garbage":
            return self.garbage  # type: ignore[return-value]
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


def str_body_response() -> RemotingCommand:
    response = RemotingCommand.create_response(ResponseCode.SUCCESS)
    response.body = "text, not bytes"  # type: ignore[assignment]
    return response


GARBAGE = {
    "not a command": "a plain string",
    "a str body": str_body_response(),
}
@pytest.mark.parametrize("kind", sorted(GARBAGE))
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_processor_returning_garbage_gets_system_error_not_a_hang(
    kind: str, is_async: bool,
) -> None:
    garbage = GARBAGE[kind]
    async with trio.open_nursery() as nursery:
        server = await start_server(nursery, shutdown_grace_seconds=0.5)
        processor = (AsyncReturnsGarbage(garbage) if is_async
                     else ReturnsGarbage(garbage))
        server.register_processor(HANGS, processor, threads=1)
        addr = f"127.0.0.1:{server.port}"
        client = await start_client(nursery)
        try:
            response = await client.invoke_sync(addr, req(HANGS, b"garbage"), 1.0)
            assert response.code == ResponseCode.SYSTEM_ERROR
            # the processor's pool (one thread) still serves the next request
            response = await client.invoke_sync(addr, req(HANGS, b"fine"), 1.0)
            assert response.code == ResponseCode.SUCCESS
            await wait_until(lambda: not server.statistics().processing)  # counted just after
        finally:
            nursery.cancel_scope.cancel()


# --------------------------------------------------------------------------- oneway permits


async def test_oneway_queued_during_a_write_releases_its_permit_once() -> None:
    let_read = trio.Event()
    received = bytearray()

    async def slow_peer(stream: trio.SocketStream) -> None:  # reads only when told to
        await let_read.wait()
        while data := await stream.receive_some(1 << 20):
            received.extend(data)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, slow_peer, 0, host="127.0.0.1"))
        addr = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        # a high water mark above the big write below, so the oneway is queued, not held back
        client = await start_client(nursery, write_buffer_high_water_mark=32 << 20,
                                    write_buffer_low_water_mark=8 << 20)
        total = client.config.client_oneway_semaphore_value
        # a request larger than the socket buffers: the writer sits in send_all
        await client.invoke_async(addr, req(ECHO, b"x" * (8 << 20)), LONG)
        await trio.testing.wait_all_tasks_blocked()
        await client.invoke_oneway(addr, req(ECHO, b"oneway"), 5)
        assert client.statistics().oneway_permits_free == total - 1
        let_read.set()
        await wait_until(lambda: received.endswith(b"oneway"))
        await trio.testing.wait_all_tasks_blocked()
        assert client.statistics().oneway_permits_free == total
        await client.invoke_oneway(addr, req(ECHO, b"again"), 5)  # the client still works
        await wait_until(lambda: received.endswith(b"again"))
        nursery.cancel_scope.cancel()


async def test_oneway_permits_come_back_when_the_connection_breaks_mid_write() -> None:
    async def reset_after_a_few_bytes(stream: trio.SocketStream) -> None:
        await stream.receive_some(1000)
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, reset_after_a_few_bytes, 0,
                                                host="127.0.0.1"))
        addr = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        client = await start_client(nursery)
        total = client.config.client_oneway_semaphore_value
        for _ in range(8):  # 8 MiB, more than the socket buffers: a write is in progress
            try:
                await client.invoke_oneway(addr, req(ECHO, b"x" * (1 << 20)), 5)
            except RemotingError:  # the connection broke while this one waited to be queued
                break
        await wait_until(lambda: not client.statistics().connections)
        assert client.statistics().oneway_permits_free == total
        nursery.cancel_scope.cancel()
