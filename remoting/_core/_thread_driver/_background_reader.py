"""`BackgroundReader`: the one thread of a thread-driven client that reads when nobody waits.

Theory of operation:
- Callers read their own answers (`ThreadConnection.wait`). Some things must be read or done
  while no caller waits: answers to calls nobody waits for (``invoke_async`` with a callback,
  a future not yet waited for), the server's requests (a client with processors), the rest
  of a frame a leaving reader left begun, bytes a sender left for a full socket, and the
  timers (calls nobody waits for reaching their deadline, idle connections, stalled frames,
  a connection told GO_AWAY that has finished). This thread does them, and only them.
- A connection asks for it (`want`) when a reader leaves it with something to read, or a
  sender leaves it bytes. On each pass the thread asks every connection it watches what to
  poll for (`ThreadConnection.background_mask`, under that connection's mutex, so a reader
  leaving at the same moment either sees the poll or wakes the thread), polls them and a
  wake-up pipe together until the earliest timer, reads or sends what is ready (never
  waiting on one connection), and runs its duties' timers. A connection whose read role a
  caller holds is left alone until that caller leaves.
- `want` and `arm` write one byte to the pipe only when the thread would otherwise sleep
  past what they ask for; calls whose thread reads for itself cost it nothing.
- Started on first use, stopped by `stop` (shutdown), which joins it.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import threading
from time import monotonic
from typing import TYPE_CHECKING, Final, Protocol

from ..._log import log
from ._socket_io import poll_ms

if TYPE_CHECKING:
    from ._thread_connection import ThreadConnection

__all__ = ["BackgroundDuties", "BackgroundReader"]

STOP_SECONDS: Final = 5.0  # how long `stop` waits for the thread
_ERROR_EVENTS: Final = select.POLLERR | select.POLLHUP | select.POLLNVAL


class BackgroundDuties(Protocol):
    """What the background reader runs besides reading: the owner's timers."""

    def next_timer(self) -> float:
        """When `on_timer` should run next (`time.monotonic`)."""
        ...

    def on_timer(self, now: float) -> None:
        """Run what is due at ``now``."""
        ...


class BackgroundReader:
    """The background thread of one thread-driven client (see the module docstring)."""

    def __init__(self, name: str, duties: BackgroundDuties) -> None:
        self.name = name
        self._duties = duties
        self._lock = threading.Lock()
        self._wanted: set[ThreadConnection] = set()
        self._to_flush: dict[ThreadConnection, float] = {}  # frames waiting: send them by then
        self._thread: threading.Thread | None = None
        self._stopping = False
        # when the thread wakes next by itself: -inf while it runs (it looks at the timers
        # before it sleeps again), inf while it looks (anything armed then wakes it)
        self.armed = -math.inf
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    @property
    def thread(self) -> threading.Thread | None:
        """The thread, once started."""
        return self._thread

    def want(self, conn: ThreadConnection) -> None:
        """Watch ``conn`` (something must be read or sent there and no caller does it)."""
        with self._lock:
            self._wanted.add(conn)
            if self._start_locked():
                return
        self._wake()

    def flush_soon(self, conn: ThreadConnection, when: float) -> None:
        """Send what waits on ``conn`` at ``when`` if its reader has not by then."""
        with self._lock:
            if conn in self._to_flush:
                return
            self._to_flush[conn] = when
            started = self._start_locked()
        if not started and when < self.armed:
            self._wake()

    def arm(self, when: float) -> None:
        """Run the timers at ``when`` at the latest (a call nobody waits for ends then)."""
        if when < self.armed:
            self._wake()
        elif self._thread is None:
            with self._lock:
                self._start_locked()

    def start(self) -> None:
        """Start the thread if it is not running (idempotent)."""
        with self._lock:
            self._start_locked()

    def _start_locked(self) -> bool:
        """Start the thread unless it runs or stopped; True if started now."""
        if self._thread is not None or self._stopping:
            return False
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return True

    def _wake(self) -> None:
        with self._lock:  # never a closed pipe's number, which a new socket may now have
            fd = self._wake_w
            if fd >= 0:
                with contextlib.suppress(BlockingIOError, OSError):  # full: a wake is pending
                    os.write(fd, b"\0")

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """Stop the thread and wait for it (not from itself) up to ``timeout`` seconds."""
        with self._lock:
            self._stopping = True
            thread = self._thread
        self._wake()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                log.warning("reader.still_running", thread=self.name, seconds=timeout)
                return
        with self._lock:
            fds, self._wake_r, self._wake_w = (self._wake_r, self._wake_w), -1, -1
        for fd in fds:
            if fd >= 0:
                os.close(fd)

    def _send_waiting(self, now: float) -> None:
        """Send what waited for a reader past its time (`flush_soon`)."""
        with self._lock:
            due = [conn for conn, when in self._to_flush.items() if when <= now]
            for conn in due:
                del self._to_flush[conn]
        for conn in due:
            try:
                conn.send_queued()
            except Exception:  # a bug: this thread must keep serving the others
                log.error("background.failed", conn_id=conn.id, exc_info=True)

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        polled: dict[int, tuple[ThreadConnection, int]] = {}
        duties = self._duties
        while not self._stopping:
            with self._lock:
                wanted = list(self._wanted)
            watch: dict[int, tuple[ThreadConnection, int]] = {}
            for conn in wanted:
                events = conn.background_mask()
                if events:
                    watch[conn.fileno] = (conn, events)
                else:
                    with self._lock:
                        self._wanted.discard(conn)
            for fd in polled:
                if fd not in watch:
                    with contextlib.suppress(KeyError, ValueError):
                        poller.unregister(fd)
            for fd, (conn, events) in watch.items():
                if polled.get(fd) != (conn, events):
                    poller.register(fd, events)
            polled = watch
            # from here until it sleeps, a timer armed or a flush asked for wakes it (they may
            # come after it read the next one: it would sleep past them otherwise)
            self.armed = math.inf
            wake_at = duties.next_timer()
            with self._lock:
                if self._to_flush:
                    wake_at = min(wake_at, min(self._to_flush.values()))
            self.armed = wake_at
            try:
                ready = poller.poll(poll_ms(wake_at - monotonic()))
            except InterruptedError:
                ready = []
            self.armed = -math.inf
            for fd, events in ready:
                if fd == self._wake_r:
                    with contextlib.suppress(BlockingIOError, OSError):
                        os.read(self._wake_r, 4096)
                    continue
                entry = polled.get(fd)
                if entry is None:
                    continue
                conn = entry[0]
                try:
                    if events & select.POLLOUT:
                        conn.flush_parked()
                    if events & ~select.POLLOUT or events & _ERROR_EVENTS:
                        conn.read_now()
                except Exception:  # a bug: this thread must keep serving the others
                    log.error("background.failed", conn_id=conn.id, exc_info=True)
                    conn.close("the background reader failed on it", broken=True)
            now = monotonic()
            self._send_waiting(now)
            if now >= wake_at:
                try:
                    duties.on_timer(now)
                except Exception:
                    log.error("background.failed", during="timers", exc_info=True)
