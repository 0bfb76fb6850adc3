"""`shutdown()` waits for the loop thread as long as its exit may take when every inner bound
holds (pools, event thread, callbacks, one after the other); it gave up after 10 s, less than
their 15 s, and returned silently with the loop still running. A loop that outlives the wait
is logged (``loop.still_running``)."""

from __future__ import annotations

import inspect
import threading
import time
from typing import Any

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from processors import RequestContext, RequestProcessor
from remoting import ChannelHandle, RemotingClient, RemotingServer, ResponseFuture
from remoting._core._doors._threads import CallbackRunner
from remoting._core._events import EventDispatcher
from remoting._core._loop_thread import JOIN_TIMEOUT, LoopThread
from remoting._core._receiving._pools import THREAD_JOIN_SECONDS

from ..factories import req
from ..logs import capture_logs
from .conftest import ASYNC_ECHO, install_standard_processors

HOLD = 72
STUCK_SECONDS = 30.0  # longer than any shutdown bound: released by the test when it ends


def _default(fn: Any, name: str) -> float:
    default = inspect.signature(fn).parameters[name].default
    assert isinstance(default, float)
    return default


def test_the_loop_join_bound_covers_every_inner_shutdown_bound() -> None:
    inner = (THREAD_JOIN_SECONDS + _default(EventDispatcher.close, "timeout")
             + _default(CallbackRunner.close, "timeout"))  # what the exit really waits
    assert JOIN_TIMEOUT > inner


def test_a_loop_outliving_the_wait_for_it_is_logged_once() -> None:
    release = threading.Event()

    async def serve(*, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):  # an exit that takes its time
                await trio.to_thread.run_sync(release.wait, STUCK_SECONDS)

    loop = LoopThread("remoting-test-loop")
    loop.start(serve)
    try:
        with capture_logs() as logs:
            loop.stop(join=False)
            loop.join(time.monotonic() + 0.1)
            assert loop.alive
            loop.join(time.monotonic())
        warnings = [e for e in logs if e["event"] == "loop.still_running"]
        assert len(warnings) == 1
        assert warnings[0]["thread"] == "remoting-test-loop"
        assert warnings[0]["log_level"] == "warning"
    finally:
        release.set()
        loop.join(time.monotonic() + 10)
    assert not loop.alive


class Hold(RequestProcessor):
    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.entered = threading.Event()

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.entered.set()
        self.release.wait(STUCK_SECONDS)
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


class SlowOnClose:
    def __init__(self, release: threading.Event) -> None:
        self.release = release

    def on_channel_connect(self, addr: str, channel: ChannelHandle) -> None:
        pass

    def on_channel_close(self, addr: str, channel: ChannelHandle) -> None:
        self.release.wait(STUCK_SECONDS)

    def on_channel_exception(self, addr: str, channel: ChannelHandle) -> None:
        pass

    def on_channel_idle(self, addr: str, channel: ChannelHandle) -> None:
        pass


@pytest.mark.slow  # the scenario is every 5 s bound running out: 15 s
def test_client_shutdown_returns_with_its_loop_ended_when_every_inner_bound_runs_out() -> None:
    release = threading.Event()
    server = RemotingServer()
    install_standard_processors(server)
    server.start()
    client = RemotingClient().start()
    hold = Hold(release)
    client.register_processor(HOLD, hold)
    client.register_channel_event_listener(SlowOnClose(release))
    callback_entered = threading.Event()

    def stuck_callback(_: ResponseFuture) -> None:
        callback_entered.set()
        release.wait(STUCK_SECONDS)

    try:
        client.invoke_async(server.addr, req(ASYNC_ECHO), 5, stuck_callback)
        assert callback_entered.wait(5)  # a callback thread, stuck
        [channel] = server.channels()
        server.invoke_oneway(channel, req(HOLD))  # a pool thread of the client's, stuck
        assert hold.entered.wait(5)
        # Found only now: a thread-driven client starts its loop thread when the server first
        # sends it a request.
        loop_thread = next(t for t in threading.enumerate()
                           if t.ident == client.endpoint.loop_thread_id)
        with capture_logs() as logs:
            client.shutdown()
        assert not loop_thread.is_alive(), "shutdown() returned with the loop still running"
        events = {e["event"] for e in logs}
        assert {"pool.threads_left_running", "events.undelivered",
                "callbacks.still_running"} <= events
        assert "loop.still_running" not in events
    finally:
        release.set()
        client.shutdown()
        server.shutdown()
