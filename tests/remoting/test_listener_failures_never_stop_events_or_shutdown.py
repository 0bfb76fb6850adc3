"""A channel event listener that raises, blocks or is slow never ends event delivery nor hangs
the shutdown."""

from __future__ import annotations

import socket
import threading
from typing import Any

from remoting import RemotingServer
from remoting._core._events import MAX_QUEUED_EVENTS, EventDispatcher

from ..hangs import HANG_SECONDS, returns_within
from ..logs import capture_logs


class DyingListener:
    """Raises SystemExit (a BaseException) on every connect; counts the closes."""

    def __init__(self) -> None:
        self.closes = threading.Semaphore(0)

    def on_channel_connect(self, remote_addr: str, channel: Any) -> None:
        raise SystemExit("listener bug")

    def on_channel_close(self, remote_addr: str, channel: Any) -> None:
        self.closes.release()

    def on_channel_exception(self, remote_addr: str, channel: Any) -> None:
        pass

    def on_channel_idle(self, remote_addr: str, channel: Any) -> None:
        pass


class StuckListener:
    """Blocks in its first event until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def _block(self) -> None:
        self.calls += 1
        self.entered.set()
        self.release.wait(30)

    def on_channel_connect(self, remote_addr: str, channel: Any) -> None:
        self._block()

    on_channel_close = on_channel_exception = on_channel_idle = on_channel_connect


def test_a_listener_raising_a_base_exception_does_not_end_event_delivery() -> None:
    server = RemotingServer().start()
    listener = DyingListener()
    server.register_channel_event_listener(listener)
    try:
        with capture_logs() as logs:
            for _ in range(3):
                socket.create_connection(("127.0.0.1", server.port)).close()
                assert listener.closes.acquire(timeout=10)  # delivered after a SystemExit
        failed = [e for e in logs if e["event"] == "listener.failed"]
        assert len(failed) == 3 and all(e["method"] == "on_channel_connect" for e in failed)
    finally:
        server.shutdown()


def test_closing_with_a_full_queue_and_a_stuck_listener_is_bounded() -> None:
    events = EventDispatcher("remoting-test-events")
    listener = StuckListener()
    events.add(listener)
    try:
        events.emit("connect", "peer:1", None)  # type: ignore[arg-type]
        assert listener.entered.wait(10)
        for _ in range(MAX_QUEUED_EVENTS):
            events.emit("close", "peer:1", None)  # type: ignore[arg-type]
        assert events.dropped == 0
        with capture_logs() as logs:  # the queue is full: the rest are dropped and counted
            for _ in range(100):
                events.emit("close", "peer:1", None)  # type: ignore[arg-type]
        assert events.dropped == 100
        assert [e["dropped"] for e in logs if e["event"] == "event.dropped"] == [
            1, 2, 4, 8, 16, 32, 64]  # a warning at 1, 2, 4, 8...: never one per event
        closer = threading.Thread(target=events.close, args=(0.5,), daemon=True)
        with capture_logs() as logs:
            closer.start()
            closer.join(HANG_SECONDS)
            assert not closer.is_alive(), "close() blocked on the full queue"
        [left] = [e for e in logs if e["event"] == "events.undelivered"]
        assert left["events"] == MAX_QUEUED_EVENTS
    finally:
        listener.release.set()


def test_shutdown_does_not_wait_for_a_stuck_listener_beyond_its_bound() -> None:
    server = RemotingServer().start()
    listener = StuckListener()
    server.register_channel_event_listener(listener)
    try:
        socket.create_connection(("127.0.0.1", server.port)).close()
        assert listener.entered.wait(10)
        # the listener stays stuck until the end of the test: a shutdown waiting for it hangs
        returns_within(HANG_SECONDS, server.shutdown)
    finally:
        listener.release.set()
