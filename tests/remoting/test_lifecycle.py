"""Connections and lifecycle: failover, idle close and events, back-pressure, busy retry,
broadcast, graceful shutdown, reconnect loops."""

from __future__ import annotations

import gc
import threading
import time
import tracemalloc
from functools import partial

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from processors import (
    AsyncEchoProcessor,
    AsyncRequestProcessor,
    EchoProcessor,
    RequestContext,
    RequestProcessor,
)
from remoting import (
    ChannelHandle,
    ClientConfig,
    RemotingClient,
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingServer,
    RemotingTooManyRequestsError,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)

from ..factories import req
from ..hangs import HANG_SECONDS, returns_within
from .conftest import ASYNC_ECHO, ECHO, GATED, GATED_ASYNC, AsyncGate, Gate, addr_of, stalled_flood


async def dead_port() -> int:
    sock = trio.socket.socket()
    await sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    sock.close()
    return port


async def test_address_list_fails_over_to_a_live_server(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    dead = f"127.0.0.1:{await dead_port()}"
    client.update_name_server_address_list([dead, addr_of(server)])
    for _ in range(10):  # whatever the random start, every call lands on the live server
        response = await client.invoke_sync(None, req(ASYNC_ECHO, b"ns"), timeout=5)
        assert response.body == b"ns"
    assert client.current_name_server == addr_of(server)
    assert client.get_name_server_address_list() == [dead, addr_of(server)]


async def test_address_list_with_every_server_down_is_a_connect_error(
    client: TrioRemotingClient,
) -> None:
    client.update_name_server_address_list([f"127.0.0.1:{await dead_port()}"])
    with pytest.raises(RemotingConnectError, match="no address reachable"):
        await client.invoke_sync(None, req(ECHO), timeout=3)


async def test_empty_address_list_is_a_clear_error(client: TrioRemotingClient) -> None:
    with pytest.raises(RemotingConnectError, match="address list is empty"):
        await client.invoke_sync(None, req(ECHO), timeout=1)


def test_failover_after_one_of_two_servers_stops() -> None:
    first, second = RemotingServer().start(), RemotingServer().start()
    for s in (first, second):
        s.register_processor(ASYNC_ECHO, AsyncEchoProcessor())
    client = RemotingClient().start()
    try:
        client.update_name_server_address_list([first.addr, second.addr])
        assert client.invoke_sync(None, req(ASYNC_ECHO), 5).code == 0
        used = client.current_name_server
        (first if used == first.addr else second).shutdown()
        # the broken connection is noticed; the next calls fail over within their deadline
        results = []
        for _ in range(5):
            try:
                results.append(client.invoke_sync(None, req(ASYNC_ECHO, b"fo"), 5).body)
            except RemotingError as exc:  # at most the call racing the close may fail
                results.append(type(exc).__name__.encode())
        assert results[-3:] == [b"fo"] * 3
        assert client.current_name_server != used
    finally:
        client.shutdown()
        first.shutdown()
        second.shutdown()


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.closed = threading.Event()
        self.threads: set[str] = set()

    def _add(self, kind: str, addr: str) -> None:
        self.events.append((kind, addr))
        self.threads.add(threading.current_thread().name)
        if kind == "close":
            self.closed.set()

    def on_channel_connect(self, remote_addr: str, channel: ChannelHandle) -> None:
        self._add("connect", remote_addr)

    def on_channel_close(self, remote_addr: str, channel: ChannelHandle) -> None:
        self._add("close", remote_addr)

    def on_channel_exception(self, remote_addr: str, channel: ChannelHandle) -> None:
        self._add("exception", remote_addr)

    def on_channel_idle(self, remote_addr: str, channel: ChannelHandle) -> None:
        self._add("idle", remote_addr)


async def test_idle_connection_is_closed_and_events_arrive_in_order(
    nursery: trio.Nursery,
) -> None:
    server = TrioRemotingServer(ServerConfig(max_idle_seconds=0.3))
    server.register_processor(ECHO, AsyncEchoProcessor())
    server_events, client_events = Recorder(), Recorder()
    server.register_channel_event_listener(server_events)
    await nursery.start(server.serve)
    client = TrioRemotingClient(ClientConfig(max_idle_seconds=0))  # only the server times out
    client.register_channel_event_listener(client_events)
    await nursery.start(client.serve)
    await client.invoke_sync(addr_of(server), req(ECHO), timeout=5)
    assert await trio.to_thread.run_sync(server_events.closed.wait, 5)
    assert await trio.to_thread.run_sync(client_events.closed.wait, 5)
    assert [k for k, _ in server_events.events] == ["connect", "idle", "close"]
    assert [k for k, _ in client_events.events] == ["connect", "close"]
    assert client_events.events[0][1] == addr_of(server)
    assert server_events.threads == {"remoting-server-events"}  # off the event loop
    assert client.statistics().connections == 0
    # the next call simply reconnects
    assert (await client.invoke_sync(addr_of(server), req(ECHO), timeout=5)).code == 0


async def test_a_connection_whose_request_is_being_processed_is_not_idle(
    nursery: trio.Nursery,
) -> None:
    # The idle check looked at bytes only: a processor slower than max_idle_seconds had its
    # connection closed under it, and its caller was told the server closed the connection.
    class Slow(AsyncRequestProcessor):
        async def process_request(self, ctx: RequestContext, request: RemotingCommand
                                  ) -> RemotingCommand:
            await trio.sleep(1.0)  # the work itself: 5 idle periods
            return RemotingCommand.create_response(ResponseCode.SUCCESS)

    server = TrioRemotingServer(ServerConfig(max_idle_seconds=0.2))
    server.register_processor(ECHO, Slow())
    await nursery.start(server.serve)
    client = TrioRemotingClient(ClientConfig(max_idle_seconds=0))
    await nursery.start(client.serve)
    with trio.fail_after(5):
        response = await client.invoke_sync(addr_of(server), req(ECHO), timeout=5)
    assert response.code == ResponseCode.SUCCESS
    assert client.statistics().connections_opened == 1


async def test_broken_connection_emits_exception_then_close(
    server: TrioRemotingServer,
) -> None:
    events = Recorder()
    server.register_channel_event_listener(events)
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    async with stream:
        await stream.send_all(b"\xff\xff\xff\xff garbage")
        assert await trio.to_thread.run_sync(events.closed.wait, 5)
    assert [k for k, _ in events.events] == ["connect", "exception", "close"]


@pytest.mark.parametrize(("high", "body_bytes"), [
    (256 * 1024, 64 * 1024),
    (2 * 1024 * 1024, 1024 * 1024),  # large frames: sent in pieces, partial sends included
])
async def test_client_waits_then_fails_against_a_peer_that_never_reads(
    nursery: trio.Nursery, high: int, body_bytes: int,
) -> None:
    """The outbound buffer stays bounded (every byte counted): callers get TooManyRequests
    within their deadline."""
    accepted: list[trio.SocketStream] = []
    never_read = trio.Event()

    async def hold(stream: trio.SocketStream) -> None:
        accepted.append(stream)
        await never_read.wait()

    listeners = await nursery.start(partial(trio.serve_tcp, hold, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    client = TrioRemotingClient(ClientConfig(write_buffer_high_water_mark=high,
                                             write_buffer_low_water_mark=high // 4))
    await nursery.start(client.serve)
    body = bytes(range(256)) * (body_bytes // 256)
    from codec import encode_frame

    frame_bytes = len(encode_frame(req(ECHO, body)))

    async def flood() -> None:
        for _ in range(10_000):  # far more than socket buffers + the high water mark
            await client.invoke_oneway(f"127.0.0.1:{port}", req(ECHO, body), timeout=0.5)

    with pytest.raises(RemotingTooManyRequestsError, match="not reading"):
        await flood()
    stats = client.statistics()
    assert stats.connections == 1
    assert high < stats.queued_bytes <= high + frame_bytes
    never_read.set()


@pytest.mark.parametrize(("high", "body_bytes"), [
    (128 * 1024, 32 * 1024),
    (1024 * 1024, 300 * 1024),  # large frames: their rest is received in place
])
async def test_server_stops_reading_from_a_client_that_does_not_drain_responses(
    nursery: trio.Nursery, high: int, body_bytes: int,
) -> None:
    server = TrioRemotingServer(ServerConfig(write_buffer_high_water_mark=high,
                                             write_buffer_low_water_mark=high // 4))
    server.register_processor(ASYNC_ECHO, AsyncEchoProcessor())
    await nursery.start(server.serve)
    from codec import encode_frame
    from remoting._core._sansio._connection_core import RECEIVE_BYTES

    frame = encode_frame(req(ASYNC_ECHO, bytes(range(256)) * (body_bytes // 256)))
    async with stalled_flood(server, frame) as channel:
        received = server.statistics().requests_received[ASYNC_ECHO]
        queued = channel.queued_bytes
        assert received > 0
        # bounded: the high water mark plus the responses to one receive buffer of requests
        assert queued <= high + RECEIVE_BYTES + len(frame)
        # another client is served meanwhile, and nothing more is read from the stuck one
        client = TrioRemotingClient()
        await nursery.start(client.serve)
        assert (await client.invoke_sync(addr_of(server), req(ASYNC_ECHO, b"ok"), 5)).body == b"ok"
        assert server.statistics().requests_received[ASYNC_ECHO] == received + 1
        assert channel.queued_bytes == queued
        assert channel.is_active


class FlakyBusy(AsyncRequestProcessor):
    def __init__(self, busy_times: int) -> None:
        self.left = busy_times

    def reject_request(self) -> bool:
        self.left -= 1
        return self.left >= 0

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


async def test_busy_replies_are_retried_only_when_asked(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    server.register_processor(70, FlakyBusy(busy_times=3))
    first = await client.invoke_sync(addr_of(server), req(70), timeout=5)
    assert first.code == ResponseCode.SYSTEM_BUSY
    retried = await client.invoke_sync(addr_of(server), req(70), timeout=5, retry_busy=True)
    assert retried.code == ResponseCode.SUCCESS
    assert server.statistics().requests_received[70] == 4


def test_blocking_busy_retry(blocking_server: RemotingServer,
                             blocking_client: RemotingClient) -> None:
    blocking_server.register_processor(70, FlakyBusy(busy_times=2))
    response = blocking_client.invoke_sync(blocking_server.addr, req(70), 5, retry_busy=True)
    assert response.code == ResponseCode.SUCCESS


async def test_broadcast_reaches_every_member_of_a_group(
    server: TrioRemotingServer, nursery: trio.Nursery,
) -> None:
    groups: dict[str, list[ChannelHandle]] = {}

    class Join(AsyncRequestProcessor):
        async def process_request(self, ctx: RequestContext, request: RemotingCommand
                                  ) -> RemotingCommand:
            group = (request.ext_fields or {})["group"] or ""
            groups.setdefault(group, []).append(ctx.channel)  # type: ignore[arg-type]
            return RemotingCommand.create_response(ResponseCode.SUCCESS)

    server.register_processor(80, Join())
    received: dict[int, list[bytes | None]] = {}
    done = trio.Event()

    def make_sink(i: int) -> AsyncRequestProcessor:
        class Sink(AsyncRequestProcessor):
            async def process_request(self, ctx: RequestContext, request: RemotingCommand
                                      ) -> None:
                received.setdefault(i, []).append(request.body)
                if sum(len(v) for v in received.values()) == 3:
                    done.set()
        return Sink()

    for i in range(4):
        client = TrioRemotingClient()
        client.register_processor(81, make_sink(i))
        await nursery.start(client.serve)
        await client.invoke_sync(addr_of(server), RemotingCommand.create_request(
            80, header={"group": "blue" if i < 3 else "red"}), 5)
    sent = server.broadcast_oneway(groups["blue"], req(81, b"news"))
    assert sent == 3
    with trio.fail_after(5):
        await done.wait()
    assert received == {0: [b"news"], 1: [b"news"], 2: [b"news"]}


def test_graceful_shutdown_lets_running_processors_finish() -> None:
    # threads of servers other tests of this process keep (a session's), under pytest-xdist
    others = set(threading.enumerate())
    server = RemotingServer(ServerConfig(shutdown_grace_seconds=10)).start()
    release = threading.Event()
    started = threading.Event()

    from processors import RequestProcessor

    class Slow(RequestProcessor):
        def process_request(self, ctx: RequestContext, request: RemotingCommand
                            ) -> RemotingCommand:
            started.set()
            release.wait(10)
            return RemotingCommand.create_response(ResponseCode.SUCCESS, "finished")

    server.register_processor(90, Slow())
    server.register_processor(ECHO, AsyncEchoProcessor())
    client = RemotingClient().start()
    try:
        fut = client.invoke_async(server.addr, req(90), timeout=15)
        assert started.wait(5)
        stopper = threading.Thread(target=server.shutdown)
        stopper.start()
        # while draining: new requests from our clients get GO_AWAY (resent once, then fail)
        while not server.draining:
            assert stopper.is_alive()
            stopper.join(0.01)
        with pytest.raises(RemotingError):
            client.invoke_sync(server.addr, req(ECHO), timeout=3)
        release.set()
        assert fut.result(10).remark == "finished"  # nothing lost
        stopper.join(10)
        assert not stopper.is_alive()
    finally:
        release.set()
        client.shutdown()
        server.shutdown()
    assert not [t for t in threading.enumerate()
                if t.name.startswith("remoting-server") and t not in others]


def test_shutdown_is_fast_when_idle() -> None:
    # an idle server has nothing to wait for: a shutdown that waited out the grace hangs
    server = RemotingServer(ServerConfig(shutdown_grace_seconds=600)).start()
    returns_within(HANG_SECONDS, server.shutdown)
    returns_within(HANG_SECONDS, server.shutdown)


def test_threads_stuck_past_the_grace_share_one_join_deadline_then_are_logged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stuck processor threads of every pool are joined against one deadline in all (not
    one per thread: 4 threads used to cost 4 x 5 s), then left behind and logged by name."""
    import time

    from remoting._core import _endpoint

    from ..logs import capture_logs
    from .conftest import Gate

    monkeypatch.setattr(_endpoint, "THREAD_JOIN_SECONDS", 1.0)
    joins: list[float | None] = []  # the timeout of each join of a stuck pool thread
    real_join = threading.Thread.join

    def join(thread: threading.Thread, timeout: float | None = None) -> None:
        if thread.name.startswith(("remoting-server-30", "remoting-server-31")):
            joins.append(timeout)
        real_join(thread, timeout)

    monkeypatch.setattr(threading.Thread, "join", join)
    gates = [Gate(), Gate()]
    server = RemotingServer().start()
    for code, gate in zip((30, 31), gates, strict=True):
        server.register_processor(code, gate, threads=2)
    client = RemotingClient().start()
    try:
        futures = [client.invoke_async(server.addr, req(code), 30) for code in (30, 30, 31, 31)]
        for gate in gates:  # every pool thread is now stuck in a processor
            assert gate.entered.acquire(timeout=10)
            assert gate.entered.acquire(timeout=10)
        start = time.monotonic()
        with capture_logs() as logs:
            server.shutdown(grace=0)
        elapsed = time.monotonic() - start
        assert elapsed >= 0.9  # wall-clock: a lower bound (it waited for the deadline)
        # the four joins shared the one 1 s deadline (each took what was left), not 4 x 1 s
        assert len(joins) == 4 and sum(t or 0.0 for t in joins) <= 1.0, joins
        [left] = [e for e in logs if e["event"] == "pool.threads_left_running"]
        assert sorted(left["threads"]) == ["remoting-server-30-0", "remoting-server-30-1",
                                           "remoting-server-31-0", "remoting-server-31-1"]
        for fut in futures:  # their calls failed at once with the connection
            with pytest.raises(RemotingError):
                fut.result(5)
    finally:
        for gate in gates:
            gate.release()
        client.shutdown()
        server.shutdown()


async def test_go_away_resends_to_another_server_in_the_address_list(
    nursery: trio.Nursery,
) -> None:
    servers = []
    for _ in range(2):
        s = TrioRemotingServer(ServerConfig(shutdown_grace_seconds=10))
        s.register_processor(ECHO, AsyncEchoProcessor())
        s.register_processor(GATED_ASYNC, gate := AsyncGate())
        await nursery.start(s.serve)
        servers.append((s, gate))
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    client.update_name_server_address_list([addr_of(s) for s, _ in servers])
    await client.invoke_sync(None, req(ECHO), 5)
    current = next(s for s, g in servers if addr_of(s) == client.current_name_server)
    gate = next(g for s, g in servers if s is current)
    held = await client.invoke_async(None, req(GATED_ASYNC), 10)  # keeps `current` draining
    with trio.fail_after(5):
        await gate.entered.wait()
    async with trio.open_nursery() as inner:
        inner.start_soon(current.shutdown)
        with trio.fail_after(5):
            while not current.draining:
                await trio.testing.wait_all_tasks_blocked()
        response = await client.invoke_sync(None, req(ECHO, b"moved"), 5)
        assert response.body == b"moved"  # GO_AWAY, then resent to the other server
        assert client.current_name_server != addr_of(current)
        gate.event.set()
    assert (await held.wait()).code == ResponseCode.SUCCESS


async def test_reconnect_loop_against_a_dead_port_keeps_memory_and_tables_flat(
    client: TrioRemotingClient, mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.rate = 1.0  # real time (connects are real); jumped forward once, below
    addr = f"127.0.0.1:{await dead_port()}"

    async def attempts(n: int) -> None:
        for _ in range(n):
            with pytest.raises(RemotingConnectError):
                await client.invoke_sync(addr, req(ECHO), timeout=1)

    await attempts(200)  # warm up caches
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        await attempts(1000)
        # Trio keeps each exited cancel scope that had a deadline (two per attempt here) in
        # its deadline heap until that deadline passes, or until 1000 such stale entries
        # have piled up, when it prunes them all: between 0 and ~200 KB, depending on where
        # in that cycle the snapshot falls (and on how slowly the attempts ran). Nothing
        # real is pending between attempts: move the clock past every deadline of theirs, so
        # that trio drops those entries and what is left is what the client keeps.
        mock_clock.jump(60)
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    # count only what our code and trio still hold (other tests' threads may allocate too)
    ours = ("/remoting/", "/codec/", "/trio/")
    grown = sum(d.size_diff for d in after.compare_to(before, "filename")
                if any(part in d.traceback[0].filename for part in ours))
    assert grown < 100_000, f"grew by {grown} bytes over 1000 attempts"
    stats = client.statistics()
    assert (stats.connecting, stats.in_flight, stats.connections) == (0, 0, 0)


async def test_statistics_report_latency_percentiles(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    for _ in range(50):
        await client.invoke_sync(addr_of(server), req(ASYNC_ECHO), 5)
    lat = client.statistics().latency[ASYNC_ECHO]
    assert lat["count"] == 50
    assert 0 < lat["p50"] <= lat["p99"] <= lat["max"]  # wall-clock: a lower bound (measured)


def test_shutdown_during_traffic_loses_nothing_and_hangs_nothing() -> None:
    """Eight threads call while the server shuts down: every call ends, in time, with its own
    response or a documented error; responses that did come back are the right ones."""
    from concurrent.futures import ThreadPoolExecutor

    server = RemotingServer(ServerConfig(shutdown_grace_seconds=5)).start()
    server.register_processor(ECHO, AsyncEchoProcessor())
    client = RemotingClient(ClientConfig(close_socket_if_timeout=False)).start()
    started = threading.Barrier(9)
    outcomes: list[str] = []
    lock = threading.Lock()

    flowing = threading.Event()

    def caller(t: int) -> None:
        started.wait(10)
        for i in range(300):
            body = b"%d-%d" % (t, i)
            try:
                response = client.invoke_sync(server.addr, req(ECHO, body), timeout=3)
            except RemotingError as exc:
                outcome = type(exc).__name__
            else:
                assert response.body == body  # never someone else's answer
                outcome = "ok" if response.code == ResponseCode.SUCCESS else f"code{response.code}"
            with lock:
                outcomes.append(outcome)
                if outcomes.count("ok") >= 200:
                    flowing.set()


    try:
        with ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(caller, t) for t in range(8)]
            started.wait(10)
            assert flowing.wait(30)  # traffic is flowing when the shutdown begins
            returns_within(HANG_SECONDS, server.shutdown)
            for f in futures:
                f.result(timeout=60)  # no call hangs
    finally:
        client.shutdown()
        server.shutdown()  # idempotent: stops it if the test failed before its own call
    assert len(outcomes) == 8 * 300
    assert outcomes.count("ok") > 0
    allowed = {"ok", "RemotingConnectError", "RemotingSendRequestError", "RemotingError",
               "RemotingTimeoutError"}
    assert set(outcomes) <= allowed, set(outcomes) - allowed


async def test_a_second_go_away_is_a_send_failure(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    await client.invoke_sync(addr_of(server), req(ECHO), 5)
    server.drain()  # draining, but still accepting: GO_AWAY to everything
    with pytest.raises(RemotingSendRequestError, match="GO_AWAY"):
        await client.invoke_sync(addr_of(server), req(ECHO), 5)
    assert client.statistics().connections_opened == 2  # it reconnected once to resend


async def test_go_away_is_data_when_resending_is_disabled(
    server: TrioRemotingServer, nursery: trio.Nursery,
) -> None:
    client = TrioRemotingClient(ClientConfig(enable_reconnect_for_go_away=False))
    await nursery.start(client.serve)
    server.drain()
    response = await client.invoke_sync(addr_of(server), req(ECHO), 5)
    assert response.code == ResponseCode.GO_AWAY


class Stop(RequestProcessor):
    """A sync processor that shuts its own server down (an admin "stop" command)."""

    def __init__(self) -> None:
        self.server: RemotingServer | None = None
        self.returned_after = -1.0

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        assert self.server is not None
        start = time.monotonic()
        self.server.shutdown()
        self.returned_after = time.monotonic() - start
        return RemotingCommand.create_response(ResponseCode.SUCCESS, remark="stopping")


def test_a_processor_shutting_down_its_own_server_neither_waits_for_itself_nor_loses_its_reply(
) -> None:
    # It waited out the grace period for itself (it is a running processor), then the pool's
    # join waited for it too (the thread calling shutdown): the grace and a warning. With a
    # grace of a minute, a processor that waited for it would miss its call's 10 s timeout.
    from ..logs import capture_logs

    stop = Stop()
    others = set(threading.enumerate())  # other tests' servers' threads (pytest-xdist)
    server = RemotingServer(ServerConfig(shutdown_grace_seconds=60)).start()
    stop.server = server
    server.register_processor(40, stop)
    client = RemotingClient().start()
    try:
        with capture_logs() as logs:
            response = client.invoke_sync(server.addr, req(40), 10)
            assert response.code == ResponseCode.SUCCESS and response.remark == "stopping"
            assert stop.returned_after >= 0
            # from another thread: returns once the server has stopped
            returns_within(HANG_SECONDS, server.shutdown)
        assert not [e for e in logs if e["event"] in ("pool.threads_left_running",
                                                      "server.shutdown_forced")]
        assert not [t for t in threading.enumerate() if t.name.startswith("remoting-server")
                    and t.is_alive() and t not in others]
        with pytest.raises(RemotingError):
            client.invoke_sync(server.addr, req(40), 2)
    finally:
        client.shutdown()
        server.shutdown()


def test_a_direct_blocking_call_to_a_draining_server_fails_fast_with_go_away() -> None:
    """The call goes straight from the thread (a live idle connection) and holds no permit:
    its one resend after GO_AWAY must not need one."""
    with RemotingServer() as server, RemotingClient() as client:
        server.register_processor(ECHO, AsyncEchoProcessor())
        client.invoke_sync(server.addr, req(ECHO), timeout=3)  # the connection is live
        server.drain()
        # GO_AWAY, not RemotingTimeoutError: it did not wait for its timeout
        with pytest.raises(RemotingSendRequestError, match="GO_AWAY"):
            client.invoke_sync(server.addr, req(ECHO), timeout=3)
        assert client.statistics().go_away_received == 2


def test_a_call_pending_at_client_shutdown_says_the_client_shut_down() -> None:
    gate = Gate()
    with RemotingServer() as server:
        server.register_processor(GATED, gate)
        client = RemotingClient().start()
        future = client.invoke_async(server.addr, req(GATED), 30)
        assert gate.entered.acquire(timeout=10)
        client.shutdown()
        gate.release()
        with pytest.raises(RemotingSendRequestError) as info:
            future.result(10)
    assert "the client shut down" in str(info.value)  # was "connection closed (None)"


def test_registering_a_code_again_ends_the_replaced_pools_threads() -> None:
    code = 77

    def pool_threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name.startswith(f"remoting-server-{code}-")]

    with RemotingServer() as server, RemotingClient() as client:
        replaced: list[threading.Thread] = []
        for i in range(4):
            replaced = pool_threads()  # the pools replaced by this registration
            server.register_processor(code, EchoProcessor(), threads=2)
            futures = [client.invoke_async(server.addr, req(code, b"%d" % i), 5) for _ in range(8)]
            assert all(f.result(5).body == b"%d" % i for f in futures)
        assert replaced  # the pools did start threads
        deadline = time.monotonic() + 10
        for t in replaced:  # each used to stay until the server's shutdown
            t.join(max(0.0, deadline - time.monotonic()))
        assert not [t.name for t in replaced if t.is_alive()]
        assert len(pool_threads()) <= 2  # the current pool's
