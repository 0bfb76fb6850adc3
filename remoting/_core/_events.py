"""Channel events (RocketMQ's ChannelEventListener), delivered in order off the event loop.

The loop only appends to a bounded queue (10,000 events, as RocketMQ's NettyEventExecutor);
one daemon thread delivers them in order. Events beyond the bound are dropped and counted.
Whatever a listener raises is logged and delivery goes on. `close` waits a bounded time for
the queue to drain; the events still queued then are dropped (logged), and a listener still
running finishes on its daemon thread, which then ends.
"""

from __future__ import annotations

import queue
import threading
from time import monotonic
from typing import TYPE_CHECKING, Final, Literal, Protocol

from .._log import log

if TYPE_CHECKING:
    from processors import Channel

    from ._receiving._channel_handle import ChannelHandle

__all__ = ["ChannelEventListener", "EventDispatcher", "EventKind"]

MAX_QUEUED_EVENTS: Final = 10_000  # NettyEventExecutor's maxSize
EVENTS_CLOSE_SECONDS: Final = 5.0  # how long shutdown waits for a listener still running

EventKind = Literal["connect", "close", "exception", "idle"]


class ChannelEventListener(Protocol):
    """Receives connection events; each method runs on the event thread, never the loop."""

    def on_channel_connect(self, remote_addr: str, channel: ChannelHandle) -> None: ...

    def on_channel_close(self, remote_addr: str, channel: ChannelHandle) -> None: ...

    def on_channel_exception(self, remote_addr: str, channel: ChannelHandle) -> None: ...

    def on_channel_idle(self, remote_addr: str, channel: ChannelHandle) -> None: ...


_METHODS: Final = {
    "connect": "on_channel_connect",
    "close": "on_channel_close",
    "exception": "on_channel_exception",
    "idle": "on_channel_idle",
}


class EventDispatcher:
    """A bounded queue and one thread that calls the listeners."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.listeners: list[ChannelEventListener] = []
        self.dropped = 0
        self._queue: queue.Queue[tuple[str, str, Channel] | None] = queue.Queue(
            MAX_QUEUED_EVENTS
        )
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._abandoned = False  # set by a `close` that gave up: deliver nothing more

    def add(self, listener: ChannelEventListener) -> None:
        """Register a listener and start the delivery thread if needed."""
        with self._lock:
            self.listeners.append(listener)
            if self._thread is None:
                self._thread = threading.Thread(target=self._deliver, name=self.name,
                                                daemon=True)
                self._thread.start()

    def emit(self, kind: EventKind, remote_addr: str, channel: Channel) -> None:
        """Queue an event (never blocks; counts a drop when the queue is full)."""
        if not self.listeners:
            return
        try:
            self._queue.put_nowait((_METHODS[kind], remote_addr, channel))
        except queue.Full:
            self.dropped += 1
            if self.dropped & (self.dropped - 1) == 0:  # 1, 2, 4, 8...: never a flood
                log.warning("event.dropped", kind=kind, peer=remote_addr, dropped=self.dropped)

    def _deliver(self) -> None:
        while not self._abandoned:
            item = self._queue.get()
            if item is None:
                return
            method, addr, channel = item
            for listener in list(self.listeners):
                try:
                    getattr(listener, method)(addr, channel)
                except BaseException:  # SystemExit too: a listener never ends delivery
                    log.error("listener.failed", method=method, peer=addr, exc_info=True)

    def close(self, timeout: float = EVENTS_CLOSE_SECONDS) -> None:
        """Deliver what is queued within ``timeout`` seconds, then stop the thread.

        Never waits longer: the events still queued then are dropped, counted and logged
        (``events.undelivered``); a listener still running finishes on the daemon thread.
        """
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is None:
            return
        deadline = monotonic() + timeout
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            pass
        thread.join(max(0.0, deadline - monotonic()))
        if thread.is_alive():
            self._abandoned = True
            left = self._discard()
            self.dropped += left
            try:
                self._queue.put_nowait(None)  # wakes the thread if its listener returned
            except queue.Full:  # refilled meanwhile: it stops at its next event anyway
                pass
            log.warning("events.undelivered", events=left, seconds=timeout,
                        reason="a channel event listener did not return in time")

    def _discard(self) -> int:
        """Empty the queue; return how many events it held."""
        count = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return count
            count += item is not None
