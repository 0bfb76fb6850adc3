"""A `shutdown()` made while another thread's is running returns once the shutdown is complete
(it returned at once, the server still serving its grace period and its threads alive); one
made from the endpoint's own threads still returns at once."""

from __future__ import annotations

import threading
import time

from codec import RemotingCommand, ResponseCode
from processors import RequestContext, RequestProcessor
from remoting import RemotingClient, RemotingServer, ResponseFuture, ServerConfig

from ..factories import req
from ..hangs import HANG_SECONDS, returns_within
from .conftest import ASYNC_ECHO, core_thread_of, install_standard_processors

SLOW = 70
STOP = 71
PROCESSING_SECONDS = 0.5  # the scenario: a request still being processed at shutdown


def _loop_thread_of(face: RemotingServer) -> threading.Thread:
    ident = face.endpoint.loop_thread_id
    return next(t for t in threading.enumerate() if t.ident == ident)


def _wait_until_begun(first: threading.Thread, begun: object) -> None:
    """Return once the first shutdown, running in ``first``, has begun (``begun()``)."""
    deadline = time.monotonic() + 5
    while not begun():  # type: ignore[operator]
        assert first.is_alive() and time.monotonic() < deadline
        first.join(0.01)


class Slow(RequestProcessor):
    def __init__(self) -> None:
        self.entered = threading.Event()

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.entered.set()
        time.sleep(PROCESSING_SECONDS)
        return RemotingCommand.create_response(ResponseCode.SUCCESS, "finished")


def test_a_second_server_shutdown_returns_once_the_first_has_shut_down() -> None:
    server = RemotingServer(ServerConfig(shutdown_grace_seconds=5)).start()
    slow = Slow()
    server.register_processor(SLOW, slow)
    loop_thread = _loop_thread_of(server)
    client = RemotingClient().start()
    try:
        future = client.invoke_async(server.addr, req(SLOW), 10)
        assert slow.entered.wait(5)
        first = threading.Thread(target=server.shutdown)
        first.start()
        _wait_until_begun(first, lambda: server.draining)
        server.shutdown()
        assert not loop_thread.is_alive(), "returned while the first shutdown was running"
        assert future.result(5).remark == "finished"
        first.join(5)
        assert not first.is_alive()
    finally:
        client.shutdown()
        server.shutdown()


def test_leaving_a_client_block_during_another_threads_shutdown_waits_for_it() -> None:
    server = RemotingServer()
    install_standard_processors(server)
    with server:
        callback_done = threading.Event()

        def slow_callback(_: ResponseFuture) -> None:
            time.sleep(PROCESSING_SECONDS)
            callback_done.set()

        with RemotingClient() as client:
            client.invoke_async(server.addr, req(ASYNC_ECHO), 5, slow_callback).result(5)
            loop_thread = core_thread_of(client)
            first = threading.Thread(target=client.shutdown)
            first.start()
            _wait_until_begun(first, lambda: not client.is_running)
        # __exit__ made the second call: the loop waited for the callback, then ended
        assert not loop_thread.is_alive(), "returned while the first shutdown was running"
        assert callback_done.is_set()
        first.join(5)
        assert not first.is_alive()


class StopsItsServer(RequestProcessor):
    """Calls its server's shutdown once another thread's shutdown has begun."""

    def __init__(self, server: RemotingServer) -> None:
        self.server = server
        self.entered = threading.Event()
        self.returned_after = -1.0

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.entered.set()
        deadline = time.monotonic() + 5
        while not self.server.draining and time.monotonic() < deadline:
            self.entered.wait(0.01)
        start = time.monotonic()
        self.server.shutdown()
        self.returned_after = time.monotonic() - start
        return RemotingCommand.create_response(ResponseCode.SUCCESS, "stopping")


def test_a_second_shutdown_from_a_processor_still_returns_at_once() -> None:
    # the first shutdown waits for this processor: waiting for the shutdown would deadlock
    # a grace of a minute: a shutdown that waited it out would hang, and the processor's
    # call (10 s) would time out
    server = RemotingServer(ServerConfig(shutdown_grace_seconds=60)).start()
    stop = StopsItsServer(server)
    server.register_processor(STOP, stop)
    client = RemotingClient().start()
    try:
        future = client.invoke_async(server.addr, req(STOP), 10)
        assert stop.entered.wait(5)
        returns_within(HANG_SECONDS, server.shutdown)
        assert future.result(5).remark == "stopping"
        assert stop.returned_after >= 0
    finally:
        client.shutdown()
        server.shutdown()
