"""What user threads change, and what a connection told GO_AWAY still takes, at the instants
where the loop is in the middle of something (deterministic interleavings of each race)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

from codec import FrameDecoder, RemotingCommand, ResponseCode, encode_frame, encode_frame_parts
from processors import AsyncEchoProcessor, EchoProcessor
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingServer,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)
from remoting._core._doors._threads import Inbox
from remoting._core._receiving._dispatch import Dispatcher
from remoting._core._streams._streams import Streams
from remoting._core._thread_driver._pending_calls import ThreadCall
from remoting._core._thread_driver._thread_driver import ThreadDriver
from remoting._core._trio_driver._connection import Connection
from remoting._observability._statistics import Counters

from ..factories import req
from .conftest import ASYNC_ECHO, GATED, Gate, addr_of, install_standard_processors

# ------------------------------------------------------------------ the address list


async def test_an_address_removed_while_it_was_being_connected_is_never_current(
    nursery: trio.Nursery,
) -> None:
    """``set_addresses`` runs on a user thread while the loop connects to an address of the
    old list; that address must not become the current one of the new list."""
    old, new = TrioRemotingServer(), TrioRemotingServer()
    for server in (old, new):
        install_standard_processors(server)
        await nursery.start(server.serve)
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    channels = client.endpoint.channels
    dialling, go_on = trio.Event(), trio.Event()
    real_dial: Callable[[str, str, int], Awaitable[Connection]] = channels._dial

    async def dial_when_told(addr: str, host: str, port: int) -> Connection:
        dialling.set()
        await go_on.wait()
        return await real_dial(addr, host, port)

    channels._dial = dial_when_told
    client.update_name_server_address_list([addr_of(old)])
    async with trio.open_nursery() as calls:
        calls.start_soon(client.invoke_sync, None, req(ASYNC_ECHO), 10)
        await dialling.wait()  # the loop is connecting to `old` for an addr=None call
        await trio.to_thread.run_sync(client.update_name_server_address_list, [addr_of(new)])
        go_on.set()
    assert client.current_name_server != addr_of(old)
    channels._dial = real_dial
    await client.invoke_sync(None, req(ASYNC_ECHO), 10)
    assert client.current_name_server == addr_of(new)
    assert new.statistics().requests_received == {ASYNC_ECHO: 1}


# ------------------------------------------------------------------ registrations


def test_a_processor_registered_by_a_thread_leaves_a_reader_of_the_table_whole() -> None:
    """`queue_depths` (the loop; OpenTelemetry's metric reader on its own thread) iterates
    the processors while a user thread registers one: it changed size under the reader."""
    d = Dispatcher("server", ServerConfig(), Counters(), Inbox(), owner=object(),
                   stream_opener=Streams(1 << 20).opener)
    for code in range(3):
        d.register(code, EchoProcessor(), threads=1)
    reading = iter(d.processors.items())  # as queue_depths is, mid-way
    next(reading)
    registered = threading.Thread(target=d.register, args=(99, EchoProcessor()),
                                  kwargs={"threads": 1})
    registered.start()
    registered.join()
    assert len(list(reading)) == 2  # the table it began with, whole
    assert set(d.queue_depths()) == {0, 1, 2, 99}
    d.stop_pools()
    assert d.join_pools(time.monotonic() + 5) == []


def test_threads_registering_at_once_lose_none_of_their_processors() -> None:
    d = Dispatcher("server", ServerConfig(), Counters(), Inbox(), owner=object(),
                   stream_opener=Streams(1 << 20).opener)
    start = threading.Barrier(4)

    def register(first: int) -> None:
        start.wait()
        for code in range(first, first + 50):
            d.register(code, AsyncEchoProcessor())

    threads = [threading.Thread(target=register, args=(i * 50,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(d.processors) == list(range(200))


# ------------------------------------------------------------------ GO_AWAY


def test_a_threads_call_is_refused_by_a_connection_told_go_away(
    blocking_server: RemotingServer, client_io: str,
) -> None:
    """A thread may hold a connection it looked up before the connection was told GO_AWAY.
    Its call must then go elsewhere: a call registered after the calls left on such a
    connection were counted would be sent on a connection closing under it, and fail with
    "connection is closed". With ``io="loop"`` threads never send a call themselves (the
    loop registers and sends every call); with ``io="threads"`` the registration checks the
    connection under the driver's lock, the lock under which those calls are counted."""
    gate = Gate()
    blocking_server.register_processor(GATED, gate)
    addr = blocking_server.addr
    with RemotingClient() as client:
        client.invoke_sync(addr, req(ASYNC_ECHO), 5)
        driver = client.endpoint.threads
        assert driver is None or isinstance(driver, ThreadDriver)  # (io="threads")
        if driver is None:
            conn: Any = client.endpoint.channels.by_addr[addr]  # what a thread looked up
        else:
            conn = driver.channels.by_addr[addr]
        held = client.invoke_async(addr, req(GATED), 10)  # keeps the connection open
        assert gate.entered.acquire(timeout=5)
        blocking_server.drain()
        told = client.invoke_async(addr, req(ASYNC_ECHO), 10)  # answered GO_AWAY (twice)
        with pytest.raises(Exception, match="GO_AWAY"):
            told.result(10)
        assert conn.going_away and not conn.closed
        reply = encode_frame_parts(RemotingCommand.create_response(ResponseCode.SUCCESS))
        if driver is None:
            assert not hasattr(conn.sender, "adopt")  # no call of a thread's own is sent
            assert conn.send_from_thread(reply)  # a reply (no call) still goes out
        else:
            in_flight = client.statistics().in_flight
            late = ThreadCall(req(ASYNC_ECHO), addr, 10, driver)
            late.deadline = time.monotonic() + 10
            assert not driver.pending.send(conn, late, None, unattended=True, elsewhere=True)
            assert late.conn is None and not late.done()  # nothing registered: it moves on
            assert client.statistics().in_flight == in_flight
            assert conn.send(reply)  # a reply (no call) still goes out
        gate.release()
        assert held.result(10).code == ResponseCode.SUCCESS  # the call already on it finished


async def test_a_call_waiting_for_room_moves_off_a_connection_told_go_away(
    nursery: trio.Nursery,
) -> None:
    """A call waiting for room on a connection (the peer reads nothing) while that
    connection is told GO_AWAY goes to a new connection at once; it waited until the old one
    closed (5 s later, its queue never flushed) and failed with "connection is closed"."""
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    listener.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    addr = f"127.0.0.1:{listener.socket.getsockname()[1]}"
    high = 64 * 1024
    client = TrioRemotingClient(ClientConfig(write_buffer_high_water_mark=high,
                                             write_buffer_low_water_mark=high // 4))
    await nursery.start(client.serve)
    first = req(ASYNC_ECHO, b"first")
    first.opaque = 7_000_007
    async with listener:
        pending = await client.invoke_async(addr, first, 10)
        stalled = await listener.accept()  # never read
        conn = client.endpoint.channels.by_addr[addr]
        with trio.fail_after(10):
            while conn.queued_bytes <= high:  # until the kernel's buffers are full too
                await client.invoke_oneway(addr, req(ASYNC_ECHO, b"z" * (1 << 20)), 5)
        outcome: list[RemotingCommand | BaseException] = []

        async def waiting_call() -> None:
            try:
                outcome.append(await client.invoke_sync(addr, req(ASYNC_ECHO, b"mine"), 10))
            except Exception as exc:
                outcome.append(exc)

        nursery.start_soon(waiting_call)
        await trio.testing.wait_all_tasks_blocked()
        assert not outcome  # waiting for room
        go_away = RemotingCommand.create_response(ResponseCode.GO_AWAY, "please go away")
        go_away.opaque = first.opaque
        await stalled.send_all(encode_frame(go_away))
        with trio.fail_after(10):
            fresh = await listener.accept()  # the resent call and the waiting one come here
            async with fresh:
                decoder = FrameDecoder()
                while not (outcome and pending.done()):  # the waiting call, and the resent one
                    decoder.feed(await fresh.receive_some(1 << 16))
                    while (cmd := decoder.next_command()) is not None:
                        answer = RemotingCommand.response_to(cmd, ResponseCode.SUCCESS)
                        answer.body = cmd.body
                        await fresh.send_all(encode_frame(answer))
                    await trio.testing.wait_all_tasks_blocked()
        await stalled.aclose()
    [mine] = outcome  # answered on the new connection, not failed when the old one closed
    assert isinstance(mine, RemotingCommand) and mine.body == b"mine", mine
    assert (await pending.wait()).body == b"first"  # resent there too


def test_a_blocking_call_waiting_for_room_moves_off_a_connection_told_go_away() -> None:
    """The same with `RemotingClient` (once per ``io`` setting): with ``io="threads"`` the
    calling thread itself waits for room, and GO_AWAY (read by the background reader, since
    nobody waits for the first call) wakes it to take a new connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    addr = f"127.0.0.1:{listener.getsockname()[1]}"
    high = 64 * 1024
    first = req(ASYNC_ECHO, b"first")
    first.opaque = 7_000_008
    with listener, RemotingClient(ClientConfig(write_buffer_high_water_mark=high,
                                               write_buffer_low_water_mark=high // 4)) as client:
        pending = client.invoke_async(addr, first, 10)
        stalled, _ = listener.accept()  # never read
        deadline = time.monotonic() + 10
        while not client.statistics().in_flight:  # io="loop": sent by the loop, soon
            assert time.monotonic() < deadline
            time.sleep(0.001)
        while client.statistics().queued_bytes <= high:  # the kernel's buffers are full too
            assert time.monotonic() < deadline
            client.invoke_oneway(addr, req(ASYNC_ECHO, b"z" * (1 << 20)), 5)
        outcome: list[RemotingCommand | BaseException] = []

        def waiting_call() -> None:
            try:
                outcome.append(client.invoke_sync(addr, req(ASYNC_ECHO, b"mine"), 10))
            except Exception as exc:
                outcome.append(exc)

        thread = threading.Thread(target=waiting_call)
        thread.start()
        time.sleep(0.3)
        assert not outcome  # waiting for room
        go_away = RemotingCommand.create_response(ResponseCode.GO_AWAY, "please go away")
        go_away.opaque = first.opaque
        stalled.sendall(encode_frame(go_away))
        listener.settimeout(10)
        fresh, _ = listener.accept()  # the resent call and the waiting one come here
        with fresh, stalled:
            fresh.settimeout(0.05)
            decoder = FrameDecoder()
            deadline = time.monotonic() + 10
            while not (outcome and pending.done()):
                assert time.monotonic() < deadline
                try:
                    decoder.feed(fresh.recv(1 << 16))
                except TimeoutError:
                    continue
                while (cmd := decoder.next_command()) is not None:
                    answer = RemotingCommand.response_to(cmd, ResponseCode.SUCCESS)
                    answer.body = cmd.body
                    fresh.sendall(encode_frame(answer))
            thread.join(10)
        [mine] = outcome  # answered on the new connection, not failed when the old one closed
        assert isinstance(mine, RemotingCommand) and mine.body == b"mine", mine
        assert pending.result(10).body == b"first"  # resent there too
