"""The blocking faces: many threads, callbacks, pickling, loop-thread misuse, shutdown."""

from __future__ import annotations

import pickle
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from codec import RemotingCommand, ResponseCode, SerializeType
from processors import AsyncRequestProcessor, RequestContext
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingConnectError,
    RemotingError,
    RemotingServer,
    RemotingTimeoutError,
    ResponseFuture,
    ServerConfig,
)

from ..factories import req
from .conftest import ASYNC_ECHO, ECHO, GATED, Gate

PUSHED = 63  # a code the client serves for the server


@pytest.mark.parametrize("st", list(SerializeType))
def test_blocking_invoke_sync_async_oneway(
    blocking_server: RemotingServer, blocking_client: RemotingClient, st: SerializeType,
) -> None:
    addr = blocking_server.addr
    assert blocking_client.invoke_sync(addr, req(ECHO, b"s", st), timeout=5).body == b"s"
    fut = blocking_client.invoke_async(addr, req(ASYNC_ECHO, b"a", st), timeout=5)
    assert fut.result(5).body == b"a"
    blocking_client.invoke_oneway(addr, req(ECHO, b"o", st), timeout=5)
    assert blocking_client.invoke_sync(addr, req(777, st=st), timeout=5).code == 3


def test_many_threads_share_one_client(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    def work(t: int) -> list[bytes | None]:
        return [blocking_client.invoke_sync(blocking_server.addr,
                                            req(ECHO if i % 2 else ASYNC_ECHO, b"%d-%d" % (t, i)),
                                            timeout=10).body
                for i in range(200)]

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(work, range(16)))
    for t, bodies in enumerate(results):
        assert bodies == [b"%d-%d" % (t, i) for i in range(200)]
    stats = blocking_client.statistics()
    assert stats.connections == 1
    assert stats.in_flight == 0


def test_callback_runs_once_on_the_callback_executor(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    done = threading.Event()
    seen: list[tuple[ResponseFuture, str]] = []

    def callback(fut: ResponseFuture) -> None:
        seen.append((fut, threading.current_thread().name))
        done.set()

    fut = blocking_client.invoke_async(blocking_server.addr, req(ECHO, b"cb"), 5, callback)
    assert done.wait(5)
    assert fut.result().body == b"cb"
    assert len(seen) == 1 and seen[0][0] is fut
    assert seen[0][1].startswith("remoting-client-callback")


def test_callback_gets_connect_failure(blocking_client: RemotingClient) -> None:
    done = threading.Event()
    causes: list[BaseException | None] = []

    def callback(fut: ResponseFuture) -> None:
        causes.append(fut.cause)
        done.set()

    blocking_client.invoke_async("127.0.0.1:1", req(ECHO), 3, callback)
    assert done.wait(5)
    assert len(causes) == 1 and isinstance(causes[0], RemotingConnectError)


def test_callback_that_raises_is_logged_and_does_not_break_the_client(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    from ..logs import capture_logs

    done = threading.Event()

    def bad(fut: ResponseFuture) -> None:
        done.set()
        raise RuntimeError("callback bug")

    with capture_logs() as logs:
        blocking_client.invoke_async(blocking_server.addr, req(ECHO), 5, bad)
        assert done.wait(5)
        assert blocking_client.invoke_sync(blocking_server.addr, req(ECHO, b"ok"), 5).body == b"ok"
        blocking_client.shutdown()  # runs the callbacks still queued
    assert [e["event"] for e in logs].count("callback.failed") == 1


def test_a_callback_raising_system_exit_does_not_skip_the_next_callbacks(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    from ..logs import capture_logs

    later = threading.Event()
    with capture_logs() as logs:
        fut = blocking_client.invoke_async(blocking_server.addr, req(ECHO), 5)
        fut.add_done_callback(lambda _: sys.exit(3))
        fut.add_done_callback(lambda _: later.set())
        assert later.wait(5)  # the second callback ran although the first raised SystemExit
        blocking_client.shutdown()
    assert [e["event"] for e in logs].count("callback.failed") == 1


def test_blocking_timeout(blocking_server: RemotingServer,
                          blocking_client: RemotingClient) -> None:
    gate = Gate()
    blocking_server.register_processor(GATED, gate)
    with pytest.raises(RemotingTimeoutError):
        blocking_client.invoke_sync(blocking_server.addr, req(GATED), timeout=0.3)
    gate.release()
    assert blocking_client.statistics().in_flight == 0


def test_invoke_many_from_a_plain_thread(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    reqs = [req(ASYNC_ECHO, str(i).encode()) for i in range(2000)]
    results = blocking_client.invoke_many(blocking_server.addr, reqs, timeout=10, limit=64)
    assert [r.body for r in results] == [str(i).encode() for i in range(2000)]  # type: ignore[union-attr]


def test_client_refuses_to_be_pickled(blocking_client: RemotingClient) -> None:
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(blocking_client)
    assert pickle.loads(pickle.dumps(ClientConfig(connect_timeout=1.5))).connect_timeout == 1.5


def test_blocking_call_from_the_loop_thread_raises(blocking_server: RemotingServer) -> None:
    # The mistake as users make it: an async processor (run on the client's loop thread)
    # calling the blocking client it belongs to.
    outcome: list[BaseException] = []

    class CallsBlockingClient(AsyncRequestProcessor):
        async def process_request(self, ctx: RequestContext, request: RemotingCommand
                                  ) -> RemotingCommand:
            try:
                client.invoke_sync(blocking_server.addr, req(ECHO), timeout=1)
            except BaseException as exc:
                outcome.append(exc)
            return RemotingCommand.create_response(ResponseCode.SUCCESS)

    with RemotingClient() as client:
        client.register_processor(PUSHED, CallsBlockingClient())
        assert client.invoke_sync(blocking_server.addr, req(ECHO), timeout=5).code == 0
        [channel] = blocking_server.channels()
        pushed = blocking_server.invoke_sync(channel, req(PUSHED), timeout=5)
    assert pushed.code == ResponseCode.SUCCESS
    assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError)
    assert "runs a trio event loop" in str(outcome[0])


def test_calls_after_shutdown_raise_and_shutdown_is_idempotent(
    blocking_server: RemotingServer,
) -> None:
    others = set(threading.enumerate())  # other tests' clients' threads (pytest-xdist)
    client = RemotingClient().start()
    try:
        assert client.invoke_sync(blocking_server.addr, req(ECHO), 5).code == (
            ResponseCode.SUCCESS)
        client.shutdown()
        client.shutdown()
        with pytest.raises(RemotingError, match="closed"):
            client.invoke_sync(blocking_server.addr, req(ECHO), 5)
    finally:
        client.shutdown()  # idempotent: stops it if the test failed before its own calls
    assert not any(t.name.startswith("remoting-client") and t not in others
                   for t in threading.enumerate())


def test_shutdown_fails_pending_calls_with_a_clear_error() -> None:
    server = RemotingServer(ServerConfig()).start()
    gate = Gate()
    server.register_processor(GATED, gate)
    client = RemotingClient().start()
    try:
        fut = client.invoke_async(server.addr, req(GATED), timeout=30)
        assert gate.entered.acquire(timeout=5)
        client.shutdown()
        with pytest.raises(RemotingError):
            fut.result(5)
        assert fut.done()
    finally:
        gate.release()
        client.shutdown()
        server.shutdown()


def test_context_managers_start_and_stop() -> None:
    with RemotingServer(ServerConfig()) as server:
        server.register_processor(ECHO, __import__("processors").EchoProcessor())
        with RemotingClient() as client:
            assert client.invoke_sync(server.addr, req(ECHO, b"cm"), 5).body == b"cm"
        assert not client.is_running

